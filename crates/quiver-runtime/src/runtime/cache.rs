//! The perception cache: identical calls of a `perception` tool with `cache: N` are answered
//! from the store for N seconds, so every process on one state database shares it (`quiver
//! call`s, several `quiver serve`s). The key is a digest of everything the answer depends on
//! (tool, canonical arguments, principal and origin), so one sender never gets another's
//! result; the store keeps it bounded ([`quiver_store::CACHED_RESULTS`]). A call whose
//! arguments hold a secret field is never cached: the store would keep a digest of the secret,
//! which the audit never does. A store that cannot answer is a miss, never a failed call.

use quiver_store::{argument_digest, now_ms};
use serde_json::{Value, json};

use super::Runtime;

/// Where a result may be cached, and for how long.
pub(super) struct CacheKey {
    /// The digest of the tool, the canonical arguments, the principal and the origin.
    digest: String,
    /// How long the result stays fresh, in seconds (the tool's `cache`).
    seconds: u64,
}

impl CacheKey {
    /// The key of a call of `tool` (`<package>.<tool>`) with `arguments`, by `principal` from
    /// `origin` (both as JSON), fresh for `seconds`.
    pub fn new(
        tool: &str,
        arguments: &Value,
        principal: &Value,
        origin: &Value,
        seconds: u64,
    ) -> CacheKey {
        CacheKey {
            digest: argument_digest(&json!([tool, arguments, principal, origin]), &[]),
            seconds,
        }
    }

    /// How long the result stays fresh, in seconds.
    pub fn seconds(&self) -> u64 {
        self.seconds
    }
}

impl Runtime {
    /// The result cached under `key` that is still fresh.
    pub(super) fn cached_result(&self, key: &CacheKey) -> Option<Value> {
        self.store
            .cached_result(&key.digest, now_ms())
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "the perception cache could not be read");
                None
            })
    }

    /// Caches `value` under `key` for the key's seconds.
    pub(super) fn cache_result(&self, key: &CacheKey, value: &Value) {
        let now = now_ms();
        let ttl = i64::try_from(key.seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
        if let Err(error) =
            self.store
                .cache_result(&key.digest, value, now, now.saturating_add(ttl))
        {
            tracing::warn!(%error, "the result could not be kept in the perception cache");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_everything_the_result_depends_on() {
        let key = |tool: &str, args: Value, principal: Value, origin: Value| {
            CacheKey::new(tool, &args, &principal, &origin, 60).digest
        };
        let base = key(
            "w.f",
            json!({"a": 1, "b": 2}),
            json!({"u": 1}),
            json!({"p": "cli"}),
        );
        let cases = [
            (
                "key order",
                json!({"b": 2, "a": 1}),
                json!({"u": 1}),
                json!({"p": "cli"}),
                true,
            ),
            (
                "arguments",
                json!({"a": 2, "b": 2}),
                json!({"u": 1}),
                json!({"p": "cli"}),
                false,
            ),
            (
                "principal",
                json!({"a": 1, "b": 2}),
                json!({"u": 2}),
                json!({"p": "cli"}),
                false,
            ),
            (
                "origin",
                json!({"a": 1, "b": 2}),
                json!({"u": 1}),
                json!({"p": "qq"}),
                false,
            ),
        ];
        for (name, args, principal, origin, same) in cases {
            assert_eq!(key("w.f", args, principal, origin) == base, same, "{name}");
        }
        let other_tool = key(
            "w.g",
            json!({"a": 1, "b": 2}),
            json!({"u": 1}),
            json!({"p": "cli"}),
        );
        assert_ne!(other_tool, base, "tool");
    }
}
