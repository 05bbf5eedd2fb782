//! Reading any archive safely. Only regular files are accepted: a link, a device, a folder
//! entry, a PAX or GNU extension header is refused (the writer emits none). The first entry
//! must be `.quiver/MANIFEST.json` and the second `.quiver/SIGNATURE.json`, so the manifest is
//! checked before any file is written; then every entry's path must follow the rules of
//! [`quiver_package::distribution::paths`], no two may be equal after NFC normalization and
//! case folding, the limits on files, per-file size, total size and depth hold, and each file
//! must be listed in the manifest with its exact size, digest and mode. At the end the set of
//! files must equal the manifest's exactly.
//!
//! Files are written only under the destination given, which must be a new, empty folder; on
//! any refusal the caller removes it ([`crate::store::Store::stage_archive`] does).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use flate2::read::GzDecoder;
use quiver_package::declarations::MAX_CHECKED_BYTES;
use quiver_package::digest::hex_digest;
use quiver_package::distribution::manifest::{MANIFEST_PATH, SIGNATURE_PATH, normalized_mode};
use quiver_package::distribution::paths::{Limits, check_depth, check_entry_path, fold_key};
use quiver_package::distribution::signature::SignatureFile;
use quiver_package::distribution::{FileEntry, PackManifest};
use sha2::{Digest, Sha256};

use crate::InstallError;
use crate::error::io;

/// Largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;
/// Largest signature file read.
const MAX_SIGNATURE_BYTES: u64 = 1024 * 1024;

/// An archive's manifest and signatures, once every file matched them.
#[derive(Debug)]
pub struct Opened {
    /// The manifest.
    pub manifest: PackManifest,
    /// Its signatures (not yet checked against any trust).
    pub signatures: SignatureFile,
    /// Every file's path and bytes, in archive order; `None` for a file larger than
    /// [`MAX_CHECKED_BYTES`] (checked by digest, not kept): what the declaration check reads,
    /// so no file is read back from disk.
    pub held: Vec<(String, Option<Vec<u8>>)>,
}

/// Reads the `.qpkg` (tar.gz) `reader`, writing its files under `dest` when given (else only
/// checking them), refusing anything the module documentation lists.
pub fn unpack(
    reader: impl Read,
    dest: Option<&Path>,
    limits: &Limits,
) -> Result<Opened, InstallError> {
    unpack_checked(reader, dest, limits, |_, _| Ok(())).map(|(opened, ())| opened)
}

/// [`unpack`], calling `check` with the manifest and the signatures before any file is read
/// or written (a signature that does not let the package in stops it there).
pub fn unpack_checked<T>(
    reader: impl Read,
    dest: Option<&Path>,
    limits: &Limits,
    check: impl FnOnce(&PackManifest, &SignatureFile) -> Result<T, InstallError>,
) -> Result<(Opened, T), InstallError> {
    let mut archive = tar::Archive::new(GzDecoder::new(reader));
    let mut entries = archive.entries()?.raw(true);
    let manifest_bytes = read_meta(entries.next(), MANIFEST_PATH, MAX_MANIFEST_BYTES)?;
    let manifest = PackManifest::parse(&manifest_bytes)?;
    let signature_bytes = read_meta(entries.next(), SIGNATURE_PATH, MAX_SIGNATURE_BYTES)?;
    let signatures: SignatureFile = serde_json::from_slice(&signature_bytes)
        .map_err(|e| InstallError::Archive(format!("`{SIGNATURE_PATH}` is not valid: {e}")))?;
    check_manifest_limits(&manifest, limits)?;
    let checked = check(&manifest, &signatures)?;
    let mut expected: BTreeMap<&str, &FileEntry> = manifest
        .files
        .iter()
        .map(|f| (f.path.as_str(), f))
        .collect();
    let mut folded = HashSet::new();
    let mut count = 0usize;
    let mut held = Vec::with_capacity(manifest.files.len());
    for entry in entries {
        let mut entry = entry?;
        let path = entry_path(&entry)?;
        check_kind(&entry, &path)?;
        check_entry_path(&path)
            .and_then(|()| check_depth(&path, limits.max_depth))
            .map_err(|problem| InstallError::EntryPath {
                path: path.clone(),
                problem,
            })?;
        if !folded.insert(fold_key(&path)) {
            return Err(InstallError::Archive(format!(
                "`{path}` is listed twice, or equals another path after Unicode normalization and case folding"
            )));
        }
        count += 1;
        if count > limits.max_files {
            return Err(InstallError::Archive(format!(
                "more than {} files",
                limits.max_files
            )));
        }
        let Some(want) = expected.remove(path.as_str()) else {
            return Err(InstallError::Archive(format!(
                "`{path}` is not in the manifest"
            )));
        };
        let size = entry.header().size()?;
        if size != want.size {
            return Err(InstallError::Archive(format!(
                "`{path}` is {size} bytes; the manifest says {}",
                want.size
            )));
        }
        let mode = entry.header().mode()?;
        if normalized_mode(mode) != want.mode || mode & !0o777 != 0 {
            return Err(InstallError::Archive(format!(
                "`{path}` has mode {mode:o}; the manifest says {}",
                want.mode
            )));
        }
        let (digest, bytes) = copy_hashed(&mut entry, size, dest, &path, &want.mode)?;
        if digest != want.digest {
            return Err(InstallError::Archive(format!(
                "`{path}` does not match its digest in the manifest (changed after packing)"
            )));
        }
        held.push((path, bytes));
    }
    if let Some(missing) = expected.keys().next() {
        return Err(InstallError::Archive(format!(
            "`{missing}` is in the manifest but not in the archive"
        )));
    }
    drain_end(archive.into_inner())?;
    Ok((
        Opened {
            manifest,
            signatures,
            held,
        },
        checked,
    ))
}

/// Reads what follows the last entry to the end of the gzip stream, so its checksum is
/// checked, and refuses anything but the zero blocks that end a tar.
fn drain_end(mut rest: impl Read) -> Result<(), InstallError> {
    let mut chunk = [0u8; 4096];
    let mut total = 0usize;
    loop {
        let n = rest.read(&mut chunk).map_err(|e| {
            InstallError::Archive(format!("the archive is damaged after its last file: {e}"))
        })?;
        if n == 0 {
            return Ok(());
        }
        total += n;
        if chunk[..n].iter().any(|&b| b != 0) || total > 64 * 1024 {
            return Err(InstallError::Archive(
                "data follows the archive's last entry".into(),
            ));
        }
    }
}

/// The limits checked on the manifest before any file is read.
fn check_manifest_limits(manifest: &PackManifest, limits: &Limits) -> Result<(), InstallError> {
    if manifest.files.len() > limits.max_files {
        return Err(InstallError::Archive(format!(
            "the manifest lists {} files; at most {} are accepted",
            manifest.files.len(),
            limits.max_files
        )));
    }
    let mut total = 0u64;
    let mut folded = HashSet::new();
    for file in &manifest.files {
        check_depth(&file.path, limits.max_depth).map_err(|problem| InstallError::EntryPath {
            path: file.path.clone(),
            problem,
        })?;
        if file.size > limits.max_file_bytes {
            return Err(InstallError::Archive(format!(
                "`{}` is {} bytes; at most {} a file are accepted",
                file.path, file.size, limits.max_file_bytes
            )));
        }
        total = total.saturating_add(file.size);
        if !folded.insert(fold_key(&file.path)) {
            return Err(InstallError::Archive(format!(
                "`{}` equals another path after Unicode normalization and case folding",
                file.path
            )));
        }
    }
    if total > limits.max_total_bytes {
        return Err(InstallError::Archive(format!(
            "the files add up to {total} bytes; at most {} are accepted",
            limits.max_total_bytes
        )));
    }
    Ok(())
}

/// The path of an entry as its header holds it (ustar prefix and name), which must be UTF-8.
fn entry_path<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, InstallError> {
    let bytes = entry.path_bytes();
    String::from_utf8(bytes.into_owned())
        .map_err(|_| InstallError::Archive("an entry's path is not UTF-8".into()))
}

/// Refuses every kind of entry but a regular file, naming it.
fn check_kind<R: Read>(entry: &tar::Entry<'_, R>, path: &str) -> Result<(), InstallError> {
    use tar::EntryType as T;
    let what = match entry.header().entry_type() {
        T::Regular => return Ok(()),
        T::Symlink => "a symbolic link",
        T::Link => "a hard link",
        T::Char | T::Block => "a device",
        T::Fifo => "a FIFO",
        T::Directory => "a folder entry",
        T::XHeader | T::XGlobalHeader => "a PAX extended header",
        T::GNULongName | T::GNULongLink => "a GNU long-name header",
        _ => "an entry of an unknown kind",
    };
    Err(InstallError::Archive(format!(
        "`{}` is {what}; a package holds regular files only",
        quiver_package::text::escape_for_terminal(path)
    )))
}

/// The bytes of `MANIFEST.json` or `SIGNATURE.json`, which must be the entry `next`.
fn read_meta<R: Read>(
    next: Option<std::io::Result<tar::Entry<'_, R>>>,
    want: &str,
    limit: u64,
) -> Result<Vec<u8>, InstallError> {
    let Some(entry) = next else {
        return Err(InstallError::Archive(format!(
            "the archive ends before `{want}`"
        )));
    };
    let entry = entry?;
    let path = entry_path(&entry)?;
    check_kind(&entry, &path)?;
    if path != want {
        return Err(InstallError::Archive(format!(
            "`{want}` must come before any other entry (found `{}`)",
            quiver_package::text::escape_for_terminal(&path)
        )));
    }
    if entry.header().size()? > limit {
        return Err(InstallError::Archive(format!("`{want}` is too large")));
    }
    let mut bytes = Vec::new();
    entry.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads `size` bytes of `entry`, hashing them, writing them to `dest/path` (a new file) and
/// keeping them when at most [`MAX_CHECKED_BYTES`].
fn copy_hashed(
    entry: &mut impl Read,
    size: u64,
    dest: Option<&Path>,
    path: &str,
    mode: &str,
) -> Result<(String, Option<Vec<u8>>), InstallError> {
    let mut file = match dest {
        Some(dest) => {
            let target = dest.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).map_err(io(parent))?;
            }
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            std::os::unix::fs::OpenOptionsExt::mode(
                &mut options,
                if mode == "0755" { 0o755 } else { 0o644 },
            );
            Some((options.open(&target).map_err(io(&target))?, target))
        }
        None => None,
    };
    let mut kept = (size <= MAX_CHECKED_BYTES).then(|| Vec::with_capacity(size as usize));
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut left = size;
    let mut reader = entry.take(size);
    while left > 0 {
        let n = reader.read(&mut chunk)?;
        if n == 0 {
            return Err(InstallError::Archive(format!("`{path}` is cut short")));
        }
        left -= n as u64;
        hasher.update(&chunk[..n]);
        if let Some(kept) = kept.as_mut() {
            kept.extend_from_slice(&chunk[..n]);
        }
        if let Some((file, target)) = file.as_mut() {
            file.write_all(&chunk[..n]).map_err(io(target))?;
        }
    }
    Ok((hex_digest(&hasher.finalize()), kept))
}
