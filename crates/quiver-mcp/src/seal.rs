//! Sealed tokens: a JSON payload with a purpose and an expiry, signed with HMAC-SHA256.
//!
//! Used for the two things a client carries for Quiver and must not be able to forge: the
//! conversation handle and the `requestState` of a pending consent or approval. The format is
//! `v1.<base64url payload>.<base64url tag>`; the tag covers the version, the purpose and the
//! payload, so a handle can never be replayed as a request state or the other way round.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why a sealed token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not a token of this format.
    #[error("malformed token")]
    Malformed,
    /// The tag does not match: forged, altered, sealed with another key or for another purpose.
    #[error("the token's signature does not match")]
    BadSignature,
    /// Past its expiry.
    #[error("the token has expired")]
    Expired,
}

#[derive(Serialize, serde::Deserialize)]
struct Envelope<T> {
    /// Expiry, seconds since the epoch (0: none).
    exp: u64,
    body: T,
}

/// Seals and opens tokens with one secret key.
#[derive(Clone)]
pub struct Sealer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Sealer {
    /// A sealer with `key` (at least 32 bytes of secret).
    pub fn new(key: impl Into<Vec<u8>>) -> Sealer {
        Sealer { key: key.into() }
    }

    fn tag(&self, purpose: &str, payload: &str) -> Vec<u8> {
        // `new_from_slice` accepts a key of any length for HMAC.
        let mut mac = match HmacSha256::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => return Vec::new(),
        };
        mac.update(b"v1\0");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(payload.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Seals `body` for `purpose`, valid for `ttl_secs` seconds (0: no expiry).
    pub fn seal<T: Serialize>(&self, purpose: &str, body: &T, ttl_secs: u64) -> String {
        let exp = if ttl_secs == 0 { 0 } else { now() + ttl_secs };
        let json = serde_json::to_vec(&Envelope { exp, body }).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = URL_SAFE_NO_PAD.encode(self.tag(purpose, &payload));
        format!("v1.{payload}.{tag}")
    }

    /// Opens a token sealed for `purpose`, checking its signature and expiry.
    pub fn open<T: DeserializeOwned>(&self, purpose: &str, token: &str) -> Result<T, SealError> {
        let mut parts = token.split('.');
        let (Some("v1"), Some(payload), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(SealError::Malformed);
        };
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SealError::Malformed)?;
        let mut mac = HmacSha256::new_from_slice(&self.key).map_err(|_| SealError::BadSignature)?;
        mac.update(b"v1\0");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(payload.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&tag)
            .map_err(|_| SealError::BadSignature)?;
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| SealError::Malformed)?;
        let envelope: Envelope<T> =
            serde_json::from_slice(&json).map_err(|_| SealError::Malformed)?;
        if envelope.exp != 0 && envelope.exp < now() {
            return Err(SealError::Expired);
        }
        Ok(envelope.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_open() {
        let sealer = Sealer::new(vec![7u8; 32]);
        let other = Sealer::new(vec![8u8; 32]);
        let token = sealer.seal("conversation", &"ses_1", 0);
        assert_eq!(
            sealer.open::<String>("conversation", &token),
            Ok("ses_1".into())
        );
        let cases: &[(&Sealer, &str, String, SealError)] = &[
            (
                &other,
                "conversation",
                token.clone(),
                SealError::BadSignature,
            ),
            (
                &sealer,
                "request-state",
                token.clone(),
                SealError::BadSignature,
            ),
            (
                &sealer,
                "conversation",
                token.replacen("v1.", "v2.", 1),
                SealError::Malformed,
            ),
            (
                &sealer,
                "conversation",
                format!("{token}x"),
                SealError::BadSignature,
            ),
            (
                &sealer,
                "conversation",
                "v1.e30.AAAA".into(),
                SealError::BadSignature,
            ),
            (
                &sealer,
                "conversation",
                "garbage".into(),
                SealError::Malformed,
            ),
        ];
        for (s, purpose, t, want) in cases {
            assert_eq!(
                s.open::<String>(purpose, t).as_ref(),
                Err(want),
                "{purpose} {t}"
            );
        }
        // An altered payload with the old tag.
        let (_, rest) = token.split_once('.').unwrap();
        let (_, tag) = rest.split_once('.').unwrap();
        let forged_payload = URL_SAFE_NO_PAD.encode(br#"{"exp":0,"body":"ses_2"}"#);
        assert_eq!(
            sealer.open::<String>("conversation", &format!("v1.{forged_payload}.{tag}")),
            Err(SealError::BadSignature)
        );
    }

    #[test]
    fn expired_tokens_are_refused() {
        let sealer = Sealer::new(vec![7u8; 32]);
        let json = serde_json::to_vec(&Envelope { exp: 1, body: "x" }).unwrap();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = URL_SAFE_NO_PAD.encode(sealer.tag("p", &payload));
        assert_eq!(
            sealer.open::<String>("p", &format!("v1.{payload}.{tag}")),
            Err(SealError::Expired)
        );
    }
}
