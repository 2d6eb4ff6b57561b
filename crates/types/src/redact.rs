//! Credentials in URLs never reach output, logs, trajectories or reports: [`redact_url`] masks
//! a URL's userinfo (`user:pass@`) and the values of query parameters that look secret
//! (`api_key`, `token`, `sig`, ...), and [`redact_urls_in`] does so for every URL inside a text
//! (an error message quoting the URL it failed on). Every place that shows or stores a URL or
//! an error about one goes through here.

/// What a masked value becomes.
pub const MASK: &str = "***";

/// Query parameter names whose values are secrets, compared case-insensitively. Names that
/// contain `token`, `secret`, `password`, `apikey`/`api_key` or end in `key` are secret too.
const SECRET_PARAMS: &[&str] = &["key", "auth", "sig", "signature", "password", "pass", "pwd", "code", "credential", "credentials", "session"];

fn is_secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    SECRET_PARAMS.contains(&n.as_str())
        || ["token", "secret", "password", "apikey", "api_key", "auth", "credential", "signature"].iter().any(|w| n.contains(w))
        || n.ends_with("key")
        || n.ends_with("_sig")
}

/// `url` with its userinfo and secret query values replaced by `***`; anything that is not an
/// `scheme://` URL is returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_string() };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("{MASK}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (before_fragment, fragment) = match tail.find('#') {
        Some(i) => tail.split_at(i),
        None => (tail, ""),
    };
    let tail = match before_fragment.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, v)) if is_secret_param(k) && !v.is_empty() => format!("{k}={MASK}"),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// `text` with every `http://` or `https://` URL in it passed through [`redact_url`]. A URL
/// ends at whitespace, a quote, a bracket or `>`.
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_url(rest) {
        out.push_str(&rest[..start]);
        let len = rest[start..].find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | ')' | ']' | '}')).unwrap_or(rest.len() - start);
        out.push_str(&redact_url(&rest[start..start + len]));
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}

fn find_url(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    [lower.find("http://"), lower.find("https://")].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_secret_query_values_are_masked() {
        assert_eq!(redact_url("http://host:8/mcp?api_key=sk-1&x=2"), "http://host:8/mcp?api_key=***&x=2");
        assert_eq!(redact_url("https://user:pw@host/p?token=t#frag"), "https://***@host/p?token=***#frag");
        for name in ["key", "KEY", "access_token", "auth", "password", "sig", "X-Api-Key", "client_secret", "apiKey"] {
            assert_eq!(redact_url(&format!("http://h/?{name}=s3cret")), format!("http://h/?{name}=***"), "{name}");
        }
        assert_eq!(redact_url("http://h/mcp?page=2&limit=5"), "http://h/mcp?page=2&limit=5");
        assert_eq!(redact_url("npx -y server"), "npx -y server");
    }

    #[test]
    fn urls_inside_text_are_masked() {
        let t = "error sending request for url (http://127.0.0.1:9/mcp?api_key=sk-live-1): connection refused";
        assert_eq!(redact_urls_in(t), "error sending request for url (http://127.0.0.1:9/mcp?api_key=***): connection refused");
        assert_eq!(redact_urls_in("GET \"HTTPS://a:b@h/x\" failed"), "GET \"HTTPS://***@h/x\" failed");
        assert_eq!(redact_urls_in("no urls here"), "no urls here");
    }
}
