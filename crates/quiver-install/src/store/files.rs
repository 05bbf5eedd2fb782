//! File helpers of the store: atomic replacement, read-only trees and their removal.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::InstallError;
use crate::error::io;

/// Writes `bytes` to a temporary file beside `path`, syncs it and renames it over `path`.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let tmp = path.with_extension("json.tmp");
    let mut file = fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(bytes).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(parent) = path.parent()
        && let Ok(dir) = fs::File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Takes every write bit off a tree: files `0444` (`0555` when executable), folders `0555`.
/// Symbolic links (a Python environment's `bin/python3`) are left alone: changing one's mode
/// would change the file it points to.
pub(super) fn make_read_only(dir: &Path) -> Result<(), InstallError> {
    use std::os::unix::fs::PermissionsExt;
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.is_symlink() {
            continue;
        }
        if meta.is_dir() {
            make_read_only(&path)?;
        } else {
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o555
            } else {
                0o444
            };
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(io(&path))?;
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).map_err(io(dir))
}

/// Removes a tree, giving its folders back their write bit first.
pub(super) fn remove_tree(dir: &Path) -> Result<(), InstallError> {
    use std::os::unix::fs::PermissionsExt;
    fn writable(dir: &Path) {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
        if let Ok(read) = fs::read_dir(dir) {
            for entry in read.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    writable(&entry.path());
                }
            }
        }
    }
    writable(dir);
    fs::remove_dir_all(dir).map_err(io(dir))
}
