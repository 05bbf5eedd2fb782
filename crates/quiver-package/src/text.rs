//! Characters that make text say something other than it shows: bidirectional controls
//! (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C), zero-width characters (U+200B–U+200D,
//! U+2060, U+FEFF, U+180E), and terminal control characters (C0 except tab and line breaks,
//! DEL, C1, which include ESC sequences that move the cursor or recolour a terminal).
//!
//! The loader refuses them in names and descriptions ([`check`]); [`escape_for_terminal`] makes
//! any text safe to print, for the CLI's listings.

use std::borrow::Cow;
use std::fmt::Write;
use std::path::Path;

use crate::diagnostic::Diagnostic;

/// What kind of hidden character `c` is, if it is one.
pub fn hidden_kind(c: char) -> Option<&'static str> {
    match c {
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => Some("a bidirectional control character"),
        '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' => {
            Some("a zero-width character")
        }
        '\t' | '\n' | '\r' => None,
        c if c.is_control() => Some("a terminal control character"),
        _ => None,
    }
}

/// `text` with every hidden character (and tab and line breaks, so it stays one line) written
/// as a visible escape such as `\u{202e}` or `\n`. Borrowed when there is nothing to escape.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    let needs = |c: char| hidden_kind(c).is_some() || matches!(c, '\t' | '\n' | '\r');
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if hidden_kind(c).is_some() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// An error when `text`, the field `field` of `file`, holds a hidden character.
pub fn check(file: &Path, field: &str, text: &str, line: Option<u64>) -> Option<Diagnostic> {
    let (i, c, kind) = text
        .chars()
        .enumerate()
        .find_map(|(i, c)| hidden_kind(c).map(|kind| (i, c, kind)))?;
    Some(
        Diagnostic::error(
            "text-hidden-characters",
            file,
            format!(
                "`{field}` holds {kind} (U+{:04X}, character {}), which can make it read differently from what it shows",
                c as u32,
                i + 1
            ),
        )
        .at_line(line)
        .with_help("remove the character; write plain text"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_found_and_escaped() {
        let cases = [
            ("plain 天气 text", None, "plain 天气 text"),
            ("tab\tand\nline", None, "tab\\tand\\nline"),
            (
                "evil\u{202E}txt.exe",
                Some("bidirectional"),
                "evil\\u{202e}txt.exe",
            ),
            (
                "a\u{2066}b\u{2069}",
                Some("bidirectional"),
                "a\\u{2066}b\\u{2069}",
            ),
            (
                "zero\u{200B}width",
                Some("zero-width"),
                "zero\\u{200b}width",
            ),
            ("bom\u{FEFF}", Some("zero-width"), "bom\\u{feff}"),
            (
                "\u{1b}[2Jcleared",
                Some("terminal control"),
                "\\u{1b}[2Jcleared",
            ),
            ("bell\u{7}", Some("terminal control"), "bell\\u{7}"),
            ("c1\u{9b}31m", Some("terminal control"), "c1\\u{9b}31m"),
            ("del\u{7f}", Some("terminal control"), "del\\u{7f}"),
        ];
        for (text, kind, escaped) in cases {
            let found = check(Path::new("f"), "description", text, Some(3));
            match kind {
                None => assert!(found.is_none(), "{text:?}"),
                Some(kind) => {
                    let d = found.unwrap();
                    assert_eq!((d.code, d.line), ("text-hidden-characters", Some(3)));
                    assert!(d.message.contains(kind), "{}", d.message);
                }
            }
            assert_eq!(escape_for_terminal(text), escaped, "{text:?}");
            assert!(!escape_for_terminal(text).chars().any(|c| c.is_control()));
        }
        assert!(matches!(escape_for_terminal("ok"), Cow::Borrowed(_)));
    }
}
