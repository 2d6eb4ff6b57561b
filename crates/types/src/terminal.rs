//! Text an MCP server chose (its name, tool names, descriptions, error messages) is shown on the
//! user's terminal, so it must not be able to drive that terminal: an escape sequence in a tool
//! description could clear the screen, retitle the window, rewrite what was printed before it
//! or (on some terminals) write to the clipboard, and a bidi override can make the text read
//! differently from what it is. [`terminal_safe`] is the one place that neutralises it; every
//! print or log of server-provided text goes through it, as URLs go through [`crate::redact`].

use std::borrow::Cow;

/// What a removed control character or escape sequence becomes: visible, so that the user sees
/// something was there.
pub const REPLACEMENT: char = '\u{fffd}';

/// `text` with every escape sequence (CSI `ESC [ ... J`, OSC `ESC ] ... BEL`, DCS and the
/// other string sequences, two-character `ESC x`) replaced by one [`REPLACEMENT`], and every
/// other C0 or C1 control character (but `\n` and `\t`), DEL and bidi control replaced too.
/// Borrowed when nothing needed replacing, which is almost always.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\u{1b}' {
            i += escape_len(&chars[i..]);
            out.push(REPLACEMENT);
        } else if is_unsafe(c) {
            i += 1;
            out.push(REPLACEMENT);
        } else {
            i += 1;
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// Embeddings, overrides, isolates and marks: they reorder how the text around them displays
/// ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// How many chars the escape sequence starting at `s[0]` (an ESC) spans. A string sequence
/// without its terminator spans only ESC and its introducer: what follows is plain text once
/// the ESC is gone.
fn escape_len(s: &[char]) -> usize {
    match s.get(1) {
        // CSI: parameter bytes, intermediate bytes, one final byte.
        Some('[') => {
            let mut j = 2;
            while s.get(j).is_some_and(|c| ('\u{30}'..='\u{3f}').contains(c)) {
                j += 1;
            }
            while s.get(j).is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c)) {
                j += 1;
            }
            if s.get(j).is_some_and(|c| ('\u{40}'..='\u{7e}').contains(c)) { j + 1 } else { j }
        }
        // OSC, DCS, SOS, PM, APC: up to BEL or ST (`ESC \`).
        Some(']' | 'P' | 'X' | '^' | '_') => {
            for j in 2..s.len() {
                match s[j] {
                    '\u{7}' => return j + 1,
                    '\u{1b}' if s.get(j + 1) == Some(&'\\') => return j + 2,
                    _ => {}
                }
            }
            2
        }
        // Two-character sequences (`ESC c` resets the terminal), with any intermediates.
        Some(c) if (' '..='~').contains(c) => {
            let mut j = 1;
            while s.get(j).is_some_and(|c| (' '..='/').contains(c)) {
                j += 1;
            }
            if s.get(j).is_some_and(|c| ('0'..='~').contains(c)) { j + 1 } else { j }
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_replaced() {
        let cases = [
            ("clear\u{1b}[2Jscreen", "clear\u{fffd}screen"),
            ("\u{1b}]0;title\u{7}run_query", "\u{fffd}run_query"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "\u{fffd}link\u{fffd}"),
            ("\u{1b}[1;31mred\u{1b}[0m", "\u{fffd}red\u{fffd}"),
            ("reset\u{1b}c", "reset\u{fffd}"),
            ("\u{1b}P1$rdcs\u{1b}\\after", "\u{fffd}after"),
            ("unterminated \u{1b}]0;title", "unterminated \u{fffd}0;title"),
            ("trailing\u{1b}", "trailing\u{fffd}"),
            ("cr\rover", "cr\u{fffd}over"),
            ("bell\u{7} del\u{7f} c1\u{9b}2J", "bell\u{fffd} del\u{fffd} c1\u{fffd}2J"),
            ("admin\u{202e}txt.exe", "admin\u{fffd}txt.exe"),
            ("\u{2066}iso\u{2069}", "\u{fffd}iso\u{fffd}"),
        ];
        for (input, want) in cases {
            assert_eq!(terminal_safe(input), want, "{input:?}");
        }
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in ["list_tables", "Runs a query.\n\tReturns rows.", "ünïcødé — 表 🙂", ""] {
            assert!(matches!(terminal_safe(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }
}
