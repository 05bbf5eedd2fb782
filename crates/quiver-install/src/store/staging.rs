//! Staging: an archive unpacked and verified, or a folder copied, into `<state>/staging/<random>/`,
//! then loaded and checked; removed on any refusal and when a [`Staged`] is dropped uncommitted
//! (the folder is held by a [`super::claim::Claim`]).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use quiver_package::Diagnostic;
use quiver_package::declarations::MAX_CHECKED_BYTES;
use quiver_package::distribution::paths::Limits;
use quiver_package::distribution::signature::verify_signatures;
use quiver_package::distribution::{PackManifest, PackPermissions};

use super::{Record, Staged, Store};
use crate::InstallError;
use crate::error::io;
use crate::trust::TrustStore;

/// Files' paths and bytes held in memory (`None`: too large to check).
type Held = Vec<(String, Option<Vec<u8>>)>;

impl Store {
    /// Unpacks the `.qpkg` at `path` into a staging folder, its signatures checked against
    /// `trust` before any file is written, then loads and checks the package. Nothing is left behind when it is refused.
    pub fn stage_archive(&self, path: &Path, trust: &TrustStore) -> Result<Staged, InstallError> {
        let file = fs::File::open(path).map_err(io(path))?;
        let claim = self.claim()?;
        let unpacked = claim.dir.join("package");
        // The signatures are checked as soon as the manifest is read, before any file is.
        let result = crate::archive::unpack_checked(
            std::io::BufReader::new(file),
            Some(&unpacked),
            &Limits::default(),
            |manifest, signatures| Ok(verify_signatures(manifest, signatures, &trust.keys)?),
        )
        .map(|(opened, signed_by)| (opened.manifest, opened.held, signed_by));
        // On a refusal the claim, dropped, removes the folder.
        let (manifest, held, signed_by) = result?;
        let source = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        self.finish_staging(
            claim,
            unpacked,
            (manifest, held),
            signed_by,
            &source.display().to_string(),
        )
    }

    /// Copies the package folder `src` into a staging folder, unsigned (publisher `local`),
    /// loads and checks it; `source` says where it came from (default: the folder).
    pub fn stage_folder(&self, src: &Path, source: Option<&str>) -> Result<Staged, InstallError> {
        let folder = crate::pack::read_folder(src, "local", None)?;
        let claim = self.claim()?;
        let unpacked = claim.dir.join("package");
        let written = (|| {
            for (entry, bytes) in folder.manifest.files.iter().zip(&folder.contents) {
                let target = unpacked.join(&entry.path);
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io(parent))?;
                }
                let mut options = fs::OpenOptions::new();
                options.write(true).create_new(true);
                let mode = if entry.mode == "0755" { 0o755 } else { 0o644 };
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
                let mut out = options.open(&target).map_err(io(&target))?;
                out.write_all(bytes).map_err(io(&target))?;
            }
            Ok::<(), InstallError>(())
        })();
        written?;
        let source = match source {
            Some(s) => s.to_owned(),
            None => fs::canonicalize(src)
                .unwrap_or_else(|_| src.to_owned())
                .display()
                .to_string(),
        };
        let held = folder
            .manifest
            .files
            .iter()
            .zip(folder.contents)
            .map(|(entry, bytes)| {
                let small = bytes.len() as u64 <= MAX_CHECKED_BYTES;
                (entry.path.clone(), small.then_some(bytes))
            })
            .collect();
        self.finish_staging(
            claim,
            unpacked,
            (folder.manifest, held),
            Vec::new(),
            &source,
        )
    }

    /// Names the unpacked folder by the package id, loads and checks it, the declaration check
    /// reading the files' bytes from `held` (path and bytes, as the archive gave them) rather
    /// than from disk again.
    fn finish_staging(
        &self,
        claim: super::claim::Claim,
        unpacked: PathBuf,
        (manifest, held): (PackManifest, Held),
        signed_by: Vec<String>,
        source: &str,
    ) -> Result<Staged, InstallError> {
        let record = Record {
            id: manifest.id.to_string(),
            publisher: manifest.publisher.clone(),
            version: manifest.version.clone(),
            digest: manifest.digest(),
            source: source.to_owned(),
            unsigned: signed_by.is_empty(),
            signed_by,
            permissions: manifest.permissions.clone(),
        };
        // Every refusal below drops the claim, which removes the folder.
        let dir = &claim.dir;
        let folder = dir.join(manifest.id.as_str());
        fs::create_dir_all(&unpacked)
            .and_then(|()| fs::rename(&unpacked, &folder))
            .map_err(io(&folder))?;
        let path = dir.join("MANIFEST.json");
        fs::write(&path, manifest.to_canonical_bytes()).map_err(io(&path))?;
        let loaded = quiver_package::load_package(&folder);
        let diagnostics = quiver_package::check::check_package_held(&folder, &loaded, &held);
        let package = match loaded.package {
            Some(p) if !diagnostics.iter().any(Diagnostic::is_error) => p,
            _ => return Err(InstallError::Check(diagnostics)),
        };
        if package.id != manifest.id
            || PackPermissions::from_permissions(&package.manifest.permissions)
                != manifest.permissions
        {
            return Err(InstallError::Archive(format!(
                "the manifest's id or permissions are not those of the package it holds (`{}`)",
                package.id
            )));
        }
        Ok(Staged {
            manifest,
            package,
            diagnostics,
            record,
            claim,
        })
    }
}
