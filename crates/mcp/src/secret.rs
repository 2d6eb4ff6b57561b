//! A bearer token that cannot leak by accident.
//!
//! Tokens reach us from flags, env vars and config files and then travel through structs that
//! get logged, debug-printed and written into `config.toml`. Wrapping them in [`Secret`] makes
//! every one of those paths print `[redacted]`; the only way to the value is [`Secret::expose`],
//! which the HTTP transports call when they build the `Authorization` header.

use std::fmt;
use std::sync::Arc;

/// A secret string (bearer token, header value). `Debug` and `Display` print `[redacted]`; it has
/// no `Serialize` impl on purpose, so it cannot end up in a run directory.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(Arc::from(value.into()))
    }

    /// The token from environment variable `var`, if set and non-empty (e.g. `MCP_BEARER_TOKEN`).
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var).ok().filter(|v| !v.trim().is_empty()).map(|v| Secret::new(v.trim()))
    }

    /// The secret value. Call only where it is sent to the server it belongs to.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_are_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert!(!format!("{:?}", Some(&s)).contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }
}
