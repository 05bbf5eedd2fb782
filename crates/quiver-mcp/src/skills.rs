//! The skills a catalog serves through the Skills extension (SEP-2640): every file of every
//! skill the model may see (every file of its folder, as [`quiver_package::skill_files`] lists
//! them), as a `skill://` URI with its bytes, sha256 digest and size.
//!
//! A skill's URI is `skill://<skill id>/SKILL.md` (`skill://weather/SKILL.md`,
//! `skill://daily-report/weekly/SKILL.md`); when the frontmatter `name` is not the last segment
//! of the id, the name is appended (`skill://tianqi/天气/SKILL.md`, percent-encoded), as the
//! extension requires. Skills with `disable-model-invocation` or bound to a `model` are left
//! out, as are disabled packages' skills; URIs never hold a host path.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use quiver_catalog::Catalog;
use quiver_package::skill::Skill as PackageSkill;
use quiver_package::source::{MAX_SKILL_ASSET_BYTES, PackageDir};
use serde_json::{Map, Value};

/// One file of a skill. Listing it reads only its metadata; its bytes are read on demand
/// ([`SkillFile::read`], at most [`MAX_SKILL_ASSET_BYTES`]) and its digest is computed by
/// streaming it, once per size and modification time ([`SkillFile::digest`]).
#[derive(Debug, Clone)]
pub struct SkillFile {
    /// `skill://...` URI.
    pub uri: String,
    /// The file name (last segment).
    pub name: String,
    /// Its size in bytes, as listed.
    pub size: u64,
    /// Its MIME type, when the extension is known.
    pub mime_type: Option<&'static str>,
    /// The file, and the package folder it is read through.
    path: PathBuf,
    package_root: Arc<Path>,
    /// The digest, with the size and modification time it was computed for.
    digest: Arc<Mutex<Option<KeptDigest>>>,
    /// Bytes of skill files this index read into memory (shared by the index's files).
    read: Arc<AtomicU64>,
}

/// A digest and the file's (size, modification time) it was computed for.
#[derive(Debug)]
struct KeptDigest {
    size: u64,
    modified: Option<SystemTime>,
    digest: String,
}

impl PartialEq for SkillFile {
    fn eq(&self, other: &Self) -> bool {
        self.uri == other.uri && self.size == other.size && self.mime_type == other.mime_type
    }
}

impl SkillFile {
    /// The file's bytes, read now through its package folder (no link out of it is
    /// followed), at most [`MAX_SKILL_ASSET_BYTES`].
    pub fn read(&self) -> Result<Vec<u8>, String> {
        let bytes = PackageDir::new(&self.package_root)
            .read_limited(&self.path, MAX_SKILL_ASSET_BYTES)
            .map_err(|d| d.message)?;
        self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// When the file was last modified (its metadata only; `None` when it cannot be read):
    /// an edit that keeps the size still changes it.
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        std::fs::symlink_metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }

    /// `sha256:<hex>` of the file as it is now, computed by streaming it (never whole in
    /// memory) and kept until its size or modification time changes.
    pub fn digest(&self) -> Result<String, String> {
        let (file, meta) = PackageDir::new(&self.package_root)
            .open_regular(&self.path)
            .map_err(|d| d.message)?;
        let (size, modified) = (meta.len(), meta.modified().ok());
        let mut kept = self.digest.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = kept.as_ref()
            && (k.size, k.modified) == (size, modified)
        {
            return Ok(k.digest.clone());
        }
        let (digest, _) = quiver_package::digest::stream_digest(file)
            .map_err(|e| format!("cannot read the file: {e}"))?;
        *kept = Some(KeptDigest {
            size,
            modified,
            digest: digest.clone(),
        });
        Ok(digest)
    }
}

/// One skill.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillEntry {
    /// The Quiver skill id (`weather`, `daily-report/weekly`).
    pub id: String,
    /// The package id.
    pub package: String,
    /// URI of its `SKILL.md`.
    pub uri: String,
    /// The frontmatter, every field as the author wrote it.
    pub frontmatter: Map<String, Value>,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// Every file, `SKILL.md` first.
    pub files: Vec<SkillFile>,
}

/// A directory's child.
#[derive(Debug, Clone, PartialEq)]
pub enum Child {
    /// A file.
    File(SkillFile),
    /// A directory, by URI and name.
    Directory {
        /// Its URI (no trailing slash).
        uri: String,
        /// Its name.
        name: String,
    },
}

/// Every skill of one catalog snapshot.
#[derive(Debug, Default)]
pub struct SkillIndex {
    /// The skills, ordered by URI.
    pub skills: Vec<SkillEntry>,
    files: BTreeMap<String, (usize, usize)>,
    directories: BTreeMap<String, Vec<Child>>,
    read: Arc<AtomicU64>,
}

/// `sha256:` and 64 lowercase hex digits (the same digest a package manifest records).
pub use quiver_package::digest::sha256_digest;

fn percent_encode_segment(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn mime_type_of(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "py" => "text/x-python",
        "sh" => "application/x-sh",
        "js" | "mjs" => "text/javascript",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

/// Whether a MIME type is served as text.
pub fn is_textual(mime: Option<&str>) -> bool {
    mime.is_some_and(|m| {
        m.starts_with("text/")
            || matches!(
                m,
                "application/json"
                    | "application/yaml"
                    | "application/toml"
                    | "application/x-sh"
                    | "image/svg+xml"
            )
    })
}

fn frontmatter_json(skill: &PackageSkill) -> Option<Map<String, Value>> {
    let value: Value = quiver_package::yaml::parse(&skill.frontmatter, &skill.file, 1).ok()?;
    match value {
        Value::Object(map)
            if map.get("name").is_some_and(Value::is_string)
                && map.get("description").is_some_and(Value::is_string) =>
        {
            Some(map)
        }
        _ => None,
    }
}

fn skill_root(skill: &PackageSkill) -> String {
    let last = skill.id.rsplit('/').next().unwrap_or(&skill.id);
    if last == skill.name {
        format!("skill://{}", skill.id)
    } else {
        format!(
            "skill://{}/{}",
            skill.id,
            percent_encode_segment(&skill.name)
        )
    }
}

impl SkillIndex {
    /// The skills of `catalog` that a model may see, skipping packages `enabled` says are off.
    pub fn build(catalog: &Catalog, enabled: &dyn Fn(&str) -> bool) -> SkillIndex {
        let read = Arc::new(AtomicU64::new(0));
        let mut skills = Vec::new();
        for cp in catalog.packages().iter().filter(|p| !p.shadowed) {
            let package = &cp.package;
            if !enabled(package.id.as_str()) {
                continue;
            }
            for skill in package.all_skills() {
                if skill.meta.disable_model_invocation || skill.meta.model.is_some() {
                    continue;
                }
                match Self::entry(package.id.as_str(), skill, &read) {
                    Ok(entry) => skills.push(entry),
                    Err(why) => tracing::warn!(skill = %skill.id, "not served over MCP: {why}"),
                }
            }
        }
        skills.sort_by(|a, b| a.uri.cmp(&b.uri));
        let mut index = SkillIndex {
            skills,
            read,
            ..SkillIndex::default()
        };
        for (s, skill) in index.skills.iter().enumerate() {
            let root = skill.uri.trim_end_matches("SKILL.md").trim_end_matches('/');
            let mut dirs: BTreeSet<String> = BTreeSet::new();
            dirs.insert(root.to_owned());
            for (f, file) in skill.files.iter().enumerate() {
                index.files.insert(file.uri.clone(), (s, f));
                // Every directory between the root and the file.
                let rel = file.uri[root.len() + 1..].to_owned();
                let mut parent = root.to_owned();
                let segments: Vec<&str> = rel.split('/').collect();
                for (i, seg) in segments.iter().enumerate() {
                    let uri = format!("{parent}/{seg}");
                    let child = if i + 1 == segments.len() {
                        Child::File(file.clone())
                    } else {
                        Child::Directory {
                            uri: uri.clone(),
                            name: (*seg).to_owned(),
                        }
                    };
                    let children = index.directories.entry(parent.clone()).or_default();
                    if !children.contains(&child) {
                        children.push(child);
                    }
                    dirs.insert(uri.clone());
                    parent = uri;
                }
            }
        }
        index
    }

    /// A skill's entry: each file's metadata, none of its bytes. A file larger than
    /// [`MAX_SKILL_ASSET_BYTES`] is left out (it could not be served whole), and so is one
    /// that cannot be opened as a regular file inside the package.
    fn entry(
        package: &str,
        skill: &PackageSkill,
        read: &Arc<AtomicU64>,
    ) -> Result<SkillEntry, String> {
        let frontmatter = frontmatter_json(skill)
            .ok_or("its frontmatter has no string `name` and `description`")?;
        let root = skill_root(skill);
        let package_root: Arc<Path> = Arc::from(skill.package_root.as_path());
        let package_dir = PackageDir::new(&skill.package_root);
        let file = |uri: String, name: String, path: PathBuf, mime_type| {
            let (_, meta) = package_dir.open_regular(&path).map_err(|d| d.message)?;
            Ok::<_, String>(SkillFile {
                uri,
                name,
                size: meta.len(),
                mime_type,
                path,
                package_root: package_root.clone(),
                digest: Arc::default(),
                read: read.clone(),
            })
        };
        let mut files = vec![file(
            format!("{root}/SKILL.md"),
            "SKILL.md".into(),
            skill.file.clone(),
            Some("text/markdown"),
        )?];
        for rel in &skill.files {
            if rel
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == ".." || s.starts_with('.'))
            {
                continue;
            }
            let encoded: Vec<String> = rel.split('/').map(percent_encode_segment).collect();
            let listed = match file(
                format!("{root}/{}", encoded.join("/")),
                rel.rsplit('/').next().unwrap_or(rel).to_owned(),
                skill.dir.join(rel),
                mime_type_of(rel),
            ) {
                Ok(listed) => listed,
                Err(why) => {
                    // One file that cannot be served (unreadable, or a link that now leads
                    // out of the package) leaves the skill's other files served.
                    tracing::warn!(skill = %skill.id, file = %rel, "not served over MCP: {why}");
                    continue;
                }
            };
            if listed.size > MAX_SKILL_ASSET_BYTES {
                tracing::warn!(skill = %skill.id, file = %rel, size = listed.size,
                    "not served over MCP: larger than {MAX_SKILL_ASSET_BYTES} bytes");
                continue;
            }
            files.push(listed);
        }
        Ok(SkillEntry {
            id: skill.id.clone(),
            package: package.to_owned(),
            uri: files[0].uri.clone(),
            name: skill.name.clone(),
            description: skill.description.clone(),
            frontmatter,
            files,
        })
    }

    /// How many bytes of skill files this index has read into memory (only reads of a file's
    /// content count; listing and digests read none into memory).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The skill whose `SKILL.md` is at `uri`.
    pub fn skill(&self, uri: &str) -> Option<&SkillEntry> {
        self.skills.iter().find(|s| s.uri == uri)
    }

    /// The file at `uri` and the skill it belongs to.
    pub fn file(&self, uri: &str) -> Option<(&SkillEntry, &SkillFile)> {
        let (s, f) = *self.files.get(uri)?;
        let skill = self.skills.get(s)?;
        Some((skill, skill.files.get(f)?))
    }

    /// The direct children of a directory URI (with or without a trailing `/`).
    pub fn directory(&self, uri: &str) -> Option<(&str, &[Child])> {
        let key = uri.trim_end_matches('/');
        self.directories
            .get_key_value(key)
            .map(|(k, v)| (k.as_str(), v.as_slice()))
    }
}
