//! SQL through the server's own query tool. Servers print results in their own formats (a text
//! table, a Python list of dicts, JSON...), so every query whose result is read here returns one
//! cell: the JSON of the rows, hex-encoded between markers. Hex survives any quoting or escaping
//! a server applies, so the rows come back intact from any SQLite server.

use serde_json::{Value, json};
use ta_rollout::ToolHost;

use crate::SynthError;
use crate::tools::ArgTool;

const OPEN: &str = "TAJ:";
const CLOSE: &str = ":TAJ";

/// The query tool of one server.
pub struct Sql<'a, T: ToolHost> {
    pub host: &'a T,
    pub tool: &'a ArgTool,
}

impl<T: ToolHost> Sql<'_, T> {
    /// Runs one statement; the server's text, or its error as `SynthError::Query`.
    pub async fn run(&self, sql: &str) -> Result<String, SynthError> {
        let result = self.host.call(&self.tool.name, json!({ &self.tool.arg: sql })).await.map_err(SynthError::Connection)?;
        if result.is_error {
            return Err(SynthError::Query { sql: sql.to_string(), message: result.text });
        }
        Ok(result.text)
    }

    /// The value of a SQL expression that yields JSON text (e.g. `(SELECT json_group_array(..) ..)`).
    /// Servers that cut long cells for display (the demo server shows 200 characters) get the
    /// hex in numbered pieces instead, a page of rows per call.
    pub async fn json(&self, expr: &str) -> Result<Value, SynthError> {
        let sql = format!("SELECT '{OPEN}' || hex({expr}) || '{CLOSE}' AS r");
        let text = self.run(&sql).await?;
        if let Some(v) = read_reply(&sql, &text)? {
            return Ok(v);
        }
        let mut hex = String::new();
        for page in 0.. {
            let first = page * PAGE;
            let sql = format!(
                "WITH RECURSIVE h(x) AS (SELECT hex({expr})), k(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM k WHERE i + 1 < {first} + {PAGE}) \
                 SELECT '{OPEN}' || i || '.' || substr(x, i * {PIECE} + 1, {PIECE}) || '{CLOSE}' AS r FROM h, k WHERE i * {PIECE} < length(x) ORDER BY i"
            );
            let text = self.run(&sql).await?;
            let pieces = pieces(&text);
            let in_order = pieces.iter().enumerate().all(|(j, (i, _))| *i == first + j);
            if !in_order || (page == 0 && pieces.is_empty()) {
                return Err(SynthError::Query { sql, message: format!("no decodable result in the server's reply: {}", cut(&text)) });
            }
            pieces.iter().for_each(|(_, p)| hex.push_str(p));
            if pieces.len() < PAGE {
                break;
            }
        }
        decode(&format!("{OPEN}{hex}{CLOSE}")).ok_or_else(|| SynthError::Query { sql, message: "the pieces of the reply do not decode".into() })
    }
}

/// Hex characters per piece: with the markers and the index, a cell stays under 200 characters.
const PIECE: usize = 160;
/// Pieces per call: under the row limits servers put on a listing (the demo server's is 100).
const PAGE: usize = 50;

/// The numbered pieces `TAJ:<i>.<hex>:TAJ` of a reply, in the order they appear.
fn pieces(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let body = &rest[start + OPEN.len()..];
        let Some(len) = body.find(CLOSE) else { break };
        if let Some((i, hex)) = body[..len].split_once('.').and_then(|(i, h)| Some((i.parse().ok()?, h))) {
            out.push((i, hex));
        }
        rest = &body[len + CLOSE.len()..];
    }
    out
}

/// The value in the reply to a one-cell query: `Some` when it decodes, `None` when the cell is
/// there but cut (read it in pieces). A reply without the cell is no result set: some servers
/// (PyPI's `mcp-server-sqlite`) print SQL errors as plain text without `isError`, and reading
/// that as "no rows" would silently drop whole tables, so it is the query's error.
fn read_reply(sql: &str, text: &str) -> Result<Option<Value>, SynthError> {
    if !text.contains(OPEN) {
        return Err(SynthError::Query { sql: sql.to_string(), message: format!("the server's reply is not a result set: {}", cut(text)) });
    }
    Ok(decode(text))
}

fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

/// The JSON between the markers of a reply; `Null` for an empty (SQL NULL) value.
fn decode(text: &str) -> Option<Value> {
    let start = text.find(OPEN)? + OPEN.len();
    let len = text[start..].find(CLOSE)?;
    let hex = &text[start..start + len];
    if hex.is_empty() {
        return Some(Value::Null);
    }
    let bytes: Option<Vec<u8>> = (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
    serde_json::from_slice(&bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_whatever_wraps_the_cell() {
        // `[1, "a"]` hex-encoded as SQLite's hex() writes it
        let hex: String = br#"[1,"a"]"#.iter().map(|b| format!("{b:02X}")).collect();
        for reply in [format!("r\nTAJ:{hex}:TAJ\n(1 row)"), format!("[{{'r': 'TAJ:{hex}:TAJ'}}]"), format!("[{{\"r\": \"TAJ:{hex}:TAJ\"}}]")] {
            assert_eq!(decode(&reply), Some(json!([1, "a"])), "{reply}");
        }
        assert_eq!(decode("r\nTAJ::TAJ"), Some(Value::Null));
        assert_eq!(decode("error"), None);
        assert_eq!(decode("TAJ:4G:TAJ"), None);
    }

    #[test]
    fn an_error_printed_as_text_is_an_error_not_an_empty_result() {
        // mcp-server-sqlite's reply to a failing query, without isError
        let sql = "SELECT 'TAJ:' || hex((SELECT count(*) FROM items WHERE order IS NULL)) || ':TAJ' AS r";
        let err = read_reply(sql, "Database error: near \"order\": syntax error").unwrap_err();
        assert!(matches!(&err, SynthError::Query { message, .. } if message.contains("not a result set: Database error: near \"order\"")), "{err}");
        assert!(err.to_string().contains(sql), "{err}");
        // a result set: a value, SQL NULL, or a cell cut for display (read in pieces)
        assert_eq!(read_reply(sql, "[{'r': 'TAJ:33:TAJ'}]").unwrap(), Some(json!(3)));
        assert_eq!(read_reply(sql, "r\nTAJ::TAJ\n(1 row)").unwrap(), Some(Value::Null));
        assert_eq!(read_reply(sql, "r\nTAJ:5B315D5B…\n(1 row)").unwrap(), None);
    }

    #[test]
    fn reads_numbered_pieces_in_order() {
        let reply = "r\nTAJ:0.5B31:TAJ\nTAJ:1.2C22:TAJ\nTAJ:2.61225D:TAJ\n(3 rows)";
        let got = pieces(reply);
        assert_eq!(got, vec![(0, "5B31"), (1, "2C22"), (2, "61225D")]);
        let hex: String = got.iter().map(|(_, h)| *h).collect();
        assert_eq!(decode(&format!("{OPEN}{hex}{CLOSE}")), Some(json!([1, "a"])));
    }
}
