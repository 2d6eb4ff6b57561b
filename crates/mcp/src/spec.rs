//! Which MCP server to talk to, and how: parsed from `--server`, an `mcpServers` config file or
//! the `MCP_URL` environment variable.
//!
//! The three sources end in one [`ServerSpec`] so that the client never cares where a server
//! came from. Errors name the input and end with a `hint:` line, because a wrong server string is
//! the first mistake every user makes.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::secret::Secret;

/// The environment variable read when no server is given (the spec's `MCP_URL`).
pub const MCP_URL_ENV: &str = "MCP_URL";

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerSpec {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Extra environment for the child (added to ours). Values are secrets: API keys live here.
        env: BTreeMap<String, Secret>,
        cwd: Option<PathBuf>,
    },
    /// A remote server over HTTP.
    Http {
        url: String,
        transport: HttpTransport,
        /// Extra request headers (from a config file). Values are secrets.
        headers: BTreeMap<String, Secret>,
    },
}

/// The HTTP flavour of MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    /// Streamable HTTP (MCP 2025-03-26 and later): one endpoint, POST + optional SSE responses.
    StreamableHttp,
    /// Legacy HTTP+SSE (MCP 2024-11-05): GET an event stream, POST to the announced endpoint.
    Sse,
}

impl HttpTransport {
    /// What a URL most likely speaks: legacy SSE when its path ends in `/sse`.
    pub fn infer(url: &str) -> Self {
        let path = url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/');
        if path.ends_with("/sse") { HttpTransport::Sse } else { HttpTransport::StreamableHttp }
    }
}

impl FromStr for HttpTransport {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "sse" => Ok(HttpTransport::Sse),
            "http" | "streamable-http" | "streamablehttp" | "streamable" => Ok(HttpTransport::StreamableHttp),
            _ => Err(SpecError::UnknownTransport { value: s.to_string() }),
        }
    }
}

impl fmt::Display for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HttpTransport::StreamableHttp => "streamable-http",
            HttpTransport::Sse => "sse",
        })
    }
}

/// Why a server could not be determined. Every message ends with a `hint:` line.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(
        "the MCP server string is empty\nhint: pass a URL (`--server http://localhost:3001/mcp`) or a command (`--server \"npx -y @modelcontextprotocol/server-everything\"`)"
    )]
    Empty,
    #[error("cannot split MCP server command `{input}`: {reason}\nhint: quote arguments with spaces shell-style, e.g. `--server \"python server.py --db 'my file.db'\"`")]
    BadCommand { input: String, reason: String },
    #[error("unknown MCP transport `{value}`\nhint: use `sse` or `streamable-http` (alias `http`)")]
    UnknownTransport { value: String },
    #[error("cannot read MCP config {path}: {source}\nhint: check the path given with --mcp-config")]
    ConfigRead { path: PathBuf, source: std::io::Error },
    #[error("MCP config {path} is not valid JSON: {source}\nhint: the expected shape is {{\"mcpServers\": {{\"name\": {{\"command\": \"...\", \"args\": [...]}}}}}}")]
    ConfigParse { path: PathBuf, source: serde_json::Error },
    #[error("MCP config {path} has no servers\nhint: add servers under a top-level \"mcpServers\" object")]
    NoServers { path: PathBuf },
    #[error("MCP config {path} has no server named `{name}`\nhint: servers in that file: {}", known.join(", "))]
    UnknownServer { path: PathBuf, name: String, known: Vec<String> },
    #[error("MCP config {path} has {} servers and none was chosen\nhint: pick one by name: {}", known.len(), known.join(", "))]
    AmbiguousServer { path: PathBuf, known: Vec<String> },
    #[error("server `{name}` in MCP config {path} is invalid: {reason}\nhint: give either \"command\" (stdio) or \"url\" (with optional \"type\": \"sse\" | \"http\")")]
    InvalidEntry { path: PathBuf, name: String, reason: String },
    #[error("no MCP server given\nhint: pass --server URL-or-command, --mcp-config FILE, or set {MCP_URL_ENV}")]
    NoServerGiven,
}

impl ServerSpec {
    /// Parses a `--server` value: an `http(s)://` URL (legacy SSE when the path ends in `/sse`,
    /// else streamable HTTP) or a command line, split shell-style.
    pub fn parse(input: &str) -> Result<Self, SpecError> {
        Self::parse_with_transport(input, None)
    }

    /// Like [`ServerSpec::parse`], with the HTTP transport forced (ignored for commands).
    pub fn parse_with_transport(input: &str, transport: Option<HttpTransport>) -> Result<Self, SpecError> {
        let input = input.trim();
        if input.is_empty() {
            return Err(SpecError::Empty);
        }
        if is_url(input) {
            return Ok(ServerSpec::Http { url: input.to_string(), transport: transport.unwrap_or_else(|| HttpTransport::infer(input)), headers: BTreeMap::new() });
        }
        let mut words = shell_words::split(input).map_err(|e| SpecError::BadCommand { input: input.to_string(), reason: e.to_string() })?;
        if words.is_empty() {
            return Err(SpecError::Empty);
        }
        let command = words.remove(0);
        Ok(ServerSpec::Stdio { command, args: words, env: BTreeMap::new(), cwd: None })
    }

    /// Reads server `server_name` from a JSON config in the common `mcpServers` format (Claude
    /// Desktop, Cursor; VS Code's `servers` key is accepted too). With no name, a file holding
    /// exactly one server selects it. `${VAR}` in strings is replaced from our environment.
    pub fn from_mcp_config(path: &Path, server_name: Option<&str>) -> Result<Self, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::ConfigRead { path: path.to_path_buf(), source })?;
        Self::from_mcp_config_str(&text, path, server_name)
    }

    /// [`ServerSpec::from_mcp_config`] on text already read; `path` is only used in messages.
    pub fn from_mcp_config_str(text: &str, path: &Path, server_name: Option<&str>) -> Result<Self, SpecError> {
        let file: ConfigFile = serde_json::from_str(ta_types::jsonl::strip_bom(text)).map_err(|source| SpecError::ConfigParse { path: path.to_path_buf(), source })?;
        let servers = file.mcp_servers.or(file.servers).unwrap_or_default();
        let known: Vec<String> = servers.keys().cloned().collect();
        let (name, entry) = match server_name {
            Some(name) => match servers.get(name) {
                Some(entry) => (name.to_string(), entry),
                None if known.is_empty() => return Err(SpecError::NoServers { path: path.to_path_buf() }),
                None => {
                    return Err(SpecError::UnknownServer { path: path.to_path_buf(), name: name.to_string(), known });
                }
            },
            None => match servers.len() {
                0 => return Err(SpecError::NoServers { path: path.to_path_buf() }),
                1 => {
                    let (name, entry) = servers.iter().next().expect("one server");
                    (name.clone(), entry)
                }
                _ => return Err(SpecError::AmbiguousServer { path: path.to_path_buf(), known }),
            },
        };
        entry.to_spec().map_err(|reason| SpecError::InvalidEntry { path: path.to_path_buf(), name, reason })
    }

    /// The server named by `MCP_URL`, if that variable is set and non-empty.
    pub fn from_env() -> Result<Option<Self>, SpecError> {
        match std::env::var(MCP_URL_ENV) {
            Ok(v) if !v.trim().is_empty() => Self::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// The precedence the CLI uses: `--server`, else `--mcp-config` (with `--mcp-server NAME`),
    /// else `MCP_URL`.
    pub fn resolve(server: Option<&str>, mcp_config: Option<&Path>, server_name: Option<&str>) -> Result<Self, SpecError> {
        if let Some(s) = server {
            return Self::parse(s);
        }
        if let Some(path) = mcp_config {
            return Self::from_mcp_config(path, server_name);
        }
        Self::from_env()?.ok_or(SpecError::NoServerGiven)
    }

    /// A one-line description for logs and reports: no env values, no header values, no URL
    /// credentials.
    pub fn describe(&self) -> String {
        self.to_string()
    }

    pub fn is_stdio(&self) -> bool {
        matches!(self, ServerSpec::Stdio { .. })
    }
}

impl FromStr for ServerSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        Self::parse(s)
    }
}

impl fmt::Display for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerSpec::Stdio { command, args, .. } => {
                let mut words = vec![command.clone()];
                words.extend(args.iter().cloned());
                write!(f, "stdio: {}", shell_words::join(words))
            }
            ServerSpec::Http { url, transport, .. } => write!(f, "{transport}: {}", ta_types::redact::redact_url(url)),
        }
    }
}

fn is_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: Option<BTreeMap<String, ConfigEntry>>,
    #[serde(default)]
    servers: Option<BTreeMap<String, ConfigEntry>>,
}

#[derive(Deserialize)]
struct ConfigEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(rename = "type", alias = "transport")]
    kind: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

impl ConfigEntry {
    fn to_spec(&self) -> Result<ServerSpec, String> {
        let secrets = |m: &BTreeMap<String, String>| -> BTreeMap<String, Secret> { m.iter().map(|(k, v)| (k.clone(), Secret::new(expand_env(v)))).collect() };
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err("it has both \"command\" and \"url\"".into()),
            (None, None) => Err("it has neither \"command\" nor \"url\"".into()),
            (Some(command), None) => {
                if let Some(kind) = &self.kind
                    && kind != "stdio"
                {
                    return Err(format!("\"type\": \"{kind}\" does not go with \"command\""));
                }
                if command.trim().is_empty() {
                    return Err("\"command\" is empty".into());
                }
                Ok(ServerSpec::Stdio {
                    command: expand_env(command),
                    args: self.args.iter().map(|a| expand_env(a)).collect(),
                    env: secrets(&self.env),
                    cwd: self.cwd.clone(),
                })
            }
            (None, Some(url)) => {
                let url = expand_env(url);
                if !is_url(&url) {
                    return Err(format!("\"url\" `{url}` is not an http(s) URL"));
                }
                let transport = match &self.kind {
                    Some(kind) => kind.parse().map_err(|_| format!("unknown \"type\": \"{kind}\""))?,
                    None => HttpTransport::infer(&url),
                };
                Ok(ServerSpec::Http { url, transport, headers: secrets(&self.headers) })
            }
        }
    }
}

/// Replaces `${VAR}` with the value of environment variable `VAR` (empty when unset), as
/// Claude Desktop and VS Code configs expect.
fn expand_env(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find('}') {
            Some(end) => {
                let name = &rest[start + 2..start + 2 + end];
                let name = name.strip_prefix("env:").unwrap_or(name);
                out.push_str(&std::env::var(name).unwrap_or_default());
                rest = &rest[start + 3 + end..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_transport_from_path() {
        let s = ServerSpec::parse("http://localhost:3001/mcp").unwrap();
        assert!(matches!(s, ServerSpec::Http { transport: HttpTransport::StreamableHttp, .. }));
        let s = ServerSpec::parse("https://example.com/sse/").unwrap();
        assert!(matches!(s, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
        let s = ServerSpec::parse("HTTP://example.com/sse?x=1").unwrap();
        assert!(matches!(s, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
        let s = ServerSpec::parse_with_transport("http://h/events", Some(HttpTransport::Sse)).unwrap();
        assert!(matches!(s, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
    }

    #[test]
    fn commands_split_shell_style() {
        let s = ServerSpec::parse("npx -y @modelcontextprotocol/server-everything").unwrap();
        match s {
            ServerSpec::Stdio { command, args, .. } => {
                assert_eq!(command, "npx");
                assert_eq!(args, ["-y", "@modelcontextprotocol/server-everything"]);
            }
            other => panic!("{other:?}"),
        }
        let s = ServerSpec::parse("python 'my server.py' --db \"a b.db\"").unwrap();
        assert_eq!(s.to_string(), "stdio: python 'my server.py' --db 'a b.db'");
        let err = ServerSpec::parse("python 'unclosed").unwrap_err().to_string();
        assert!(err.contains("hint:"), "{err}");
        assert!(matches!(ServerSpec::parse("  "), Err(SpecError::Empty)));
    }

    #[test]
    fn transport_names() {
        assert_eq!("sse".parse::<HttpTransport>().unwrap(), HttpTransport::Sse);
        for s in ["http", "streamable-http", "streamableHttp", "streamable_http"] {
            assert_eq!(s.parse::<HttpTransport>().unwrap(), HttpTransport::StreamableHttp, "{s}");
        }
        assert!("ws".parse::<HttpTransport>().is_err());
    }

    const CONFIG: &str = r#"{
      "mcpServers": {
        "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],
                       "env": {"API_KEY": "${TA_MCP_TEST_KEY}"}, "cwd": "/tmp"},
        "remote": {"url": "https://example.com/mcp", "type": "http", "headers": {"X-Team": "a"}},
        "legacy": {"url": "https://example.com/events", "type": "sse"},
        "guessed": {"url": "https://example.com/sse"},
        "broken": {"type": "sse"}
      }
    }"#;

    #[test]
    fn mcp_config_entries() {
        let p = Path::new("mcp.json");
        // SAFETY: only this test reads this variable.
        unsafe { std::env::set_var("TA_MCP_TEST_KEY", "k123") };
        match ServerSpec::from_mcp_config_str(CONFIG, p, Some("everything")).unwrap() {
            ServerSpec::Stdio { command, args, env, cwd } => {
                assert_eq!(command, "npx");
                assert_eq!(args.len(), 2);
                assert_eq!(env["API_KEY"].expose(), "k123");
                assert_eq!(cwd.as_deref(), Some(Path::new("/tmp")));
            }
            other => panic!("{other:?}"),
        }
        let remote = ServerSpec::from_mcp_config_str(CONFIG, p, Some("remote")).unwrap();
        assert!(matches!(&remote, ServerSpec::Http { transport: HttpTransport::StreamableHttp, headers, .. } if headers["X-Team"].expose() == "a"));
        assert!(!format!("{remote:?}").contains("\"a\""), "header values are redacted");
        let legacy = ServerSpec::from_mcp_config_str(CONFIG, p, Some("legacy")).unwrap();
        assert!(matches!(legacy, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
        let guessed = ServerSpec::from_mcp_config_str(CONFIG, p, Some("guessed")).unwrap();
        assert!(matches!(guessed, ServerSpec::Http { transport: HttpTransport::Sse, .. }));
        // A file saved with a byte-order mark (Windows editors) reads the same.
        let with_bom = format!("\u{feff}{CONFIG}");
        assert!(matches!(ServerSpec::from_mcp_config_str(&with_bom, p, Some("legacy")).unwrap(), ServerSpec::Http { transport: HttpTransport::Sse, .. }));
    }

    #[test]
    fn mcp_config_errors_teach() {
        let p = Path::new("mcp.json");
        let err = ServerSpec::from_mcp_config_str(CONFIG, p, Some("nope")).unwrap_err().to_string();
        assert!(err.contains("no server named `nope`"), "{err}");
        assert!(err.contains("hint: servers in that file: broken, everything, guessed, legacy, remote"), "{err}");
        let err = ServerSpec::from_mcp_config_str(CONFIG, p, None).unwrap_err().to_string();
        assert!(err.contains("pick one by name"), "{err}");
        let err = ServerSpec::from_mcp_config_str(CONFIG, p, Some("broken")).unwrap_err().to_string();
        assert!(err.contains("neither \"command\" nor \"url\""), "{err}");
        let err = ServerSpec::from_mcp_config_str("{", p, None).unwrap_err().to_string();
        assert!(err.contains("not valid JSON") && err.contains("hint:"), "{err}");
        let err = ServerSpec::from_mcp_config_str("{}", p, None).unwrap_err().to_string();
        assert!(err.contains("has no servers"), "{err}");
        let one = r#"{"servers": {"only": {"command": "srv"}}}"#;
        assert!(ServerSpec::from_mcp_config_str(one, p, None).unwrap().is_stdio());
        let err = ServerSpec::from_mcp_config(Path::new("/nonexistent/mcp.json"), None).unwrap_err().to_string();
        assert!(err.contains("cannot read MCP config /nonexistent/mcp.json"), "{err}");
    }

    #[test]
    fn resolve_prefers_server_flag() {
        let s = ServerSpec::resolve(Some("http://a/mcp"), Some(Path::new("/nonexistent")), None).unwrap();
        assert_eq!(s.to_string(), "streamable-http: http://a/mcp");
    }

    #[test]
    fn env_expansion() {
        // SAFETY: only this test reads this variable.
        unsafe { std::env::set_var("TA_MCP_EXPAND", "v") };
        assert_eq!(expand_env("a${TA_MCP_EXPAND}b${env:TA_MCP_EXPAND}${"), "avbv${");
    }
}
