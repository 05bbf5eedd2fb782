//! Text a caller or a package wrote, made visible: control, bidirectional and invisible
//! characters shown as JSON escapes, so a person approves exactly what they see.

/// Whether `c` is shown as an escape: C0 and C1 controls, DEL, bidirectional embeddings,
/// overrides, isolates and marks, zero-width characters, line and paragraph separators, the
/// byte-order mark and Unicode tag characters.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{feff}'
        | '\u{e0000}'..='\u{e007f}')
}

/// `text` with every invisible character (see above) written as `\uXXXX` (a surrogate pair
/// beyond the BMP). Applied to JSON text it yields JSON with the same value.
pub fn escape_invisible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_become_escapes() {
        let cases = [
            ("plain", "plain"),
            ("中文 ok", "中文 ok"),
            ("a\u{202e}b", "a\\u202eb"),
            ("\u{2066}x\u{2069}", "\\u2066x\\u2069"),
            ("zero\u{200b}width", "zero\\u200bwidth"),
            ("bell\u{7}", "bell\\u0007"),
            ("c1\u{85}", "c1\\u0085"),
            ("bom\u{feff}", "bom\\ufeff"),
            ("tag\u{e0041}", "tag\\udb40\\udc41"),
            ("arabic mark\u{61c}", "arabic mark\\u061c"),
            ("emoji 🙂", "emoji 🙂"),
        ];
        for (input, want) in cases {
            assert_eq!(escape_invisible(input), want, "{input:?}");
        }
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn escaped_json_keeps_its_value() {
        let value = serde_json::json!({"t": "x\u{202e}y\u{200b}\u{e0041}", "n": 1});
        let text = quiver_store::canonical_json(&value);
        let shown = escape_invisible(&text);
        assert!(shown.is_ascii() || !shown.contains('\u{202e}'));
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }
}
