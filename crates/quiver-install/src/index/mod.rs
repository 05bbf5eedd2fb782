//! Building and reading a package index folder (the rules are
//! [`quiver_package::distribution::index`]'s). `build` reads every `.qpkg` under the folder
//! (each checked as an archive), writes `index/<publisher>/<id>.json` and a signed
//! `snapshot.json` with the next sequence number; `resolve` finds `publisher/id[@version]` in
//! an index (a folder or an HTTP site: [`IndexLocation`]) after checking its snapshot, remembering the highest sequence seen per index in
//! `<state>/index-seen.json`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::SigningKey;
use quiver_package::digest::sha256_digest;
use quiver_package::distribution::index::{
    IndexLine, SignedSnapshot, Snapshot, check_snapshot, confusable, sign_snapshot,
};
use quiver_package::distribution::paths::Limits;

use crate::InstallError;
use crate::error::io;
use crate::store::{Staged, Store, write_atomically};
use crate::trust::TrustStore;

mod location;

pub use location::IndexLocation;

/// What `build` wrote.
#[derive(Debug, Clone)]
pub struct Built {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Versions indexed.
    pub versions: usize,
}

/// Indexes every `.qpkg` under `dir`, signed by `key`, valid for `ttl_secs`.
pub fn build(dir: &Path, key: &SigningKey, ttl_secs: u64) -> Result<Built, InstallError> {
    let mut archives = Vec::new();
    find_archives(dir, dir, &mut archives)?;
    archives.sort();
    let mut files: BTreeMap<String, Vec<IndexLine>> = BTreeMap::new();
    let mut ids: Vec<(String, String)> = Vec::new();
    for relative in &archives {
        let path = dir.join(relative);
        let file = fs::File::open(&path).map_err(io(&path))?;
        let opened =
            crate::archive::unpack(std::io::BufReader::new(file), None, &Limits::default())?;
        let m = opened.manifest;
        let (publisher, id) = (m.publisher.clone(), m.id.to_string());
        if let Some((p, other)) = ids
            .iter()
            .find(|(p, other)| *p != publisher && confusable(other, &id))
        {
            return Err(InstallError::Refused(format!(
                "`{publisher}/{id}` looks like `{p}/{other}` of another publisher; the index refuses confusable ids"
            )));
        }
        ids.push((publisher.clone(), id.clone()));
        files
            .entry(format!("index/{publisher}/{id}.json"))
            .or_default()
            .push(IndexLine {
                digest: m.digest(),
                publisher,
                id,
                version: m.version.clone(),
                archive: relative.clone(),
                permissions: m.permissions.clone(),
            });
    }
    let previous = read_snapshot(dir).ok().map(|s| s.snapshot.sequence);
    let mut digests = BTreeMap::new();
    let mut versions = 0;
    for (name, mut lines) in files {
        lines.sort_by(|a, b| a.version.cmp(&b.version));
        versions += lines.len();
        let mut text = String::new();
        for line in &lines {
            text.push_str(
                &serde_json::to_string(line).map_err(|e| InstallError::Refused(e.to_string()))?,
            );
            text.push('\n');
        }
        let path = dir.join(&name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::write(&path, &text).map_err(io(&path))?;
        digests.insert(name, sha256_digest(text.as_bytes()));
    }
    let snapshot = Snapshot {
        sequence: previous.map_or(1, |s| s + 1),
        expires: now() + ttl_secs,
        files: digests,
    };
    let signed = sign_snapshot(key, snapshot.clone());
    let bytes =
        serde_json::to_vec_pretty(&signed).map_err(|e| InstallError::Refused(e.to_string()))?;
    write_atomically(&dir.join("snapshot.json"), &bytes)?;
    Ok(Built { snapshot, versions })
}

/// An index line found, with the archive it names.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The line.
    pub line: IndexLine,
    /// The archive's path.
    pub archive: PathBuf,
}

/// Most bytes of `snapshot.json` or an index file.
const MAX_INDEX_FILE: u64 = 8 * 1024 * 1024;

/// Finds `spec` (`publisher/id` or `publisher/id@version`; the highest version without one) in
/// the index at `location`, after checking its snapshot against `trust` and the sequence last
/// seen in `state`; an archive on a site is downloaded into `scratch`.
pub fn resolve(
    location: &IndexLocation,
    spec: &str,
    trust: &TrustStore,
    state: &Path,
    scratch: &Path,
) -> Result<Resolved, InstallError> {
    let (name, version) = match spec.split_once('@') {
        Some((n, v)) => (
            n,
            Some(
                v.parse::<semver::Version>()
                    .map_err(|e| InstallError::Refused(format!("`{v}`: {e}")))?,
            ),
        ),
        None => (spec, None),
    };
    let (publisher, id) = name.split_once('/').ok_or_else(|| {
        InstallError::Refused(format!("`{spec}` is not `publisher/id[@version]`"))
    })?;
    let snapshot = location
        .read("snapshot.json", MAX_INDEX_FILE)?
        .ok_or_else(|| InstallError::Refused("the index has no `snapshot.json`".into()))?;
    let signed: SignedSnapshot = serde_json::from_slice(&snapshot)
        .map_err(|e| InstallError::Refused(format!("`snapshot.json`: {e}")))?;
    let key = location.key();
    let seen_path = state.join("index-seen.json");
    let mut seen: BTreeMap<String, u64> = fs::read(&seen_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    check_snapshot(&signed, &trust.keys, seen.get(&key).copied(), now())
        .map_err(|e| InstallError::Refused(e.to_string()))?;
    let file = format!("index/{publisher}/{id}.json");
    let text = location
        .read(&file, MAX_INDEX_FILE)?
        .ok_or_else(|| InstallError::Refused(format!("`{name}` is not in the index")))?;
    if signed.snapshot.files.get(&file) != Some(&sha256_digest(&text)) {
        return Err(InstallError::Refused(format!(
            "`{file}` does not match the snapshot (a mixed-and-matched index)"
        )));
    }
    let mut lines = Vec::new();
    for line in String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let line: IndexLine = serde_json::from_str(line)
            .map_err(|e| InstallError::Refused(format!("`{file}`: {e}")))?;
        if line.publisher != publisher || line.id != id {
            return Err(InstallError::Refused(format!(
                "`{file}` lists another package"
            )));
        }
        lines.push(line);
    }
    let line = match &version {
        Some(v) => lines.into_iter().find(|l| &l.version == v),
        None => lines.into_iter().max_by(|a, b| a.version.cmp(&b.version)),
    }
    .ok_or_else(|| InstallError::Refused(format!("`{spec}` is not in the index")))?;
    let limit = Limits::default().max_total_bytes + 16 * 1024 * 1024;
    let archive = location.fetch_file(&line.archive, limit, scratch)?;
    seen.insert(key, signed.snapshot.sequence);
    let bytes =
        serde_json::to_vec_pretty(&seen).map_err(|e| InstallError::Refused(e.to_string()))?;
    write_atomically(&seen_path, &bytes)?;
    Ok(Resolved { line, archive })
}

/// Stages the archive `resolved` names, which must be the package its index line says.
pub fn stage(
    store: &Store,
    resolved: &Resolved,
    trust: &TrustStore,
) -> Result<Staged, InstallError> {
    let staged = store.stage_archive(&resolved.archive, trust)?;
    if staged.record.digest != resolved.line.digest {
        return Err(InstallError::Refused(format!(
            "`{}` is not the package the index lists for {}/{} {} (a mixed-and-matched index)",
            resolved.line.archive, resolved.line.publisher, resolved.line.id, resolved.line.version
        )));
    }
    Ok(staged)
}

fn read_snapshot(dir: &Path) -> Result<SignedSnapshot, InstallError> {
    let path = dir.join("snapshot.json");
    let bytes = fs::read(&path).map_err(io(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| InstallError::State {
        path,
        message: e.to_string(),
    })
}

fn find_archives(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), InstallError> {
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() && !entry.file_name().to_string_lossy().starts_with('.') {
            find_archives(root, &path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "qpkg") {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push(relative.display().to_string());
        }
    }
    Ok(())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
