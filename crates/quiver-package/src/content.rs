//! The **content digest** of a package folder: what a workflow run pins of each package its
//! steps run, so that an instance runs a run only with the same package content it started
//! with (docs/instances.md, "Package digests").
//!
//! The digest covers the files `quiver pack` would pack (every regular file but hidden entries,
//! build litter, Quiver's state files and `*.qpkg`), each by its path, the `sha256:` of its
//! bytes and whether it runs (`0755`, else `0644`): one line `<path>\0<digest>\0<mode>\n` per
//! file, sorted by path, and the `sha256:` of those lines. It is the same whether the package
//! was installed (a store folder) or loaded from a root folder, and differs from the install
//! digest (`quiver list`), which also covers the publisher, the version and the permissions of
//! the pack manifest. A link is followed to the file it names; a link to a folder, and any other
//! entry, is left out.

use std::fs;
use std::path::Path;

use crate::digest::{sha256_digest, stream_digest};
use crate::distribution::manifest::normalized_mode;
use crate::skill_files::is_state_file;

/// Most files a content digest reads; a folder with more is refused (it is not a package).
pub const MAX_FILES: usize = 10_000;

/// The content digest of the package folder `dir`.
pub fn content_digest(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    walk(dir, "", &mut files)?;
    files.sort();
    let mut lines = String::new();
    for (path, digest, mode) in &files {
        lines.push_str(&format!("{path}\0{digest}\0{mode}\n"));
    }
    Ok(sha256_digest(lines.as_bytes()))
}

/// Whether an entry of a package folder is left out (as `quiver pack` leaves it out).
fn left_out(name: &str) -> bool {
    name.starts_with('.')
        || name == "__pycache__"
        || name == "node_modules"
        || name.ends_with(".qpkg")
        || is_state_file(name)
}

fn walk(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, String, &'static str)>,
) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if left_out(&name) {
            continue;
        }
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, &relative, out)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            if out.len() >= MAX_FILES {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_FILES} files under `{}`",
                    dir.display()
                )));
            }
            let (digest, _) = stream_digest(fs::File::open(&path)?)?;
            let mode = mode_of(&fs::metadata(&path)?);
            out.push((relative, digest, mode));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::PermissionsExt;
    normalized_mode(meta.permissions().mode())
}

#[cfg(not(unix))]
fn mode_of(_: &fs::Metadata) -> &'static str {
    normalized_mode(0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// What changes the digest (a file's bytes, a new file, a file made executable) and what
    /// does not (hidden entries, litter, state files, where the folder lies).
    #[test]
    fn what_the_content_digest_covers() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        for root in [a.path(), b.path()] {
            write(root, "quiver.yaml", "id: p\n");
            write(root, "tools/t/main.py", "print(1)\n");
        }
        let base = content_digest(a.path()).unwrap();
        assert!(base.starts_with("sha256:"), "{base}");
        assert_eq!(
            content_digest(b.path()).unwrap(),
            base,
            "same files elsewhere"
        );
        for litter in [
            ".git/HEAD",
            "__pycache__/x.pyc",
            "node_modules/m/i.js",
            "p.qpkg",
            "state.db",
        ] {
            write(b.path(), litter, "x");
        }
        assert_eq!(
            content_digest(b.path()).unwrap(),
            base,
            "litter is left out"
        );
        write(b.path(), "tools/t/main.py", "print(2)\n");
        let changed = content_digest(b.path()).unwrap();
        assert_ne!(changed, base, "a file's bytes");
        write(b.path(), "tools/t/main.py", "print(1)\n");
        assert_eq!(content_digest(b.path()).unwrap(), base, "back again");
        write(b.path(), "docs/README.md", "x");
        assert_ne!(content_digest(b.path()).unwrap(), base, "a new file");
        fs::remove_file(b.path().join("docs/README.md")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let main = b.path().join("tools/t/main.py");
            fs::set_permissions(&main, fs::Permissions::from_mode(0o755)).unwrap();
            assert_ne!(content_digest(b.path()).unwrap(), base, "the run bit");
        }
        assert!(content_digest(&a.path().join("missing")).is_err());
    }
}
