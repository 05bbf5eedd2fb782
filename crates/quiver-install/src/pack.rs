//! A package folder into a deterministic `.qpkg`: a gzip'd ustar archive whose first entry is
//! `.quiver/MANIFEST.json`, whose second is `.quiver/SIGNATURE.json`, then every file in
//! path order. Headers carry only the path, the size, the mode (`0644` or `0755`) and zeros
//! (no owner, mtime, user or group name), the gzip header no time or name, and no PAX or GNU
//! extension header is ever written (a path that fits no ustar header is refused), so the same
//! folder gives the same bytes whatever the umask, mtimes or owner.
//!
//! Which files: every regular file under the folder but hidden entries (`.git`, `.env`),
//! build litter (`__pycache__`, `node_modules`), Quiver's state files and `*.qpkg`; a link or
//! any other kind of entry refuses the pack (its target would be ambiguous on another machine).
//! The files pass the same path rules and limits the unpacker applies.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use flate2::{Compression, GzBuilder};
use quiver_package::Diagnostic;
use quiver_package::digest::sha256_digest;
use quiver_package::distribution::manifest::{
    FORMAT, MANIFEST_PATH, SIGNATURE_PATH, normalized_mode,
};
use quiver_package::distribution::paths::{Limits, check_depth, check_entry_path, fold_key};
use quiver_package::distribution::signature::{SignatureFile, sign};
use quiver_package::distribution::{FileEntry, PackManifest, PackPermissions};
use quiver_package::skill_files::is_state_file;

use crate::InstallError;
use crate::error::io;

/// What to pack with.
#[derive(Debug, Default)]
pub struct PackOptions {
    /// The publisher written into the manifest (`acme`).
    pub publisher: String,
    /// The version, when the folder's own (`quiver.yaml`) is to be overridden or is missing.
    pub version: Option<semver::Version>,
    /// The key to sign with, if any.
    pub signer: Option<SigningKey>,
}

/// A packed package.
#[derive(Debug)]
pub struct Packed {
    /// Its manifest.
    pub manifest: PackManifest,
    /// Its signatures.
    pub signatures: SignatureFile,
    /// The archive.
    pub bytes: Vec<u8>,
    /// The package's diagnostics (warnings; an error stops the pack).
    pub diagnostics: Vec<Diagnostic>,
}

/// A folder read into memory: its manifest and every file's bytes, in manifest order.
#[derive(Debug)]
pub struct FolderContents {
    /// The manifest.
    pub manifest: PackManifest,
    /// Each file's bytes, in the manifest's order.
    pub contents: Vec<Vec<u8>>,
    /// The package's diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

/// Loads and checks the package in `dir` ([`quiver_package::check::check_package`]) and reads
/// every file of it. An error diagnostic refuses it.
pub fn read_folder(
    dir: &Path,
    publisher: &str,
    version: Option<semver::Version>,
) -> Result<FolderContents, InstallError> {
    let loaded = quiver_package::load_package(dir);
    let diagnostics = quiver_package::check::check_package(dir, &loaded);
    let package = match loaded.package {
        Some(p) if !diagnostics.iter().any(Diagnostic::is_error) => p,
        _ => return Err(InstallError::Check(diagnostics)),
    };
    let mut files = Vec::new();
    walk(dir, "", &mut files)?;
    files.sort();
    let limits = Limits::default();
    if files.len() > limits.max_files {
        return Err(InstallError::Refused(format!(
            "the folder has {} files; a package holds at most {}",
            files.len(),
            limits.max_files
        )));
    }
    let mut folded = HashSet::new();
    let mut entries = Vec::new();
    let mut contents = Vec::new();
    let mut total = 0u64;
    for (path, source) in files {
        check_entry_path(&path)
            .and_then(|()| check_depth(&path, limits.max_depth))
            .map_err(|problem| InstallError::EntryPath {
                path: path.clone(),
                problem,
            })?;
        if !folded.insert(fold_key(&path)) {
            return Err(InstallError::Refused(format!(
                "`{path}` differs from another file only in case or Unicode normalization"
            )));
        }
        let meta = fs::symlink_metadata(&source).map_err(io(&source))?;
        let bytes = fs::read(&source).map_err(io(&source))?;
        total += bytes.len() as u64;
        if bytes.len() as u64 > limits.max_file_bytes || total > limits.max_total_bytes {
            return Err(InstallError::Refused(format!(
                "`{path}` is beyond the size limits ({} bytes a file, {} in all)",
                limits.max_file_bytes, limits.max_total_bytes
            )));
        }
        entries.push(FileEntry {
            digest: sha256_digest(&bytes),
            size: bytes.len() as u64,
            mode: normalized_mode(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()))
                .to_owned(),
            path,
        });
        contents.push(bytes);
    }
    let manifest = PackManifest {
        format: FORMAT,
        id: package.id.clone(),
        publisher: publisher.to_owned(),
        version: version
            .or(package.version.clone())
            .unwrap_or_else(|| semver::Version::new(0, 0, 0)),
        permissions: PackPermissions::from_permissions(&package.manifest.permissions),
        files: entries,
    };
    manifest.check()?;
    Ok(FolderContents {
        manifest,
        contents,
        diagnostics,
    })
}

/// Packs `dir` (see the module documentation), signed when `options.signer` is set.
pub fn pack_dir(dir: &Path, options: &PackOptions) -> Result<Packed, InstallError> {
    let folder = read_folder(dir, &options.publisher, options.version.clone())?;
    let mut signatures = SignatureFile::default();
    if let Some(key) = &options.signer {
        signatures
            .signatures
            .push(sign(key, &folder.manifest.to_canonical_bytes()));
    }
    let bytes = write_archive(&folder.manifest, &signatures, &folder.contents, Vec::new())?;
    Ok(Packed {
        manifest: folder.manifest,
        signatures,
        bytes,
        diagnostics: folder.diagnostics,
    })
}

/// Writes the archive of `manifest` with `signatures` and the files' `contents` (in the
/// manifest's order) to `out`.
pub fn write_archive<W: Write>(
    manifest: &PackManifest,
    signatures: &SignatureFile,
    contents: &[Vec<u8>],
    out: W,
) -> Result<W, InstallError> {
    let gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(out, Compression::default());
    let mut tar = tar::Builder::new(gz);
    let signature_bytes =
        serde_json::to_vec(signatures).map_err(|e| InstallError::Archive(e.to_string()))?;
    append(
        &mut tar,
        MANIFEST_PATH,
        "0644",
        &manifest.to_canonical_bytes(),
    )?;
    append(&mut tar, SIGNATURE_PATH, "0644", &signature_bytes)?;
    for (entry, bytes) in manifest.files.iter().zip(contents) {
        append(&mut tar, &entry.path, &entry.mode, bytes)?;
    }
    let gz = tar.into_inner()?;
    Ok(gz.finish()?)
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    mode: &str,
    bytes: &[u8],
) -> Result<(), InstallError> {
    let mut header = tar::Header::new_ustar();
    header
        .set_path(path)
        .map_err(|e| InstallError::Refused(format!("`{path}` cannot be stored: {e}")))?;
    header.set_size(bytes.len() as u64);
    header.set_mode(if mode == "0755" { 0o755 } else { 0o644 });
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    tar.append(&header, bytes)?;
    Ok(())
}

/// Whether an entry of a package folder is left out of the package.
fn left_out(name: &str) -> bool {
    name.starts_with('.')
        || name == "__pycache__"
        || name == "node_modules"
        || name.ends_with(".qpkg")
        || is_state_file(name)
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), InstallError> {
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(InstallError::Refused(format!(
                "`{}`: file names must be UTF-8",
                path.display()
            )));
        };
        if left_out(&name) {
            continue;
        }
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() {
            walk(&path, &relative, out)?;
        } else if kind.is_file() {
            out.push((relative, path));
        } else {
            return Err(InstallError::Refused(format!(
                "`{relative}` is a link or a special file; a package holds regular files only"
            )));
        }
    }
    Ok(())
}

/// Adds `key`'s signature to the `.qpkg` `archive` (checked as any archive is) and returns the
/// new archive: the same manifest, so the same package digest. A key that signed it already
/// is not added twice.
pub fn add_signature(archive: &[u8], key: &SigningKey) -> Result<Packed, InstallError> {
    let tmp = tempfile::tempdir()?;
    let opened = crate::archive::unpack(archive, Some(tmp.path()), &Limits::default())?;
    let mut contents = Vec::new();
    for entry in &opened.manifest.files {
        let path = tmp.path().join(&entry.path);
        contents.push(fs::read(&path).map_err(io(&path))?);
    }
    let mut signatures = opened.signatures;
    let entry = sign(key, &opened.manifest.to_canonical_bytes());
    signatures.signatures.retain(|s| s.key_id != entry.key_id);
    signatures.signatures.push(entry);
    let bytes = write_archive(&opened.manifest, &signatures, &contents, Vec::new())?;
    Ok(Packed {
        manifest: opened.manifest,
        signatures,
        bytes,
        diagnostics: Vec::new(),
    })
}
