//! The user's signing keys: one JSON file per key in `<state>/keys/` (mode 0600), holding the
//! publisher, the key id, the public key and the secret seed. Exported as one line,
//! `quiver-key v1 <publisher> <public key base64>`, which `quiver trust add` reads.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{SigningKey, VerifyingKey};
use quiver_package::distribution::signature::{decode_public_key, encode_public_key, key_id};
use serde::{Deserialize, Serialize};

use crate::InstallError;
use crate::error::io;

/// The first word of an exported key line.
const EXPORT_TAG: &str = "quiver-key v1";

/// A signing key as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyFile {
    /// Who signs with it.
    pub publisher: String,
    /// Its key id.
    pub key_id: String,
    /// The public key, base64.
    pub public_key: String,
    /// The 32-byte secret seed, base64. Never printed.
    secret: String,
}

impl KeyFile {
    /// The signing key.
    pub fn signing_key(&self) -> Result<SigningKey, InstallError> {
        let seed: [u8; 32] = B64
            .decode(&self.secret)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| InstallError::Refused(format!("key `{}` is damaged", self.key_id)))?;
        Ok(SigningKey::from_bytes(&seed))
    }

    /// The public key.
    pub fn verifying_key(&self) -> Result<VerifyingKey, InstallError> {
        Ok(decode_public_key(&self.public_key)?)
    }

    /// The line `quiver trust add` reads.
    pub fn export_line(&self) -> String {
        format!("{EXPORT_TAG} {} {}", self.publisher, self.public_key)
    }
}

/// Reads an exported key line: the publisher and the public key.
pub fn parse_export_line(line: &str) -> Result<(String, VerifyingKey), InstallError> {
    let rest = line
        .trim()
        .strip_prefix(EXPORT_TAG)
        .ok_or_else(|| InstallError::Refused(format!("a key line starts with `{EXPORT_TAG}`")))?;
    let mut parts = rest.split_whitespace();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(publisher), Some(key), None) => {
            quiver_package::names::check_name(publisher)
                .map_err(|e| InstallError::Refused(format!("publisher `{publisher}`: {e}")))?;
            Ok((publisher.to_owned(), decode_public_key(key)?))
        }
        _ => Err(InstallError::Refused(format!(
            "a key line is `{EXPORT_TAG} <publisher> <public key>`"
        ))),
    }
}

/// `<state>/keys`.
pub fn keys_dir(state: &Path) -> PathBuf {
    state.join("keys")
}

/// Makes a new key for `publisher` from the system's random source and stores it.
pub fn new_key(state: &Path, publisher: &str) -> Result<KeyFile, InstallError> {
    quiver_package::names::check_name(publisher)
        .map_err(|e| InstallError::Refused(format!("publisher `{publisher}`: {e}")))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| InstallError::Refused(format!("no random source: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    let public = key.verifying_key();
    let file = KeyFile {
        publisher: publisher.to_owned(),
        key_id: key_id(&public),
        public_key: encode_public_key(&public),
        secret: B64.encode(seed),
    };
    let dir = keys_dir(state);
    fs::create_dir_all(&dir).map_err(io(&dir))?;
    // Only the owner lists the keys folder.
    let private = <fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o700);
    fs::set_permissions(&dir, private).map_err(io(&dir))?;
    let path = dir.join(format!("{}.json", file.key_id));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&path).map_err(io(&path))?;
    let text =
        serde_json::to_vec_pretty(&file).map_err(|e| InstallError::Refused(e.to_string()))?;
    out.write_all(&text).map_err(io(&path))?;
    out.sync_all().map_err(io(&path))?;
    Ok(file)
}

/// Every stored key, by publisher then key id.
pub fn list_keys(state: &Path) -> Result<Vec<KeyFile>, InstallError> {
    let dir = keys_dir(state);
    let mut keys = Vec::new();
    let Ok(read) = fs::read_dir(&dir) else {
        return Ok(keys);
    };
    for entry in read {
        let path = entry.map_err(io(&dir))?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = fs::read(&path).map_err(io(&path))?;
            let key: KeyFile = serde_json::from_slice(&text).map_err(|e| InstallError::State {
                path: path.clone(),
                message: e.to_string(),
            })?;
            keys.push(key);
        }
    }
    keys.sort_by(|a, b| (&a.publisher, &a.key_id).cmp(&(&b.publisher, &b.key_id)));
    Ok(keys)
}

/// The key named `name`: a key id (or a prefix of at least 4 digits), or a publisher with
/// exactly one key.
pub fn find_key(state: &Path, name: &str) -> Result<KeyFile, InstallError> {
    let keys = list_keys(state)?;
    let by_id: Vec<_> = keys
        .iter()
        .filter(|k| name.len() >= 4 && k.key_id.starts_with(name))
        .collect();
    let by_publisher: Vec<_> = keys.iter().filter(|k| k.publisher == name).collect();
    match (by_id.as_slice(), by_publisher.as_slice()) {
        ([one], _) | ([], [one]) => Ok((*one).clone()),
        ([], []) => Err(InstallError::Refused(format!(
            "no key `{name}`; `quiver keys list` shows them, `quiver keys new PUBLISHER` makes one"
        ))),
        _ => Err(InstallError::Refused(format!(
            "`{name}` names several keys; give the key id"
        ))),
    }
}
