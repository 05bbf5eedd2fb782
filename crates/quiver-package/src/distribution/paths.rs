//! The rules every path in a package archive follows, and the limits on what one may hold.
//! A path is relative, `/`-separated, at most [`Limits::max_depth`] segments, with no empty,
//! `.` or `..` segment, no backslash, no control character and nothing under `.quiver/`
//! (the archive's own entries). Two paths that are equal after Unicode NFC normalization and
//! case folding ([`fold_key`]) may not both appear: on a case-insensitive or normalizing file
//! system one would overwrite the other.

use unicode_normalization::UnicodeNormalization;

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// The empty path.
    #[error("the path is empty")]
    Empty,
    /// Starts with `/`.
    #[error("the path is absolute")]
    Absolute,
    /// Holds `\`.
    #[error("the path holds a backslash")]
    Backslash,
    /// `a//b` or a trailing `/`.
    #[error("the path has an empty segment")]
    EmptySegment,
    /// A `.` or `..` segment.
    #[error("the path has a `.` or `..` segment")]
    DotSegment,
    /// A control character (a line break, NUL, ESC).
    #[error("the path holds a control character")]
    Control,
    /// Under `.quiver/`, which only the archive's manifest and signature use.
    #[error("the path is under `.quiver/`, which is reserved")]
    Reserved,
    /// Deeper than [`Limits::max_depth`] or longer than 255 bytes.
    #[error("the path is too deep or too long")]
    TooDeep,
}

/// What one archive may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most files.
    pub max_files: usize,
    /// Largest file, in bytes.
    pub max_file_bytes: u64,
    /// Most bytes in all.
    pub max_total_bytes: u64,
    /// Most path segments.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_files: 10_000,
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
            max_depth: 16,
        }
    }
}

/// Most bytes in a path (what a ustar header holds, prefix and name, is less still).
pub const MAX_PATH_BYTES: usize = 255;

/// Checks `path` against every rule but the depth limit's exact value (see
/// [`check_depth`]) and folding collisions (see [`fold_key`]).
pub fn check_entry_path(path: &str) -> Result<(), PathProblem> {
    if path.is_empty() {
        return Err(PathProblem::Empty);
    }
    if path.starts_with('/') {
        return Err(PathProblem::Absolute);
    }
    if path.contains('\\') {
        return Err(PathProblem::Backslash);
    }
    if path.chars().any(char::is_control) {
        return Err(PathProblem::Control);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathProblem::TooDeep);
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err(PathProblem::EmptySegment),
            "." | ".." => return Err(PathProblem::DotSegment),
            _ => {}
        }
    }
    if path.split('/').next() == Some(".quiver") {
        return Err(PathProblem::Reserved);
    }
    Ok(())
}

/// Checks that `path` has at most `max_depth` segments.
pub fn check_depth(path: &str, max_depth: usize) -> Result<(), PathProblem> {
    if path.split('/').count() > max_depth {
        Err(PathProblem::TooDeep)
    } else {
        Ok(())
    }
}

/// The key two paths collide on: NFC-normalized, then case-folded (full Unicode folding, so
/// `STRASSE` and `straße` meet).
pub fn fold_key(path: &str) -> String {
    let nfc: String = path.nfc().collect();
    caseless::default_case_fold_str(&nfc).nfc().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_has_its_verdict() {
        let cases: [(&str, Result<(), PathProblem>); 14] = [
            ("SKILL.md", Ok(())),
            ("scripts/run.py", Ok(())),
            ("references/天气.md", Ok(())),
            (".hidden-but-fine", Ok(())),
            ("", Err(PathProblem::Empty)),
            ("/etc/passwd", Err(PathProblem::Absolute)),
            ("a\\b", Err(PathProblem::Backslash)),
            ("a//b", Err(PathProblem::EmptySegment)),
            ("a/", Err(PathProblem::EmptySegment)),
            ("../x", Err(PathProblem::DotSegment)),
            ("a/./b", Err(PathProblem::DotSegment)),
            ("a\nb", Err(PathProblem::Control)),
            (".quiver/MANIFEST.json", Err(PathProblem::Reserved)),
            (&"x".repeat(300), Err(PathProblem::TooDeep)),
        ];
        for (path, want) in cases {
            assert_eq!(check_entry_path(path), want, "{path:?}");
        }
        assert_eq!(check_depth("a/b/c", 3), Ok(()));
        assert_eq!(check_depth("a/b/c/d", 3), Err(PathProblem::TooDeep));
    }

    #[test]
    fn paths_equal_after_normalization_and_folding_collide() {
        let same = [
            ("README.md", "readme.md"),
            ("caf\u{e9}.md", "cafe\u{301}.md"),
            ("STRASSE", "straße"),
        ];
        for (a, b) in same {
            assert_eq!(fold_key(a), fold_key(b), "{a} {b}");
        }
        assert_ne!(fold_key("a.md"), fold_key("b.md"));
    }
}
