//! Reading package files: size limits, UTF-8, and a diagnostic for every failure.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

/// The largest text file (manifest, `SKILL.md`, prompt) a package may contain, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// `path` with a leading `~/` replaced by `$HOME/` (as a shell would), for paths written in a
/// config file; any other path, or no `HOME`, is returned as written.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Reads `path` as UTF-8 text of at most [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path) -> Result<String, Diagnostic> {
    read_text_limited(path, MAX_FILE_BYTES)
}

/// Reads `path` as UTF-8 text of at most `limit` bytes.
pub fn read_text_limited(path: &Path, limit: u64) -> Result<String, Diagnostic> {
    let file = fs::File::open(path).map_err(|err| {
        Diagnostic::error(
            "file-unreadable",
            path,
            format!("cannot read the file: {err}"),
        )
    })?;
    // Sized from the metadata so a file is read in one or two calls.
    let size_hint = file.metadata().map_or(0, |m| m.len().min(limit + 1));
    let mut bytes = Vec::with_capacity(usize::try_from(size_hint).unwrap_or(0) + 1);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| {
            Diagnostic::error(
                "file-unreadable",
                path,
                format!("cannot read the file: {err}"),
            )
        })?;
    if bytes.len() as u64 > limit {
        return Err(Diagnostic::error(
            "file-too-large",
            path,
            format!("the file is larger than the limit of {limit} bytes"),
        )
        .with_help("move long material into `references/` and keep this file short"));
    }
    String::from_utf8(bytes).map_err(|err| {
        let offset = err.utf8_error().valid_up_to();
        let bytes = err.as_bytes();
        let line = bytes[..offset].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let column = (offset
            - bytes[..offset]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)) as u64
            + 1;
        Diagnostic::error("file-not-utf8", path, "the file is not valid UTF-8")
            .at(line, column)
            .with_help("save the file as UTF-8")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_encoding() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let big = dir.path().join("big");
        fs::write(&big, vec![b'a'; 11])?;
        assert_eq!(
            read_text_limited(&big, 10).unwrap_err().code,
            "file-too-large"
        );
        assert_eq!(read_text_limited(&big, 11)?, "a".repeat(11));
        let latin1 = dir.path().join("latin1");
        fs::write(&latin1, b"ok\nab\xe9")?;
        let err = read_text(&latin1).unwrap_err();
        assert_eq!(
            (err.code, err.line, err.column),
            ("file-not-utf8", Some(2), Some(3))
        );
        assert_eq!(
            read_text(&dir.path().join("missing")).unwrap_err().code,
            "file-unreadable"
        );
        Ok(())
    }

    #[test]
    fn only_a_leading_tilde_slash_is_the_home_folder() {
        let Some(home) = std::env::var_os("HOME") else {
            return;
        };
        let home = Path::new(&home);
        let cases = [
            ("~/venv/bin/python", home.join("venv/bin/python")),
            ("~", PathBuf::from("~")),
            ("~other/x", PathBuf::from("~other/x")),
            ("/opt/~/x", PathBuf::from("/opt/~/x")),
            ("relative/~/x", PathBuf::from("relative/~/x")),
        ];
        for (written, expanded) in cases {
            assert_eq!(expand_home(written), expanded, "{written}");
        }
    }
}
