//! Reading package files: size limits, UTF-8, and a diagnostic for every failure.
//!
//! Files of a package are read through [`PackageDir`], which refuses, before reading a byte,
//! any file that is not a regular file inside the package folder: a link out of the package
//! (`prompts/x.md -> /proc/self/environ`, `tool.yaml -> /etc/shadow`), anything under `/proc`,
//! `/dev` or `/sys`, a device, FIFO or socket. A refused file's content never reaches a
//! diagnostic, since it is never read.

use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

/// The largest text file (manifest, `SKILL.md`, prompt) a package may contain, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The largest file of a skill (`references/`, `assets/`, `scripts/`) served whole, in bytes.
pub const MAX_SKILL_ASSET_BYTES: u64 = 16 * 1024 * 1024;

/// `path` with a leading `~/` replaced by `$HOME/` (as a shell would), for paths written in a
/// config file; any other path, or no `HOME`, is returned as written.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), crate::env::home()) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Folders whose files are never read as package files, whatever links lead there.
const SYSTEM_FOLDERS: [&str; 3] = ["/proc", "/dev", "/sys"];

/// A package folder, the only place its files are read from.
///
/// Each file is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from the
/// folder itself, so the kernel refuses any path or link that leaves it (and `/proc`'s magic
/// links) in one system call. Where `openat2` is missing (Linux before 5.6, or a seccomp
/// filter refusing it), the file is opened and its descriptor's real path
/// (`/proc/self/fd/N`) checked to lie in the folder, outside `/proc`, `/dev` and `/sys`.
#[derive(Debug)]
pub struct PackageDir {
    /// The folder as given.
    path: PathBuf,
    /// The folder opened as an `O_PATH` descriptor, when it could be.
    fd: Option<OwnedFd>,
    /// The folder with every link resolved, computed on first use.
    root: OnceLock<Option<PathBuf>>,
}

impl PackageDir {
    /// The package folder `root`.
    pub fn new(root: &Path) -> PackageDir {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        PackageDir {
            path: root.to_path_buf(),
            fd,
            root: OnceLock::new(),
        }
    }

    /// The folder with every link resolved, when it could be.
    pub fn resolved(&self) -> Option<&Path> {
        self.root
            .get_or_init(|| self.path.canonicalize().ok())
            .as_deref()
    }

    /// The folder as given to [`PackageDir::new`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `path`, a file of this package, as UTF-8 text of at most [`MAX_FILE_BYTES`].
    pub fn read_text(&self, path: &Path) -> Result<String, Diagnostic> {
        self.read_text_limited(path, MAX_FILE_BYTES)
    }

    /// Reads `path`, a file of this package, as UTF-8 text of at most `limit` bytes.
    pub fn read_text_limited(&self, path: &Path, limit: u64) -> Result<String, Diagnostic> {
        let bytes = self.read_limited(path, limit)?;
        to_text(path, bytes)
    }

    /// Reads `path`, a file of this package (a path under [`PackageDir::path`]), as bytes (at
    /// most `limit`), refusing a file that is not a regular file inside the package folder
    /// without reading any of it.
    pub fn read_limited(&self, path: &Path, limit: u64) -> Result<Vec<u8>, Diagnostic> {
        let (file, meta) = self.open_regular(path)?;
        read_all(file, path, meta.len(), limit)
    }

    /// Opens `path`, a file of this package, for reading (to stream it, or only to learn its
    /// size), refusing a file that is not a regular file inside the package folder. Nothing
    /// of the file is read.
    pub fn open_regular(&self, path: &Path) -> Result<(fs::File, fs::Metadata), Diagnostic> {
        let file = self.open(path)?;
        let meta = file.metadata().map_err(|err| unreadable(path, &err))?;
        if !meta.file_type().is_file() {
            let kind = match meta.file_type() {
                t if t.is_dir() => "a folder",
                t if t.is_fifo() => "a FIFO",
                t if t.is_socket() => "a socket",
                t if t.is_char_device() || t.is_block_device() => "a device",
                _ => "not a regular file",
            };
            return Err(Diagnostic::error(
                "file-not-regular",
                path,
                format!("the package file is {kind}, not a regular file; it is not read"),
            )
            .with_help("package files must be regular files"));
        }
        Ok((file, meta))
    }

    /// Whether `path` (under [`PackageDir::path`]) exists inside the package folder, links
    /// resolved: `Some(false)` when it leads out, `None` when it does not exist or cannot be
    /// told.
    pub fn holds(&self, path: &Path) -> Option<bool> {
        let Ok(rel) = path.strip_prefix(&self.path) else {
            return Some(false);
        };
        if let Some(dir) = &self.fd {
            let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            let flags = OFlags::PATH | OFlags::CLOEXEC;
            match rustix::fs::openat2(dir, rel, flags, Mode::empty(), beneath) {
                Ok(_) => return Some(true),
                Err(Errno::XDEV | Errno::LOOP) => return Some(false),
                Err(Errno::NOSYS | Errno::PERM | Errno::INVAL) => {}
                Err(_) => return None,
            }
        }
        let real = path.canonicalize().ok()?;
        Some(self.resolved().is_some_and(|root| real.starts_with(root)))
    }

    /// Opens `path` for reading, non-blocking (so a FIFO does not wait for a writer), or the
    /// diagnostic that refuses it.
    fn open(&self, path: &Path) -> Result<fs::File, Diagnostic> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let Ok(rel) = path.strip_prefix(&self.path) else {
            return Err(outside(path));
        };
        if let Some(dir) = &self.fd {
            let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(dir, rel, flags, Mode::empty(), beneath) {
                Ok(fd) => return Ok(fs::File::from(fd)),
                Err(Errno::XDEV | Errno::LOOP) => return Err(outside(path)),
                Err(Errno::NOSYS | Errno::PERM | Errno::INVAL) => {}
                Err(err) => return Err(unreadable(path, &err.into())),
            }
        }
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|err| unreadable(path, &err.into()))?;
        let file = fs::File::from(fd);
        // Where the open file really is: the descriptor's own path, which no link can fake.
        let real = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| path.canonicalize())
            .map_err(|err| unreadable(path, &err))?;
        let inside = self.resolved().is_some_and(|root| real.starts_with(root));
        let system = SYSTEM_FOLDERS.iter().any(|f| real.starts_with(f));
        if inside && !system {
            Ok(file)
        } else {
            Err(outside(path))
        }
    }
}

fn unreadable(path: &Path, err: &std::io::Error) -> Diagnostic {
    Diagnostic::error(
        "file-unreadable",
        path,
        format!("cannot read the file: {err}"),
    )
}

fn outside(path: &Path) -> Diagnostic {
    Diagnostic::error(
        "file-outside-package",
        path,
        "the file is a link to a place outside the package folder; it is not read",
    )
    .with_help("copy the file into the package instead of linking to it")
}

/// Reads `path` as UTF-8 text of at most [`MAX_FILE_BYTES`] (a file that is not a package's:
/// the config file, a cases file).
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
    let len = file.metadata().map_or(0, |m| m.len());
    to_text(path, read_all(file, path, len, limit)?)
}

/// Reads at most `limit` bytes of `file` (`len` long by its metadata), or `file-too-large`.
fn read_all(file: fs::File, path: &Path, len: u64, limit: u64) -> Result<Vec<u8>, Diagnostic> {
    // Sized from the metadata so a file is read in one or two calls.
    let size_hint = len.min(limit + 1);
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
    Ok(bytes)
}

/// `bytes` as UTF-8, or `file-not-utf8` at the first bad byte.
fn to_text(path: &Path, bytes: Vec<u8>) -> Result<String, Diagnostic> {
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
        let Some(home) = crate::env::home() else {
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
