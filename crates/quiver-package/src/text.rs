//! Characters that make text say something other than it shows: bidirectional controls
//! (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C), zero-width characters (U+200B–U+200D,
//! U+2060, U+FEFF, U+180E), and terminal control characters (C0 except tab and line breaks,
//! DEL, C1, which include ESC sequences that move the cursor or recolour a terminal).
//!
//! The joiners U+200C and U+200D are allowed between two non-ASCII letters or symbols, where
//! Persian and Indic scripts and emoji sequences (👨‍👩‍👧) need them.
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

/// The hidden characters of `text`: (character index, character, kind), joiners between two
/// non-ASCII, non-space characters excepted.
fn hidden(text: &str) -> impl Iterator<Item = (usize, char, &'static str)> + '_ {
    let chars: Vec<char> = text.chars().collect();
    let joins = |c: Option<&char>| {
        c.is_some_and(|c| !c.is_ascii() && !c.is_whitespace() && hidden_kind(*c).is_none())
    };
    (0..chars.len()).filter_map(move |i| {
        let c = chars[i];
        let kind = hidden_kind(c)?;
        let joiner = matches!(c, '\u{200C}' | '\u{200D}')
            && i > 0
            && joins(chars.get(i - 1))
            && joins(chars.get(i + 1));
        (!joiner).then_some((i, c, kind))
    })
}

/// `text` with every hidden character (and tab and line breaks, so it stays one line) written
/// as a visible escape such as `\u{202e}` or `\n`. Borrowed when there is nothing to escape.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    let escaped: Vec<usize> = hidden(text).map(|(i, _, _)| i).collect();
    if escaped.is_empty() && !text.contains(['\t', '\n', '\r']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, c) in text.chars().enumerate() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if escaped.binary_search(&i).is_ok() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// An error when `text`, the field `field` of `file`, holds a hidden character.
pub fn check(file: &Path, field: &str, text: &str, line: Option<u64>) -> Option<Diagnostic> {
    let (i, c, kind) = hidden(text).next()?;
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
            ("می\u{200C}خواهم", None, "می\u{200C}خواهم"),
            ("👨\u{200D}👩\u{200D}👧", None, "👨\u{200D}👩\u{200D}👧"),
            ("ab\u{200C}cd", Some("zero-width"), "ab\\u{200c}cd"),
            ("\u{200D}天气", Some("zero-width"), "\\u{200d}天气"),
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
            let shown = escape_for_terminal(text);
            assert!(!shown.chars().any(|c| c.is_control()));
            assert_eq!(check(Path::new("f"), "d", &shown, None), None, "{text:?}");
        }
        assert!(matches!(escape_for_terminal("ok"), Cow::Borrowed(_)));
    }
}
