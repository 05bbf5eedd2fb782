//! Fixtures: a small package folder, keys, a trust store, and raw archives built header by
//! header (for archives the writer would never make).

use std::fs;
use std::path::Path;

use ed25519_dalek::SigningKey;
use quiver_install::pack::{PackOptions, pack_dir};
use quiver_install::trust::TrustStore;
use quiver_package::digest::sha256_digest;
use quiver_package::distribution::manifest::{FORMAT, MANIFEST_PATH, SIGNATURE_PATH};
use quiver_package::distribution::signature::{SignatureFile, sign};
use quiver_package::distribution::{FileEntry, PackManifest, PackPermissions};

/// The echo tool: its arguments back, nothing started, nothing reached.
pub const ECHO_PY: &str =
    "import json\nimport sys\n\nprint(json.dumps(json.load(sys.stdin)[\"arguments\"]))\n";

/// Writes a package `id` at `version` with `network` hosts into `dir/id` and returns it.
pub fn package(dir: &Path, id: &str, version: &str, network: &[&str]) -> std::path::PathBuf {
    let root = dir.join(id);
    fs::create_dir_all(root.join("tools/echo")).unwrap();
    fs::create_dir_all(root.join("references")).unwrap();
    let hosts: Vec<String> = network.iter().map(|h| format!("\"{h}\"")).collect();
    fs::write(
        root.join("quiver.yaml"),
        format!(
            "id: {id}\nname: {id}\nversion: {version}\ndescription: A test package\npermissions:\n  network: [{}]\n",
            hosts.join(", ")
        ),
    )
    .unwrap();
    fs::write(
        root.join("SKILL.md"),
        format!("---\nname: {id}\ndescription: Says hello back. Use when asked to echo.\n---\n\n# Echo\n\nCall the echo tool.\n"),
    )
    .unwrap();
    fs::write(root.join("references/notes.md"), "天气 notes\n").unwrap();
    fs::write(
        root.join("tools/echo/tool.yaml"),
        "name: echo\ndescription: Echoes its input back.\ncategory: perception\ninput:\n  type: object\n  properties:\n    text: {type: string}\nrun:\n  command: [\"python3\", \"main.py\"]\n",
    )
    .unwrap();
    fs::write(root.join("tools/echo/main.py"), ECHO_PY).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        root.join("tools/echo/main.py"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    root
}

/// A fixed signing key.
pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A trust store under `state` trusting `key` for `acme/*`.
pub fn trust(state: &Path, key: &SigningKey) -> TrustStore {
    let mut store = TrustStore::load(state).unwrap();
    store.add("acme", &key.verifying_key(), vec![]).unwrap();
    store.save().unwrap();
    store
}

/// Packs `dir` for `acme`, signed by `key`, and writes it to `out`.
pub fn pack_to(dir: &Path, key: Option<&SigningKey>, out: &Path) -> PackManifest {
    let packed = pack_dir(
        dir,
        &PackOptions {
            publisher: "acme".into(),
            version: None,
            signer: key.cloned(),
        },
    )
    .unwrap();
    fs::write(out, &packed.bytes).unwrap();
    packed.manifest
}

/// One raw archive entry.
pub struct Raw {
    pub name: Vec<u8>,
    pub kind: tar::EntryType,
    pub mode: u32,
    pub data: Vec<u8>,
}

impl Raw {
    /// A regular file.
    pub fn file(name: &str, data: &[u8]) -> Raw {
        Raw {
            name: name.as_bytes().to_vec(),
            kind: tar::EntryType::Regular,
            mode: 0o644,
            data: data.to_vec(),
        }
    }

    /// An entry of another kind.
    pub fn kind(name: &str, kind: tar::EntryType) -> Raw {
        Raw {
            name: name.as_bytes().to_vec(),
            kind,
            mode: 0o644,
            data: Vec::new(),
        }
    }
}

/// A gzip'd tar of `entries`, each header written field by field (no path checks).
pub fn raw_archive(entries: &[Raw]) -> Vec<u8> {
    gzip(&raw_tar(entries))
}

/// `bytes`, gzip'd.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// A tar of `entries`, each header written field by field (no path checks).
pub fn raw_tar(entries: &[Raw]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in entries {
        let mut header = tar::Header::new_ustar();
        let name = &mut header.as_old_mut().name;
        name[..e.name.len()].copy_from_slice(&e.name);
        header.set_size(e.data.len() as u64);
        header.set_mode(e.mode);
        header.set_entry_type(e.kind);
        header.set_cksum();
        builder.append(&header, e.data.as_slice()).unwrap();
    }
    builder.into_inner().unwrap()
}

/// A manifest of `acme/hostile` listing `files` (path, bytes), as canonical bytes.
pub fn manifest_of(files: &[(&str, &[u8])]) -> PackManifest {
    let mut entries: Vec<FileEntry> = files
        .iter()
        .map(|(path, data)| FileEntry {
            path: (*path).to_owned(),
            size: data.len() as u64,
            digest: sha256_digest(data),
            mode: "0644".into(),
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    PackManifest {
        format: FORMAT,
        id: "hostile".parse().unwrap(),
        publisher: "acme".into(),
        version: semver::Version::new(1, 0, 0),
        permissions: PackPermissions::default(),
        files: entries,
    }
}

/// The two meta entries of `manifest`, signed by `key`.
pub fn meta(manifest: &PackManifest, key: &SigningKey) -> [Raw; 2] {
    let bytes = manifest.to_canonical_bytes();
    let sigs = SignatureFile {
        signatures: vec![sign(key, &bytes)],
    };
    [
        Raw::file(MANIFEST_PATH, &bytes),
        Raw::file(SIGNATURE_PATH, &serde_json::to_vec(&sigs).unwrap()),
    ]
}
