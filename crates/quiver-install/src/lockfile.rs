//! `quiver.lock`, the project's record of what it installs (id, publisher, version, digest,
//! source per package, sorted by id), which `quiver install --locked` holds every install to;
//! and `skills-lock.json` as `npx skills` writes it, read as a list of sources to install.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::InstallError;
use crate::error::io;
use crate::store::Record;

/// `quiver.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockFile {
    /// Always 1.
    pub version: u32,
    /// By package id.
    pub packages: BTreeMap<String, LockEntry>,
}

/// One locked package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockEntry {
    /// Its publisher.
    pub publisher: String,
    /// Its version.
    pub version: semver::Version,
    /// Its package digest.
    pub digest: String,
    /// Where it was installed from.
    pub source: String,
}

impl LockFile {
    /// Reads `path`; `None` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<LockFile>, InstallError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| InstallError::State {
                        path: path.to_owned(),
                        message: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(path)(e)),
        }
    }

    /// Writes it to `path` (replaced whole).
    pub fn write(&self, path: &Path) -> Result<(), InstallError> {
        let mut bytes =
            serde_json::to_vec_pretty(self).map_err(|e| InstallError::Refused(e.to_string()))?;
        bytes.push(b'\n');
        crate::store::write_atomically(path, &bytes)
    }

    /// Records `record` as the locked version of its package.
    pub fn record(&mut self, record: &Record) {
        self.version = 1;
        self.packages.insert(
            record.id.clone(),
            LockEntry {
                publisher: record.publisher.clone(),
                version: record.version.clone(),
                digest: record.digest.clone(),
                source: record.source.clone(),
            },
        );
    }

    /// For `--locked`: `record` must be exactly the locked version of its package.
    pub fn check(&self, record: &Record) -> Result<(), InstallError> {
        let Some(entry) = self.packages.get(&record.id) else {
            return Err(InstallError::Refused(format!(
                "`{}` is not in the lock file; install it without `--locked` to add it",
                record.id
            )));
        };
        let mismatch = [
            (
                "publisher",
                entry.publisher.clone(),
                record.publisher.clone(),
            ),
            (
                "version",
                entry.version.to_string(),
                record.version.to_string(),
            ),
            ("digest", entry.digest.clone(), record.digest.clone()),
        ]
        .into_iter()
        .find(|(_, locked, got)| locked != got);
        match mismatch {
            Some((what, locked, got)) => Err(InstallError::Refused(format!(
                "`{}`: the lock file says {what} `{locked}`, the package has `{got}`",
                record.id
            ))),
            None => Ok(()),
        }
    }
}

/// One source of a `skills-lock.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsLockSource {
    /// The skill's name.
    pub name: String,
    /// `owner/repo`, a git URL, or a local path.
    pub source: String,
    /// `github`, `git`, `local`, `node_modules`, ...
    pub source_type: String,
    /// The ref it was installed at, when recorded.
    pub reference: Option<String>,
    /// The skill's folder in the source (`skills/pdf`), from its `SKILL.md` path.
    pub skill_dir: Option<String>,
}

impl SkillsLockSource {
    /// The URL to clone: `sourceUrl` when given, `https://github.com/<source>.git` for a
    /// GitHub shorthand, else the source as written.
    pub fn url(&self, source_url: Option<&str>) -> String {
        if let Some(url) = source_url {
            return url.to_owned();
        }
        if self.source_type == "github" && !self.source.contains("://") {
            return format!("https://github.com/{}.git", self.source);
        }
        self.source.clone()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SkillsLockEntry {
    source: String,
    source_type: String,
    #[serde(default)]
    source_url: Option<String>,
    #[serde(default, alias = "resolvedRef", alias = "declaredRef")]
    r#ref: Option<String>,
    #[serde(default)]
    skill_path: Option<String>,
}

#[derive(Deserialize)]
struct SkillsLock {
    version: u32,
    skills: BTreeMap<String, SkillsLockEntry>,
}

/// The sources of a `skills-lock.json` (version 1), by skill name.
pub fn read_skills_lock(bytes: &[u8]) -> Result<Vec<SkillsLockSource>, InstallError> {
    let lock: SkillsLock = serde_json::from_slice(bytes)
        .map_err(|e| InstallError::Refused(format!("not a skills-lock.json: {e}")))?;
    if lock.version != 1 {
        return Err(InstallError::Refused(format!(
            "skills-lock.json version {} is not supported (1 is)",
            lock.version
        )));
    }
    Ok(lock
        .skills
        .into_iter()
        .map(|(name, e)| {
            let mut source = SkillsLockSource {
                name,
                source: e.source,
                source_type: e.source_type,
                reference: e.r#ref,
                skill_dir: e.skill_path.map(|p| {
                    p.strip_suffix("SKILL.md")
                        .unwrap_or(&p)
                        .trim_end_matches('/')
                        .to_owned()
                }),
            };
            source.source = source.url(e.source_url.as_deref());
            source
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use quiver_package::distribution::PackPermissions;

    fn record(version: &str, digest: &str) -> Record {
        Record {
            id: "echo".into(),
            publisher: "acme".into(),
            version: version.parse().unwrap(),
            digest: digest.into(),
            source: "echo.qpkg".into(),
            signed_by: vec![],
            unsigned: false,
            permissions: PackPermissions::default(),
        }
    }

    #[test]
    fn locked_installs_refuse_any_mismatch() {
        let mut lock = LockFile::default();
        lock.record(&record("1.0.0", "sha256:aa"));
        assert!(lock.check(&record("1.0.0", "sha256:aa")).is_ok());
        let cases = [
            (record("1.0.0", "sha256:bb"), "digest"),
            (record("1.0.1", "sha256:aa"), "version"),
            (
                Record {
                    publisher: "evil".into(),
                    ..record("1.0.0", "sha256:aa")
                },
                "publisher",
            ),
            (
                Record {
                    id: "other".into(),
                    ..record("1.0.0", "sha256:aa")
                },
                "not in the lock file",
            ),
        ];
        for (r, want) in cases {
            let err = lock.check(&r).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn a_skills_lock_reads_as_sources() {
        let text = r#"{"version": 1, "skills": {
            "pdf": {"source": "anthropics/skills", "sourceType": "github", "skillPath": "skills/pdf/SKILL.md", "computedHash": "ab"},
            "mine": {"source": "./my-skills/mine", "sourceType": "local", "computedHash": "cd"},
            "web": {"source": "x/y", "sourceType": "git", "sourceUrl": "file:///srv/y.git", "ref": "0123", "computedHash": "ef"}
        }}"#;
        let sources = read_skills_lock(text.as_bytes()).unwrap();
        assert_eq!(sources.len(), 3);
        assert_eq!(sources[0].name, "mine");
        assert_eq!(
            sources[1].source,
            "https://github.com/anthropics/skills.git"
        );
        assert_eq!(sources[1].skill_dir.as_deref(), Some("skills/pdf"));
        assert_eq!(sources[2].source, "file:///srv/y.git");
        assert_eq!(sources[2].reference.as_deref(), Some("0123"));
        assert!(read_skills_lock(br#"{"version": 3, "skills": {}}"#).is_err());
    }
}
