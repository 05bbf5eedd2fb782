//! ed25519 signatures over a pack manifest, and the trust a signature needs to count.
//!
//! What is signed is [`SIGNATURE_DOMAIN`] followed by the manifest's canonical bytes, so a
//! signature made for anything else (another protocol using the same key) never verifies as a
//! package signature. A key is named by its key id, the first 16 hex digits of the sha256 of
//! its public key, and shown by its fingerprint, all 64. Verification is strict
//! (`verify_strict`: no small-order keys, no malleable signatures).
//!
//! A signature counts when its key is in the trust store, `active`, and one of its scopes
//! (`acme/*`, `acme/weather`) matches the package's `publisher/id`. A `retired` key's
//! signatures no longer install anything new but keep installed packages; a `revoked` key's
//! signatures count for nothing, installed packages included ([`still_trusted`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::manifest::PackManifest;
use crate::digest::sha256_digest;

/// Prefixed to the manifest bytes before signing: the domain separation.
pub const SIGNATURE_DOMAIN: &[u8] = b"quiver-package-signature-v1\n";

/// The bytes a signature covers.
pub fn signed_message(manifest_bytes: &[u8]) -> Vec<u8> {
    let mut message = SIGNATURE_DOMAIN.to_vec();
    message.extend_from_slice(manifest_bytes);
    message
}

/// The 64 hex digits of the sha256 of a public key.
pub fn fingerprint(key: &VerifyingKey) -> String {
    sha256_digest(key.as_bytes())
        .trim_start_matches("sha256:")
        .to_owned()
}

/// A key's id: the first 16 hex digits of its fingerprint.
pub fn key_id(key: &VerifyingKey) -> String {
    fingerprint(key)[..16].to_owned()
}

/// A public key in base64.
pub fn encode_public_key(key: &VerifyingKey) -> String {
    B64.encode(key.as_bytes())
}

/// A public key from base64, refusing anything that is not a valid 32-byte point.
pub fn decode_public_key(text: &str) -> Result<VerifyingKey, SignatureError> {
    let bytes = B64
        .decode(text.trim())
        .map_err(|_| SignatureError::BadKey("not base64".into()))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| SignatureError::BadKey("not 32 bytes".into()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| SignatureError::BadKey(e.to_string()))
}

/// `.quiver/SIGNATURE.json`: every signature over the manifest (none for an unsigned pack).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// The signatures, in the order they were added.
    pub signatures: Vec<SignatureEntry>,
}

/// One signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureEntry {
    /// The signing key's id.
    pub key_id: String,
    /// The ed25519 signature, base64.
    pub signature: String,
}

/// Signs a manifest's canonical bytes.
pub fn sign(key: &SigningKey, manifest_bytes: &[u8]) -> SignatureEntry {
    sign_bytes(key, &signed_message(manifest_bytes))
}

/// Signs `message` as it is (its domain prefix already in it).
pub(crate) fn sign_bytes(key: &SigningKey, message: &[u8]) -> SignatureEntry {
    let signature = key.sign(message);
    SignatureEntry {
        key_id: key_id(&key.verifying_key()),
        signature: B64.encode(signature.to_bytes()),
    }
}

/// A key's standing in the trust store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    /// Its signatures count.
    Active,
    /// Rotated out: installs nothing new; what it signed stays installed.
    Retired,
    /// Compromised: its signatures count for nothing, installed packages included.
    Revoked,
}

/// A publisher key the user trusts, for the packages its scopes match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedKey {
    /// Its key id.
    pub key_id: String,
    /// The publisher it belongs to.
    pub publisher: String,
    /// The public key, base64.
    pub public_key: String,
    /// `acme/*` or `acme/weather`.
    pub scopes: Vec<String>,
    /// Its standing.
    pub state: KeyState,
}

/// Whether `scope` (`acme/*` or `acme/weather`) matches the package `publisher/id`.
pub fn scope_matches(scope: &str, full_name: &str) -> bool {
    match scope.strip_suffix("/*") {
        Some(publisher) => full_name
            .strip_prefix(publisher)
            .is_some_and(|rest| rest.starts_with('/')),
        None => scope == full_name,
    }
}

/// Why a package's signatures do not let it in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No signature at all.
    #[error("the package is not signed")]
    Unsigned,
    /// A signature that does not verify: the manifest was changed or the signature swapped.
    #[error(
        "the signature by key `{0}` does not match the manifest: the package was changed after signing, or the signature belongs to another package"
    )]
    Mismatch(String),
    /// Signed only by keys the trust store does not hold.
    #[error("signed by unknown key `{0}`: add the publisher's key with `quiver trust add`")]
    UnknownKey(String),
    /// Signed only by retired keys.
    #[error(
        "signed by key `{0}`, which is retired: ask the publisher for a package signed by their current key"
    )]
    Retired(String),
    /// Signed only by revoked keys.
    #[error("signed by key `{0}`, which is revoked")]
    Revoked(String),
    /// Signed by trusted keys whose scopes do not cover the package.
    #[error("key `{key}` is not trusted for `{package}` (its scopes: {scopes})")]
    OutOfScope {
        /// The key.
        key: String,
        /// `publisher/id`.
        package: String,
        /// Its scopes, joined.
        scopes: String,
    },
    /// A malformed key or signature.
    #[error("a malformed key or signature: {0}")]
    BadKey(String),
}

/// Checks every signature of `signatures` over `manifest` against the trust store; returns the
/// ids of the active, in-scope keys whose signature verifies, or why none does. Any signature
/// by a known key that fails to verify refuses the package outright.
pub fn verify_signatures(
    manifest: &PackManifest,
    signatures: &SignatureFile,
    trusted: &[TrustedKey],
) -> Result<Vec<String>, SignatureError> {
    let message = signed_message(&manifest.to_canonical_bytes());
    let full_name = manifest.full_name();
    let mut good = Vec::new();
    let mut refusal: Option<(u8, SignatureError)> = None;
    let mut note = |rank: u8, e: SignatureError| {
        if refusal.as_ref().is_none_or(|(r, _)| rank > *r) {
            refusal = Some((rank, e));
        }
    };
    for entry in &signatures.signatures {
        let Some(key) = trusted.iter().find(|k| k.key_id == entry.key_id) else {
            note(0, SignatureError::UnknownKey(entry.key_id.clone()));
            continue;
        };
        let public = decode_public_key(&key.public_key)?;
        if key_id(&public) != key.key_id {
            return Err(SignatureError::BadKey(format!(
                "the trust store's key `{}` does not match its public key",
                key.key_id
            )));
        }
        let bytes = B64
            .decode(&entry.signature)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
            .ok_or_else(|| SignatureError::Mismatch(entry.key_id.clone()))?;
        if public
            .verify_strict(&message, &Signature::from_bytes(&bytes))
            .is_err()
        {
            return Err(SignatureError::Mismatch(entry.key_id.clone()));
        }
        match key.state {
            KeyState::Revoked => note(3, SignatureError::Revoked(key.key_id.clone())),
            KeyState::Retired => note(2, SignatureError::Retired(key.key_id.clone())),
            KeyState::Active if !key.scopes.iter().any(|s| scope_matches(s, &full_name)) => note(
                1,
                SignatureError::OutOfScope {
                    key: key.key_id.clone(),
                    package: full_name.clone(),
                    scopes: key.scopes.join(", "),
                },
            ),
            KeyState::Active => good.push(key.key_id.clone()),
        }
    }
    if !good.is_empty() {
        return Ok(good);
    }
    Err(refusal.map_or(SignatureError::Unsigned, |(_, e)| e))
}

/// Whether an installed package signed by `signed_by` keeps running: some key of it is in the
/// trust store and not revoked (a retired key keeps what it signed).
pub fn still_trusted(signed_by: &[String], trusted: &[TrustedKey]) -> bool {
    signed_by.iter().any(|id| {
        trusted
            .iter()
            .any(|k| &k.key_id == id && k.state != KeyState::Revoked)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::distribution::manifest::{FORMAT, PackPermissions};

    fn manifest(id: &str) -> PackManifest {
        PackManifest {
            format: FORMAT,
            id: id.parse().unwrap(),
            publisher: "acme".into(),
            version: semver::Version::new(1, 0, 0),
            permissions: PackPermissions::default(),
            files: vec![],
        }
    }

    fn trusted(key: &SigningKey, scope: &str, state: KeyState) -> TrustedKey {
        TrustedKey {
            key_id: key_id(&key.verifying_key()),
            publisher: "acme".into(),
            public_key: encode_public_key(&key.verifying_key()),
            scopes: vec![scope.into()],
            state,
        }
    }

    #[test]
    fn each_trust_situation_has_its_verdict() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let m = manifest("weather");
        let signed = SignatureFile {
            signatures: vec![sign(&key, &m.to_canonical_bytes())],
        };
        let id = key_id(&key.verifying_key());
        type Case<'a> = (
            Vec<TrustedKey>,
            &'a SignatureFile,
            Result<Vec<String>, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                vec![trusted(&key, "acme/*", KeyState::Active)],
                &signed,
                Ok(vec![id.clone()]),
            ),
            (
                vec![trusted(&key, "acme/weather", KeyState::Active)],
                &signed,
                Ok(vec![id.clone()]),
            ),
            (
                vec![trusted(&key, "acme/news", KeyState::Active)],
                &signed,
                Err("not trusted for `acme/weather`"),
            ),
            (
                vec![trusted(&key, "acmex/*", KeyState::Active)],
                &signed,
                Err("not trusted"),
            ),
            (
                vec![trusted(&key, "acme/*", KeyState::Retired)],
                &signed,
                Err("retired"),
            ),
            (
                vec![trusted(&key, "acme/*", KeyState::Revoked)],
                &signed,
                Err("revoked"),
            ),
            (
                vec![trusted(&other, "acme/*", KeyState::Active)],
                &signed,
                Err("unknown key"),
            ),
            (vec![], &signed, Err("unknown key")),
        ];
        for (store, sigs, want) in cases {
            let got = verify_signatures(&m, sigs, &store).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{got} / {want}"),
                (got, want) => panic!("{got:?} / {want:?}"),
            }
        }
        let unsigned = SignatureFile::default();
        let store = vec![trusted(&key, "acme/*", KeyState::Active)];
        assert_eq!(
            verify_signatures(&m, &unsigned, &store),
            Err(SignatureError::Unsigned)
        );
    }

    #[test]
    fn a_changed_manifest_or_a_swapped_signature_does_not_verify() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let store = vec![trusted(&key, "acme/*", KeyState::Active)];
        let m = manifest("weather");
        let sig_of_other = sign(&key, &manifest("news").to_canonical_bytes());
        let swapped = SignatureFile {
            signatures: vec![sig_of_other],
        };
        assert!(matches!(
            verify_signatures(&m, &swapped, &store),
            Err(SignatureError::Mismatch(_))
        ));
        let mut changed = m.clone();
        changed.permissions.shell = true;
        let signed = SignatureFile {
            signatures: vec![sign(&key, &m.to_canonical_bytes())],
        };
        assert!(matches!(
            verify_signatures(&changed, &signed, &store),
            Err(SignatureError::Mismatch(_))
        ));
        // Without the domain prefix, the same key's plain signature of the bytes is refused.
        let plain = key.sign(&m.to_canonical_bytes());
        let plain = SignatureFile {
            signatures: vec![SignatureEntry {
                key_id: key_id(&key.verifying_key()),
                signature: B64.encode(plain.to_bytes()),
            }],
        };
        assert!(matches!(
            verify_signatures(&m, &plain, &store),
            Err(SignatureError::Mismatch(_))
        ));
    }

    #[test]
    fn revoking_every_signing_key_ends_trust_and_retiring_does_not() {
        let a = SigningKey::from_bytes(&[1; 32]);
        let b = SigningKey::from_bytes(&[2; 32]);
        let ids = vec![key_id(&a.verifying_key()), key_id(&b.verifying_key())];
        let store = |sa, sb| vec![trusted(&a, "acme/*", sa), trusted(&b, "acme/*", sb)];
        assert!(still_trusted(
            &ids,
            &store(KeyState::Revoked, KeyState::Active)
        ));
        assert!(still_trusted(
            &ids,
            &store(KeyState::Revoked, KeyState::Retired)
        ));
        assert!(!still_trusted(
            &ids,
            &store(KeyState::Revoked, KeyState::Revoked)
        ));
        assert!(!still_trusted(
            &[],
            &store(KeyState::Active, KeyState::Active)
        ));
    }
}
