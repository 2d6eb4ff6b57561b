//! Turning an MCP tool result into the text the model reads.
//!
//! Chat models see tool results as one string. Text content is kept verbatim; binary content is
//! summarized in a line the model can reason about (`[image: image/png, 1234 bytes]`) instead of
//! being dumped as base64, which would burn the context window for nothing.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// What a tool call produced, as the agent loop needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text parts joined by newlines, other parts summarized; `structuredContent` as JSON when
    /// there is no text.
    pub text: String,
    /// The server reported a tool-level error (`isError: true`): the model should see it and
    /// may recover, so it is an output, not an `Err`.
    pub is_error: bool,
}

/// Renders a `tools/call` result (see [`ToolOutput`]).
pub fn render_result(result: &CallToolResult) -> ToolOutput {
    let parts: Vec<String> = result.content.iter().map(render_block).collect();
    let has_text = result.content.iter().any(|b| matches!(b, ContentBlock::Text(_) | ContentBlock::Resource(_)));
    let mut text = parts.join("\n");
    if !has_text && let Some(structured) = &result.structured_content {
        let json = serde_json::to_string(structured).unwrap_or_default();
        text = if text.is_empty() { json } else { format!("{json}\n{text}") };
    }
    ToolOutput { text, is_error: result.is_error.unwrap_or(false) }
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image: {}, {} bytes]", i.mime_type, base64_len(&i.data)),
        ContentBlock::Audio(a) => format!("[audio: {}, {} bytes]", a.mime_type, base64_len(&a.data)),
        ContentBlock::Resource(r) => render_resource_contents(&r.resource),
        ContentBlock::ResourceLink(link) => {
            let mut s = format!("[resource link: {} <{}>", link.name, link.uri);
            if let Some(mime) = &link.mime_type {
                s.push_str(&format!(", {mime}"));
            }
            if let Some(desc) = &link.description {
                s.push_str(&format!(": {desc}"));
            }
            s.push(']');
            s
        }
        // ContentBlock is non-exhaustive: name what we got rather than dropping it silently.
        #[allow(unreachable_patterns)]
        other => {
            let kind = serde_json::to_value(other).ok().and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string)).unwrap_or_else(|| "unknown".into());
            format!("[{kind} content]")
        }
    }
}

/// Renders embedded or read resource contents: text as is, blobs summarized.
pub fn render_resource_contents(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
            format!("[resource: {uri}, {}, {} bytes]", mime_type.as_deref().unwrap_or("application/octet-stream"), base64_len(blob))
        }
        #[allow(unreachable_patterns)]
        _ => "[resource]".to_string(),
    }
}

/// Whether `line` is the summary of a binary part ([`render_result`]'s `[image: image/png, 1234
/// bytes]`, `[resource: …]`), which says what came back, not what it holds: a file read as a blob
/// has no lines or title to ask about.
pub fn is_summary(line: &str) -> bool {
    let Some(inner) = line.trim().strip_prefix('[').and_then(|l| l.strip_suffix(']')) else { return false };
    let unknown_kind = inner.strip_suffix(" content").is_some_and(|kind| !kind.is_empty() && !kind.contains(' '));
    inner == "resource" || unknown_kind || ["image: ", "audio: ", "resource: ", "resource link: "].iter().any(|p| inner.starts_with(p))
}

/// Decoded size of base64 data, without decoding it.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    let n = trimmed.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    n * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: serde_json::Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_joined_and_binary_summarized_and_told_apart() {
        let r = result(json!({"content": [
            {"type": "text", "text": "first"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "audio", "data": "aGVsbG8gd29ybGQ=", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "embedded"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "mimeType": "text/plain", "description": "C"}
        ]}));
        let out = render_result(&r);
        assert!(!out.is_error);
        assert_eq!(
            out.text,
            "first\n[image: image/png, 5 bytes]\n[audio: audio/wav, 11 bytes]\nembedded\n\
             [resource: file:///b.bin, application/octet-stream, 3 bytes]\n[resource link: c <file:///c>, text/plain: C]"
        );
        // The summaries are told from text: a blob has no lines of its own.
        let summaries: Vec<bool> = out.text.lines().map(is_summary).collect();
        assert_eq!(summaries, [false, true, true, false, true, true]);
        assert!(is_summary("[resource]") && is_summary("[widget content]"));
        assert!(!is_summary("[FILE] notes.md") && !is_summary("[DIR] docs") && !is_summary("[x] done") && !is_summary("[image of a cat]"));
    }

    #[test]
    fn structured_content_when_no_text() {
        let r = result(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(render_result(&r).text, r#"{"sum":3}"#);
        let r = result(json!({"content": [{"type": "text", "text": "3"}], "structuredContent": {"sum": 3}}));
        assert_eq!(render_result(&r).text, "3");
    }

    #[test]
    fn tool_errors_are_outputs() {
        let r = result(json!({"content": [{"type": "text", "text": "no such table"}], "isError": true}));
        assert_eq!(render_result(&r), ToolOutput { text: "no such table".into(), is_error: true });
    }
}
