//! The package index: a static folder in the style of cargo's sparse index, one file of
//! versions per package (`index/<publisher>/<id>.json`, one JSON line per version), and a
//! signed snapshot (`snapshot.json`) naming the digest of every index file, with a sequence
//! number that must never go down and an expiry. A client refuses an index whose snapshot is
//! not signed by a key it trusts for indexes (scope `@index`), has expired (a freeze), has a
//! lower sequence than one it saw (a rollback), or whose index file differs from the digest the
//! snapshot names (a mix-and-match). Ids that look alike across publishers ([`confusable`])
//! are refused when the index is built and warned about at install.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, SigningKey};
use serde::{Deserialize, Serialize};

use super::canonical::canonical_json;
use super::manifest::PackPermissions;
use super::signature::{KeyState, SignatureEntry, TrustedKey, decode_public_key, sign_bytes};

/// Prefixed to the snapshot's canonical JSON before signing.
pub const SNAPSHOT_DOMAIN: &[u8] = b"quiver-index-snapshot-v1\n";
/// The scope that lets a trusted key sign index snapshots.
pub const INDEX_SCOPE: &str = "@index";

/// What the snapshot vouches for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Raised by one at every build; a client never accepts a lower one than it saw.
    pub sequence: u64,
    /// Unix seconds after which the snapshot is stale.
    pub expires: u64,
    /// Every index file (`index/acme/weather.json`) with its `sha256:` digest.
    pub files: BTreeMap<String, String>,
}

/// `snapshot.json`: the snapshot and its signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedSnapshot {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Signatures over [`snapshot_message`].
    pub signatures: Vec<SignatureEntry>,
}

/// One version of a package in its index file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexLine {
    /// The publisher.
    pub publisher: String,
    /// The package id.
    pub id: String,
    /// The version.
    pub version: semver::Version,
    /// The package digest its archive must have.
    pub digest: String,
    /// The archive, relative to the index folder.
    pub archive: String,
    /// Its permissions, for showing before download.
    pub permissions: PackPermissions,
}

/// The bytes a snapshot signature covers.
pub fn snapshot_message(snapshot: &Snapshot) -> Vec<u8> {
    let value = serde_json::to_value(snapshot).unwrap_or_default();
    let mut message = SNAPSHOT_DOMAIN.to_vec();
    message.extend_from_slice(canonical_json(&value).as_bytes());
    message
}

/// Signs a snapshot.
pub fn sign_snapshot(key: &SigningKey, snapshot: Snapshot) -> SignedSnapshot {
    let entry = sign_bytes(key, &snapshot_message(&snapshot));
    SignedSnapshot {
        snapshot,
        signatures: vec![entry],
    }
}

/// Why an index is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// No signature by an active key trusted for indexes verifies.
    #[error(
        "the index snapshot is not signed by a key trusted for indexes (`quiver trust add KEY --scope @index`)"
    )]
    Untrusted,
    /// Past its expiry.
    #[error("the index snapshot expired (a frozen or stale index); ask for a fresh one")]
    Expired,
    /// Lower than a sequence already seen.
    #[error(
        "the index snapshot has sequence {got}, lower than {seen} seen before (a rolled-back index)"
    )]
    RolledBack {
        /// Its sequence.
        got: u64,
        /// The highest seen.
        seen: u64,
    },
    /// An index file that is not the one the snapshot names.
    #[error("`{0}` does not match the snapshot (a mixed-and-matched index)")]
    Mismatch(String),
}

/// Checks a snapshot: signed by an active `@index` key of `trusted`, not expired at `now`,
/// not below `seen`.
pub fn check_snapshot(
    signed: &SignedSnapshot,
    trusted: &[TrustedKey],
    seen: Option<u64>,
    now: u64,
) -> Result<(), IndexError> {
    let message = snapshot_message(&signed.snapshot);
    let vouched = signed.signatures.iter().any(|entry| {
        trusted.iter().any(|k| {
            k.key_id == entry.key_id
                && k.state == KeyState::Active
                && k.scopes.iter().any(|s| s == INDEX_SCOPE)
                && decode_public_key(&k.public_key).is_ok_and(|public| {
                    B64.decode(&entry.signature)
                        .ok()
                        .and_then(|b| <[u8; 64]>::try_from(b).ok())
                        .is_some_and(|b| {
                            public
                                .verify_strict(&message, &Signature::from_bytes(&b))
                                .is_ok()
                        })
                })
        })
    });
    if !vouched {
        return Err(IndexError::Untrusted);
    }
    if signed.snapshot.expires <= now {
        return Err(IndexError::Expired);
    }
    if let Some(seen) = seen
        && signed.snapshot.sequence < seen
    {
        return Err(IndexError::RolledBack {
            got: signed.snapshot.sequence,
            seen,
        });
    }
    Ok(())
}

/// The form two ids that look alike share: lowercase, `_` read as `-`, and the letters and
/// digits people mistake for each other folded (`0`→`o`, `1`/`i`/`l`→`l`, `rn`→`m`, `vv`→`w`,
/// `5`→`s`), separators dropped.
pub fn skeleton(id: &str) -> String {
    let lower = id.to_lowercase().replace("rn", "m").replace("vv", "w");
    lower
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .map(|c| match c {
            '0' => 'o',
            '1' | 'i' => 'l',
            '5' => 's',
            c => c,
        })
        .collect()
}

/// Whether two different ids look alike ([`skeleton`]).
pub fn confusable(a: &str, b: &str) -> bool {
    a != b && skeleton(a) == skeleton(b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::distribution::signature::{encode_public_key, key_id};

    fn trusted(key: &SigningKey, scope: &str) -> Vec<TrustedKey> {
        vec![TrustedKey {
            key_id: key_id(&key.verifying_key()),
            publisher: "index".into(),
            public_key: encode_public_key(&key.verifying_key()),
            scopes: vec![scope.into()],
            state: KeyState::Active,
        }]
    }

    #[test]
    fn each_snapshot_attack_is_refused() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let snapshot = Snapshot {
            sequence: 5,
            expires: 1000,
            files: BTreeMap::new(),
        };
        let signed = sign_snapshot(&key, snapshot.clone());
        let store = trusted(&key, INDEX_SCOPE);
        assert_eq!(check_snapshot(&signed, &store, Some(5), 999), Ok(()));
        assert_eq!(
            check_snapshot(&signed, &store, Some(6), 999),
            Err(IndexError::RolledBack { got: 5, seen: 6 })
        );
        assert_eq!(
            check_snapshot(&signed, &store, None, 1000),
            Err(IndexError::Expired)
        );
        assert_eq!(
            check_snapshot(&signed, &trusted(&key, "acme/*"), None, 0),
            Err(IndexError::Untrusted)
        );
        let mut forged = signed.clone();
        forged.snapshot.sequence = 9;
        assert_eq!(
            check_snapshot(&forged, &store, None, 0),
            Err(IndexError::Untrusted)
        );
    }

    #[test]
    fn look_alike_ids_are_confusable() {
        let cases = [
            ("weather", "vveather", true),
            ("paypal", "paypa1", true),
            ("modern", "modem", true),
            ("my-tool", "my_tool", true),
            ("google", "g00gle", true),
            ("weather", "weather", false),
            ("weather", "leather", false),
        ];
        for (a, b, want) in cases {
            assert_eq!(confusable(a, b), want, "{a} {b}");
        }
    }
}
