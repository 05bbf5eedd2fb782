//! Python-compatible helpers: what `pathlib`, `os.path.realpath`, `str` methods, `repr()`,
//! `json.dumps` and `html.escape` do on the reference's Python, so that paths, verdicts and
//! printed text match it byte for byte.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

// ------------------------------------------------------------------------- paths

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `(root, parts)` as Python's `PurePosixPath` parses a path.
fn pure_path_parts(path: &Path) -> (&'static str, Vec<String>) {
    let text = path_text(path);
    let root = if text.starts_with("//") && !text.starts_with("///") {
        "//"
    } else if text.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts = text
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .map(str::to_owned)
        .collect();
    (root, parts)
}

/// `str(pathlib.Path(path))`: the path as the reference prints it (`./a//b/` is `a/b`).
pub fn display_path(path: &Path) -> String {
    let (root, parts) = pure_path_parts(path);
    let joined = format!("{root}{}", parts.join("/"));
    if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// `pathlib.Path(path).name` (empty for `.` and `/`).
pub fn path_name(path: &Path) -> String {
    pure_path_parts(path).1.pop().unwrap_or_default()
}

/// `pathlib.Path(path).parent`, as a path.
pub fn path_parent(path: &Path) -> PathBuf {
    let (root, mut parts) = pure_path_parts(path);
    parts.pop();
    let joined = format!("{root}{}", parts.join("/"));
    PathBuf::from(if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    })
}

/// `pathlib.Path(path).resolve()`: absolute, with symlinks resolved where they exist.
pub fn resolve_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut resolved = PathBuf::from("/");
    let mut budget = 64;
    resolve_into(&mut resolved, &absolute, &mut budget);
    resolved
}

fn resolve_into(resolved: &mut PathBuf, path: &Path, budget: &mut usize) {
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => *resolved = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let candidate = resolved.join(name);
                match std::fs::read_link(&candidate) {
                    Ok(target) if *budget > 0 => {
                        *budget -= 1;
                        if target.is_absolute() {
                            *resolved = PathBuf::from("/");
                        }
                        resolve_into(resolved, &target, budget);
                    }
                    _ => *resolved = candidate,
                }
            }
        }
    }
}

// ---------------------------------------------------------------- Python helpers

/// Python's `str.isspace`.
fn py_is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
pub(super) fn py_strip(s: &str) -> &str {
    s.trim_matches(py_is_space)
}

/// Letter-like symbols Rust counts as alphabetic (Other_Alphabetic, category So) but Python's
/// `isalpha` does not.
fn is_symbol_letter(c: char) -> bool {
    matches!(c, '\u{24b6}'..='\u{24e9}' | '\u{1f130}'..='\u{1f149}' | '\u{1f150}'..='\u{1f169}' | '\u{1f170}'..='\u{1f189}')
}

/// Python's `str.isalnum` for one character: a letter (category L*) or a number (N*).
pub(super) fn py_is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    (c.is_alphabetic() || c.is_numeric())
        && !unicode_normalization::char::is_combining_mark(c)
        && !is_symbol_letter(c)
}

/// Python's `str.isprintable` for one character, without the unassigned code points.
fn py_is_printable(c: char) -> bool {
    let u = c as u32;
    if c.is_control() {
        return false;
    }
    if c == ' ' {
        return true;
    }
    // Zs, Zl, Zp
    if matches!(
        u,
        0xa0 | 0x1680 | 0x2000..=0x200a | 0x2028 | 0x2029 | 0x202f | 0x205f | 0x3000
    ) {
        return false;
    }
    // Cf
    if matches!(
        u,
        0xad | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x13438
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    ) {
        return false;
    }
    // Co, and the non-characters
    !matches!(u, 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd | 0xfffe | 0xffff)
}

/// Python's `repr()` of a string (click quotes paths in usage errors with it).
pub fn python_repr(s: &str) -> String {
    py_repr(s)
}

pub(super) fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_ascii() || py_is_printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// `json.dumps(value, indent=2)` (ASCII-only, `\uXXXX` escapes, `": "` and `","`).
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_python_json(&mut out, value, 0);
    out
}

fn write_python_json(out: &mut String, value: &Value, depth: usize) {
    let pad = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_python_json_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_python_json(out, item, depth + 1);
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_python_json_string(out, key);
                out.push_str(": ");
                write_python_json(out, item, depth + 1);
            }
            pad(out, depth);
            out.push('}');
        }
    }
}

fn write_python_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `html.escape` (with quotes).
pub(super) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    #[test]
    fn python_json_output() {
        let value = serde_json::json!({"name": "x", "d": "é 😀 \"q\" \\ \n\u{1}\u{7f}", "l": [], "m": {}, "n": ["a", {"b": "c"}]});
        assert_eq!(
            python_json(&value),
            "{\n  \"name\": \"x\",\n  \"d\": \"\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\\\ \\n\\u0001\\u007f\",\n  \"l\": [],\n  \"m\": {},\n  \"n\": [\n    \"a\",\n    {\n      \"b\": \"c\"\n    }\n  ]\n}"
        );
    }

    #[test]
    fn python_repr_quotes() {
        assert_eq!(py_repr("a"), "'a'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("'\""), "'\\'\"'");
        assert_eq!(py_repr("\t\u{1}\u{a0}é\u{200b}"), "'\\t\\x01\\xa0é\\u200b'");
    }

    #[test]
    fn pathlib_paths() {
        for (input, shown, name, parent) in [
            ("a/b", "a/b", "b", "a"),
            ("./a//b/", "a/b", "b", "a"),
            (".", ".", "", "."),
            ("", ".", "", "."),
            ("/", "/", "", "/"),
            ("//a", "//a", "a", "//"),
            ("///a", "/a", "a", "/"),
            ("a/../b", "a/../b", "b", "a/.."),
            ("SKILL.md", "SKILL.md", "SKILL.md", "."),
        ] {
            let path = Path::new(input);
            assert_eq!(display_path(path), shown, "{input:?}");
            assert_eq!(path_name(path), name, "{input:?}");
            assert_eq!(path_parent(path), PathBuf::from(parent), "{input:?}");
        }
    }

    #[test]
    fn html_escaping() {
        assert_eq!(
            html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;"
        );
    }
}
