//! Server commands with placeholders, for isolated rollouts: `{workdir}` (the episode's own copy
//! of the server's state) and `{episode_id}`, filled in once per episode so that every episode
//! starts its own server on its own state.
//!
//! Placeholders are replaced in the command, its arguments, the values of its environment and
//! its working directory: servers take their state path in any of these (`--db-path FILE`,
//! `MEMORY_FILE_PATH=...`, a `cwd`).

use std::path::{Path, PathBuf};

use crate::secret::Secret;
use crate::spec::ServerSpec;

/// Replaced by the episode's working directory.
pub const WORKDIR: &str = "{workdir}";
/// Replaced by the episode's id (file-name safe).
pub const EPISODE_ID: &str = "{episode_id}";

/// The values of the placeholders for one episode.
#[derive(Debug, Clone, Copy)]
pub struct Placeholders<'a> {
    pub workdir: &'a Path,
    pub episode_id: &'a str,
}

impl Placeholders<'_> {
    /// `text` with every placeholder replaced.
    pub fn fill(&self, text: &str) -> String {
        text.replace(WORKDIR, &self.workdir.display().to_string()).replace(EPISODE_ID, self.episode_id)
    }
}

impl ServerSpec {
    /// Whether the command mentions `{workdir}` or `{episode_id}` anywhere (always false for
    /// HTTP servers, which are not started by us).
    pub fn has_placeholders(&self) -> bool {
        let has = |s: &str| s.contains(WORKDIR) || s.contains(EPISODE_ID);
        match self {
            ServerSpec::Stdio { command, args, env, cwd } => {
                has(command) || args.iter().any(|a| has(a)) || env.values().any(|v| has(v.expose())) || cwd.as_ref().is_some_and(|c| has(&c.display().to_string()))
            }
            ServerSpec::Http { .. } => false,
        }
    }

    /// This spec with the placeholders filled in; HTTP specs are returned as they are.
    pub fn instantiate(&self, p: &Placeholders<'_>) -> ServerSpec {
        match self {
            ServerSpec::Stdio { command, args, env, cwd } => ServerSpec::Stdio {
                command: p.fill(command),
                args: args.iter().map(|a| p.fill(a)).collect(),
                env: env.iter().map(|(k, v)| (k.clone(), Secret::new(p.fill(v.expose())))).collect(),
                cwd: cwd.as_ref().map(|c| PathBuf::from(p.fill(&c.display().to_string()))),
            },
            http => http.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_in_command_args_env_and_cwd() {
        let json = r#"{"mcpServers": {"m": {"command": "srv-{episode_id}", "args": ["--db", "{workdir}/db.sqlite"],
            "env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl", "KEEP": "x"}, "cwd": "{workdir}"}}}"#;
        let spec = ServerSpec::from_mcp_config_str(json, Path::new("m.json"), None).unwrap();
        assert!(spec.has_placeholders());
        let filled = spec.instantiate(&Placeholders { workdir: Path::new("/tmp/w 1"), episode_id: "s1-0-2" });
        assert!(!filled.has_placeholders());
        match filled {
            ServerSpec::Stdio { command, args, env, cwd } => {
                assert_eq!(command, "srv-s1-0-2");
                assert_eq!(args, ["--db", "/tmp/w 1/db.sqlite"]);
                assert_eq!(env["MEMORY_FILE_PATH"].expose(), "/tmp/w 1/memory.jsonl");
                assert_eq!(env["KEEP"].expose(), "x");
                assert_eq!(cwd.as_deref(), Some(Path::new("/tmp/w 1")));
            }
            other => panic!("{other:?}"),
        }
        assert!(!ServerSpec::parse("mcp-server-everything").unwrap().has_placeholders());
        assert!(!ServerSpec::parse("http://h/mcp").unwrap().has_placeholders());
    }
}
