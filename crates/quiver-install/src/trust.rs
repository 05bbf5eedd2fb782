//! The trust store, `<state>/trust.json`: the publisher keys the user trusts, each with its
//! scopes (`acme/*`) and state (active, retired, revoked). Written whole to a temporary file
//! and renamed over the old one, so a reader sees the old store or the new one.

use std::fs;
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use quiver_package::distribution::signature::{KeyState, TrustedKey, encode_public_key, key_id};
use serde::{Deserialize, Serialize};

use crate::InstallError;
use crate::error::io;
use crate::store::write_atomically;

/// The trust store.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    path: PathBuf,
    /// The keys, in the order they were added.
    pub keys: Vec<TrustedKey>,
}

#[derive(Serialize, Deserialize)]
struct File {
    keys: Vec<TrustedKey>,
}

impl TrustStore {
    /// Reads `<state>/trust.json` (empty when absent).
    pub fn load(state: &Path) -> Result<TrustStore, InstallError> {
        let path = state.join("trust.json");
        let keys = match fs::read(&path) {
            Ok(bytes) => {
                let file: File =
                    serde_json::from_slice(&bytes).map_err(|e| InstallError::State {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                file.keys
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&path)(e)),
        };
        Ok(TrustStore { path, keys })
    }

    /// Writes the store back.
    pub fn save(&self) -> Result<(), InstallError> {
        let bytes = serde_json::to_vec_pretty(&File {
            keys: self.keys.clone(),
        })
        .map_err(|e| InstallError::Refused(e.to_string()))?;
        write_atomically(&self.path, &bytes)
    }

    /// Trusts `key` of `publisher` for `scopes` (default `<publisher>/*`; `@index` lets it sign
    /// index snapshots), active; a key
    /// already present gets the new scopes and becomes active again unless it was revoked
    /// (a revoked key stays revoked).
    pub fn add(
        &mut self,
        publisher: &str,
        key: &VerifyingKey,
        scopes: Vec<String>,
    ) -> Result<TrustedKey, InstallError> {
        let scopes = if scopes.is_empty() {
            vec![format!("{publisher}/*")]
        } else {
            scopes
        };
        for scope in &scopes {
            if scope == quiver_package::distribution::index::INDEX_SCOPE {
                continue;
            }
            let (p, rest) = scope.split_once('/').unwrap_or((scope, ""));
            if p != publisher || rest.is_empty() {
                return Err(InstallError::Refused(format!(
                    "scope `{scope}` must be `{publisher}/*` or `{publisher}/<package>`"
                )));
            }
        }
        let id = key_id(key);
        if let Some(existing) = self.keys.iter_mut().find(|k| k.key_id == id) {
            if existing.state == KeyState::Revoked {
                return Err(InstallError::Refused(format!(
                    "key `{id}` was revoked and cannot be trusted again"
                )));
            }
            existing.scopes = scopes;
            existing.state = KeyState::Active;
            return Ok(existing.clone());
        }
        let entry = TrustedKey {
            key_id: id,
            publisher: publisher.to_owned(),
            public_key: encode_public_key(key),
            scopes,
            state: KeyState::Active,
        };
        self.keys.push(entry.clone());
        Ok(entry)
    }

    /// Sets the state of the key `name` (a key id or a prefix of at least 4 digits).
    pub fn set_state(&mut self, name: &str, state: KeyState) -> Result<TrustedKey, InstallError> {
        let mut matches = self
            .keys
            .iter_mut()
            .filter(|k| name.len() >= 4 && k.key_id.starts_with(name));
        match (matches.next(), matches.next()) {
            (Some(key), None) => {
                if key.state == KeyState::Revoked && state != KeyState::Revoked {
                    return Err(InstallError::Refused(format!(
                        "key `{}` is revoked for good",
                        key.key_id
                    )));
                }
                key.state = state;
                Ok(key.clone())
            }
            (None, _) => Err(InstallError::Refused(format!(
                "no trusted key `{name}`; `quiver trust list` shows them"
            ))),
            _ => Err(InstallError::Refused(format!(
                "`{name}` names several keys; give more of the key id"
            ))),
        }
    }
}
