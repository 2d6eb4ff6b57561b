//! Which database the tools serve: the bundled company database or a user's SQLite file.
//!
//! Either way the server holds one serialized image, read once, plus the descriptions that
//! `list_tables` and `describe_table` return, computed once from the same data. Every session
//! deserializes the image read-only into its own connection, so a file on disk is never opened
//! for writing and sessions never see each other's state.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rusqlite::{Connection, OpenFlags};

use crate::DemoServerError;
use crate::catalog::Catalog;
use crate::db::{self, TABLES};

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// A database ready to serve: its image and its descriptions.
#[derive(Debug)]
pub struct Database {
    /// Leaked once per database: SQLite reads a `'static` image in place, so sessions share the
    /// bytes without copying them and the image lives as long as the process may serve it.
    image: &'static [u8],
    catalog: Catalog,
    source: Source,
}

/// Where a [`Database`] came from; it decides how the server introduces the data to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The bundled, generated company database.
    Demo,
    /// A SQLite file the user named.
    File(PathBuf),
}

impl Database {
    /// The bundled company database, built once per process.
    pub fn demo() -> Arc<Self> {
        static DEMO: OnceLock<Arc<Database>> = OnceLock::new();
        Arc::clone(DEMO.get_or_init(|| {
            let mut conn = db::database();
            let tables: Vec<(String, Option<&str>)> = TABLES.iter().map(|(name, purpose)| (name.to_string(), Some(*purpose))).collect();
            let catalog = Catalog::build(&conn, "Tables in the company database:", &tables).expect("describe the demo database");
            let image = leak(conn.serialize(rusqlite::MAIN_DB).expect("serialize the demo database").to_vec());
            Arc::new(Self { image, catalog, source: Source::Demo })
        }))
    }

    /// Reads the SQLite file at `path` once, read-only, and describes its tables (all of them
    /// but SQLite's own `sqlite_*`). Fails, naming the path, when the file is missing,
    /// unreadable, not a SQLite database, or holds no tables.
    pub fn open(path: &Path) -> Result<Arc<Self>, DemoServerError> {
        check_header(path)?;
        let sqlite_error = |source| DemoServerError::File { path: path.to_path_buf(), source };
        let mut conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(sqlite_error)?;
        let tables: Vec<(String, Option<&str>)> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid")
            .and_then(|mut stmt| stmt.query_map([], |r| Ok((r.get(0)?, None)))?.collect())
            .map_err(sqlite_error)?;
        if tables.is_empty() {
            return Err(DemoServerError::NoTables(path.to_path_buf()));
        }
        let catalog = Catalog::build(&conn, "Tables in the database:", &tables).map_err(sqlite_error)?;
        let mut image = conn.serialize(rusqlite::MAIN_DB).map_err(sqlite_error)?.to_vec();
        // A WAL-mode file's header asks for WAL, which an in-memory image cannot provide (every
        // query would fail); bytes 18 and 19 (write and read format versions) back to legacy.
        if image.get(18..20) == Some(&[2, 2]) {
            image[18..20].copy_from_slice(&[1, 1]);
        }
        Ok(Arc::new(Self { image: leak(image), catalog, source: Source::File(path.to_path_buf()) }))
    }

    /// The serialized image each session opens read-only.
    pub(crate) fn image(&self) -> &'static [u8] {
        self.image
    }

    /// What `list_tables` and `describe_table` answer.
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Where the data came from.
    pub fn source(&self) -> &Source {
        &self.source
    }
}

fn leak(image: Vec<u8>) -> &'static [u8] {
    Box::leak(image.into_boxed_slice())
}

/// Checks the magic header first, because SQLite opens any file lazily and would otherwise
/// report a non-database only at the first query, as a bare "file is not a database".
fn check_header(path: &Path) -> Result<(), DemoServerError> {
    let unreadable = |source| DemoServerError::Unreadable { path: path.to_path_buf(), source };
    let mut header = Vec::with_capacity(SQLITE_HEADER.len());
    std::fs::File::open(path).map_err(unreadable)?.take(SQLITE_HEADER.len() as u64).read_to_end(&mut header).map_err(unreadable)?;
    if header != SQLITE_HEADER {
        return Err(DemoServerError::NotSqlite(path.to_path_buf()));
    }
    Ok(())
}
