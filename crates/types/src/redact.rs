//! Credentials in URLs never reach output, logs, trajectories or reports: [`redact_url`] masks
//! a URL's userinfo (`user:pass@`) and the values of query and fragment parameters whose names
//! look secret (`api_key`, `passwd`, `jwt`, `X-Amz-Signature`, an OAuth fragment's
//! `#access_token=...`), and [`redact_urls_in`] does so for every URL inside a text (an error
//! message quoting the URL it failed on). Every place that shows or stores a URL or an error
//! about one goes through here.
//!
//! Names are matched by pattern, not by a fixed list: servers invent their own spellings
//! (`userPassword`, `x-goog-signature`, `sessionid`), and masking a harmless value costs a
//! little readability while missing a secret leaks it.

/// What a masked value becomes.
pub const MASK: &str = "***";

/// Words that make a parameter secret wherever they appear in its name (`accessToken`,
/// `client_secret`, `X-Amz-Credential`, `userPassword`, `PHPSESSID`, `oauth_verifier`).
const SECRET_FRAGMENTS: &[&str] = &[
    "token",
    "secret",
    "passw",
    "passwd",
    "pwd",
    "apikey",
    "auth",
    "credential",
    "signature",
    "session",
    "sessid",
    "cookie",
    "bearer",
    "jwt",
    "hmac",
    "privatekey",
    "accesskey",
    "verifier",
    "saml",
];

/// Short words that are secret only as a whole word of the name (`sig`, `sas`, `otp`), since
/// as fragments they occur inside harmless names (`design`, `hotpath`).
const SECRET_WORDS: &[&str] = &["key", "sig", "sas", "otp", "totp", "pin", "pass", "sid", "mfa", "assertion", "ticket"];

/// Names secret only on their own: OAuth's `?code=` is a credential, `country_code` is not.
const SECRET_NAMES: &[&str] = &["code"];

/// Whether the value of parameter `name` is a secret. The name is percent-decoded and compared
/// case-insensitively, with `-`, `_`, `.` and camelCase as word breaks.
fn is_secret_param(name: &str) -> bool {
    let name = percent_decode(name);
    let words = words(&name);
    let joined: String = words.concat();
    SECRET_FRAGMENTS.iter().any(|f| joined.contains(f))
        || words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || SECRET_NAMES.contains(&joined.as_str())
        || joined.ends_with("key")
}

/// `name` split into lowercase words at non-alphanumeric characters and camelCase boundaries.
fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            prev_lower = false;
            out.push(String::new());
            continue;
        }
        if (c.is_uppercase() && prev_lower) || out.is_empty() {
            out.push(String::new());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        out.last_mut().expect("a word was pushed").extend(c.to_lowercase());
    }
    out.retain(|w| !w.is_empty());
    out
}

/// `%XX` escapes decoded (so `api%5Fkey` is `api_key`); anything undecodable is kept as is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `k=v&k=v` with the values of secret names masked. A part without `=` is kept.
fn redact_params(params: &str) -> String {
    params
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if is_secret_param(k) && !v.is_empty() => format!("{k}={MASK}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `url` with its userinfo and secret query and fragment values replaced by `***`; anything
/// that is not an `scheme://` URL is returned unchanged. A fragment is treated as parameters
/// when it holds `=` (OAuth's implicit flow puts `access_token=...&id_token=...` there); a
/// plain anchor (`#section-2`) is kept.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_string() };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("{MASK}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) if fragment.contains('=') => (before, format!("#{}", redact_params(fragment))),
        Some((before, fragment)) => (before, format!("#{fragment}")),
        None => (tail, String::new()),
    };
    let before_fragment = match before_fragment.split_once('?') {
        Some((path, query)) => format!("{path}?{}", redact_params(query)),
        None => before_fragment.to_string(),
    };
    format!("{scheme}{authority}{before_fragment}{fragment}")
}

/// Whether `url` carries `user:password@` (or just `user@`), which HTTP clients send as Basic
/// auth.
pub fn has_userinfo(url: &str) -> bool {
    let Some(scheme_end) = url.find("://") else { return false };
    let rest = &url[scheme_end + 3..];
    rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())].contains('@')
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
    fn userinfo_is_found_only_in_the_authority() {
        assert!(has_userinfo("http://u:p@h/mcp"));
        assert!(has_userinfo("https://u@h"));
        assert!(!has_userinfo("http://h/mcp?email=a@b"));
        assert!(!has_userinfo("http://h/x#a@b"));
        assert!(!has_userinfo("npx -y a@1"));
    }

    /// Credential parameter names seen in the wild, in the spellings servers use: each value
    /// is masked in a query and in a fragment.
    const SECRET_NAMES_TABLE: &[&str] = &[
        "passwd",
        "pwd",
        "pass",
        "password",
        "userPassword",
        "jwt",
        "bearer",
        "hmac",
        "access_token",
        "accessToken",
        "id_token",
        "refresh_token",
        "client_secret",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "x-goog-signature",
        "sas",
        "sig",
        "private_key",
        "privateKey",
        "apikey",
        "api-key",
        "api%5Fkey",
        "auth",
        "authorization",
        "session",
        "sessionid",
        "PHPSESSID",
        "JSESSIONID",
        "cookie",
        "otp",
        "totp",
        "mfa_code",
        "code",
        "code_verifier",
        "oauth_verifier",
        "secret",
        "token",
        "key",
        "sid",
        "pin",
        "SAMLResponse",
        "assertion",
        "ticket",
        "credentials",
    ];

    /// Ordinary parameters stay readable.
    const PLAIN_NAMES_TABLE: &[&str] = &["page", "limit", "q", "id", "offset", "sort", "team", "country_code", "design", "hotpath", "format", "user", "lang"];

    #[test]
    fn credential_names_are_masked_in_queries_and_fragments_and_plain_names_are_not() {
        for name in SECRET_NAMES_TABLE {
            assert_eq!(redact_url(&format!("http://h/mcp?{name}=s3cret&page=2")), format!("http://h/mcp?{name}=***&page=2"), "query {name}");
            assert_eq!(redact_url(&format!("http://h/cb#state=x&{name}=s3cret")), format!("http://h/cb#state=x&{name}=***"), "fragment {name}");
        }
        for name in PLAIN_NAMES_TABLE {
            let url = format!("http://h/mcp?{name}=v#{name}=v");
            assert_eq!(redact_url(&url), url, "{name}");
        }
    }

    #[test]
    fn oauth_fragments_and_mixed_urls() {
        assert_eq!(
            redact_url("https://app/cb#access_token=AT&state=st&id_token=IT&expires_in=3600"),
            "https://app/cb#access_token=***&state=st&id_token=***&expires_in=3600"
        );
        assert_eq!(redact_url("http://h/mcp?passwd=P&jwt=J#token=T"), "http://h/mcp?passwd=***&jwt=***#token=***");
        assert_eq!(redact_url("http://h/doc#section-2"), "http://h/doc#section-2");
        assert_eq!(redact_url("http://h/doc?x=1#"), "http://h/doc?x=1#");
        assert_eq!(redact_url("http://h/mcp?flag&bearer="), "http://h/mcp?flag&bearer=");
    }

    #[test]
    fn urls_inside_text_are_masked() {
        let t = "error sending request for url (http://127.0.0.1:9/mcp?api_key=sk-live-1): connection refused";
        assert_eq!(redact_urls_in(t), "error sending request for url (http://127.0.0.1:9/mcp?api_key=***): connection refused");
        assert_eq!(redact_urls_in("GET \"HTTPS://a:b@h/x\" failed"), "GET \"HTTPS://***@h/x\" failed");
        assert_eq!(redact_urls_in("no urls here"), "no urls here");
    }
}
