//! The pack manifest (`.quiver/MANIFEST.json`): package id, publisher, version, the normalized
//! permissions and every file with its path, size, `sha256:` digest and mode, as canonical JSON.
//! The package digest is the digest of those bytes: it names the package in the store, the lock
//! file and the installed list.

use serde::{Deserialize, Serialize};

use super::canonical::canonical_json;
use super::paths::{PathProblem, check_entry_path};
use crate::common::Permissions;
use crate::digest::sha256_digest;
use crate::names::{PackageId, check_name};

/// Where the manifest lies in an archive: its first entry.
pub const MANIFEST_PATH: &str = ".quiver/MANIFEST.json";
/// Where the signatures lie in an archive: its second entry.
pub const SIGNATURE_PATH: &str = ".quiver/SIGNATURE.json";
/// The manifest format this code writes and reads.
pub const FORMAT: u32 = 1;

/// The manifest of a packed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackManifest {
    /// Always [`FORMAT`].
    pub format: u32,
    /// The package id.
    pub id: PackageId,
    /// Who publishes it (`acme`): the name trust scopes (`acme/*`) match.
    pub publisher: String,
    /// Its version.
    pub version: semver::Version,
    /// The package's permission ceiling, normalized ([`PackPermissions::from_permissions`]).
    pub permissions: PackPermissions,
    /// Every file, sorted by path, without the `.quiver/` entries.
    pub files: Vec<FileEntry>,
}

/// Permissions with every list sorted and without duplicates, so equal ceilings give equal
/// manifests and a diff compares sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackPermissions {
    /// Hosts reachable.
    pub network: Vec<String>,
    /// Paths readable.
    pub read: Vec<String>,
    /// Paths writable.
    pub write: Vec<String>,
    /// Whether other programs may be started.
    pub shell: bool,
    /// Environment names passed through.
    pub env: Vec<String>,
}

impl PackPermissions {
    /// The normalized form of a package's `permissions`.
    pub fn from_permissions(p: &Permissions) -> PackPermissions {
        PackPermissions {
            network: sorted(&p.network),
            read: sorted(&p.filesystem.read),
            write: sorted(&p.filesystem.write),
            shell: p.shell,
            env: sorted(&p.env),
        }
    }

    /// Back to the package format's shape (for describing them in words).
    pub fn to_permissions(&self) -> Permissions {
        let mut p = Permissions {
            network: self.network.clone(),
            shell: self.shell,
            env: self.env.clone(),
            ..Permissions::default()
        };
        p.filesystem.read = self.read.clone();
        p.filesystem.write = self.write.clone();
        p
    }
}

fn sorted(items: &[String]) -> Vec<String> {
    let mut out = items.to_vec();
    out.sort();
    out.dedup();
    out
}

/// One file of the package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Its path inside the package, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// `sha256:<hex>` of its bytes (the digest the Skills extension serves).
    pub digest: String,
    /// `0644`, or `0755` for a file any execute bit was set on.
    pub mode: String,
}

/// The mode the manifest records for a file with Unix mode `mode`: only whether it runs.
pub fn normalized_mode(mode: u32) -> &'static str {
    if mode & 0o111 != 0 { "0755" } else { "0644" }
}

/// Why a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not JSON of the manifest's shape.
    #[error("the manifest is not valid: {0}")]
    Shape(String),
    /// Not in canonical form (so its digest would not be the digest of its value).
    #[error("the manifest is not canonical JSON (keys sorted, no whitespace)")]
    NotCanonical,
    /// A format this code does not know.
    #[error("manifest format {0} is not supported (this Quiver reads format {FORMAT})")]
    Format(u32),
    /// A bad publisher name.
    #[error("publisher `{0}` is not a valid name ([a-z0-9][a-z0-9_-]{{0,63}})")]
    Publisher(String),
    /// A file path that breaks a rule.
    #[error("file `{path}`: {problem}")]
    Path {
        /// The path as written.
        path: String,
        /// The rule it breaks.
        problem: PathProblem,
    },
    /// Files not strictly sorted by path (or one listed twice).
    #[error("file `{0}` is out of order or listed twice")]
    Order(String),
    /// A digest or mode that is not of the expected form.
    #[error("file `{0}`: digest must be `sha256:` and 64 hex digits, mode `0644` or `0755`")]
    Entry(String),
}

impl PackManifest {
    /// The canonical JSON bytes: what is signed and digested.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).unwrap_or_default();
        canonical_json(&value).into_bytes()
    }

    /// The package digest: `sha256:` of the canonical bytes.
    pub fn digest(&self) -> String {
        sha256_digest(&self.to_canonical_bytes())
    }

    /// `publisher/id`, the name trust scopes match.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.publisher, self.id)
    }

    /// Parses and checks a manifest: its shape, canonical form, publisher, and every file
    /// entry (path rules, order, digest and mode forms).
    pub fn parse(bytes: &[u8]) -> Result<PackManifest, ManifestError> {
        let manifest: PackManifest =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Shape(e.to_string()))?;
        if manifest.format != FORMAT {
            return Err(ManifestError::Format(manifest.format));
        }
        if manifest.to_canonical_bytes() != bytes {
            return Err(ManifestError::NotCanonical);
        }
        manifest.check()?;
        Ok(manifest)
    }

    /// Checks what [`PackManifest::parse`] checks beyond the JSON shape.
    pub fn check(&self) -> Result<(), ManifestError> {
        if check_name(&self.publisher).is_err() {
            return Err(ManifestError::Publisher(self.publisher.clone()));
        }
        let mut previous: Option<&str> = None;
        for file in &self.files {
            check_entry_path(&file.path).map_err(|problem| ManifestError::Path {
                path: file.path.clone(),
                problem,
            })?;
            if previous.is_some_and(|p| p >= file.path.as_str()) {
                return Err(ManifestError::Order(file.path.clone()));
            }
            previous = Some(&file.path);
            let hex = file.digest.strip_prefix("sha256:").unwrap_or("");
            let good_digest = hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !good_digest || !matches!(file.mode.as_str(), "0644" | "0755") {
                return Err(ManifestError::Entry(file.path.clone()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn manifest() -> PackManifest {
        PackManifest {
            format: FORMAT,
            id: "weather".parse().unwrap(),
            publisher: "acme".into(),
            version: semver::Version::new(1, 2, 0),
            permissions: PackPermissions {
                network: vec!["api.example.com".into()],
                ..PackPermissions::default()
            },
            files: vec![FileEntry {
                path: "SKILL.md".into(),
                size: 0,
                digest: crate::digest::sha256_digest(b""),
                mode: "0644".into(),
            }],
        }
    }

    #[test]
    fn a_manifest_round_trips_through_its_canonical_bytes() {
        let m = manifest();
        let bytes = m.to_canonical_bytes();
        assert_eq!(PackManifest::parse(&bytes).unwrap(), m);
        assert_eq!(m.digest(), crate::digest::sha256_digest(&bytes));
    }

    #[test]
    fn bad_manifests_are_refused_with_their_reason() {
        let pretty = serde_json::to_vec_pretty(&manifest()).unwrap();
        assert_eq!(
            PackManifest::parse(&pretty),
            Err(ManifestError::NotCanonical)
        );
        let mut cases: Vec<(PackManifest, &str)> = Vec::new();
        let mut m = manifest();
        m.publisher = "Acme".into();
        cases.push((m, "publisher `Acme`"));
        let mut m = manifest();
        m.files.push(m.files[0].clone());
        cases.push((m, "out of order"));
        let mut m = manifest();
        m.files[0].path = "../x".into();
        cases.push((m, "`..`"));
        let mut m = manifest();
        m.files[0].mode = "4755".into();
        cases.push((m, "mode"));
        let mut m = manifest();
        m.files[0].digest = "md5:00".into();
        cases.push((m, "digest"));
        let mut m = manifest();
        m.format = 2;
        cases.push((m, "format 2"));
        for (m, want) in cases {
            let err = PackManifest::parse(&m.to_canonical_bytes()).unwrap_err();
            assert!(err.to_string().contains(want), "{err} should say {want}");
        }
    }

    #[test]
    fn permissions_are_sorted_and_deduplicated() {
        let mut p = Permissions {
            network: vec!["b.com".into(), "a.com".into(), "b.com".into()],
            shell: true,
            ..Permissions::default()
        };
        p.filesystem.write = vec!["/tmp/y".into(), "/tmp/x".into()];
        let n = PackPermissions::from_permissions(&p);
        assert_eq!(n.network, ["a.com", "b.com"]);
        assert_eq!(n.write, ["/tmp/x", "/tmp/y"]);
        assert_eq!(PackPermissions::from_permissions(&n.to_permissions()), n);
    }
}
