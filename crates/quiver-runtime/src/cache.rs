//! The perception cache: a `perception` tool that declares `cache: N` may answer an identical
//! call from the last N seconds from memory. "Identical" names everything the answer may
//! depend on — the tool, its arguments, who asks and from where — so one user's or one
//! group's result never answers another. Bounded: least recently used entries go first, and
//! an expired entry is dropped when it is read.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;
use serde_json::Value;

/// Entries kept at most, across every tool and session of a runtime.
pub const PERCEPTION_CACHE_ENTRIES: usize = 1024;

/// What an answer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// `<package>.<tool>`.
    pub tool: String,
    /// The arguments, as canonical JSON.
    pub arguments: String,
    /// The sender, as JSON (user id, role, platform roles).
    pub principal: String,
    /// The origin, as JSON (platform, scope, channel).
    pub origin: String,
}

/// A bounded cache of recent perception results, each with its own expiry.
pub struct PerceptionCache {
    entries: Mutex<LruCache<CacheKey, (Instant, Value)>>,
}

impl PerceptionCache {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> PerceptionCache {
        PerceptionCache {
            entries: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    /// The result stored for `key` less than `ttl` ago, if any.
    pub fn get(&self, key: &CacheKey, ttl: Duration, now: Instant) -> Option<Value> {
        let mut entries = self.entries.lock().ok()?;
        let fresh = entries
            .get(key)
            .map(|(at, value)| (now.saturating_duration_since(*at) < ttl, value.clone()));
        match fresh {
            Some((true, value)) => Some(value),
            Some((false, _)) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `key` at `now`, evicting the least recently used entry when full.
    pub fn put(&self, key: CacheKey, value: Value, now: Instant) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.put(key, (now, value));
        }
    }

    /// How many entries are stored.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(tool: &str, principal: &str, origin: &str) -> CacheKey {
        CacheKey {
            tool: tool.into(),
            arguments: "{}".into(),
            principal: principal.into(),
            origin: origin.into(),
        }
    }

    #[test]
    fn an_answer_is_only_for_the_same_tool_arguments_sender_and_origin() {
        let cache = PerceptionCache::new(8);
        let now = Instant::now();
        let ttl = Duration::from_secs(60);
        cache.put(key("p.t", "alice", "group:1"), json!("A's"), now);
        let cases = [
            (key("p.t", "alice", "group:1"), Some(json!("A's"))),
            (key("p.t", "bob", "group:1"), None),
            (key("p.t", "alice", "group:2"), None),
            (key("p.u", "alice", "group:1"), None),
            (
                CacheKey {
                    arguments: "{\"x\":1}".into(),
                    ..key("p.t", "alice", "group:1")
                },
                None,
            ),
        ];
        for (asked, want) in cases {
            assert_eq!(cache.get(&asked, ttl, now), want, "{asked:?}");
        }
    }

    #[test]
    fn entries_expire_and_the_cache_is_bounded() {
        let cache = PerceptionCache::new(2);
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        cache.put(key("p.t", "a", ""), json!(1), start);
        assert_eq!(cache.get(&key("p.t", "a", ""), ttl, start + ttl), None);
        assert!(cache.is_empty(), "an expired entry is dropped when read");
        for who in ["a", "b", "c"] {
            cache.put(key("p.t", who, ""), json!(who), start);
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&key("p.t", "a", ""), ttl, start), None);
        assert_eq!(
            cache.get(&key("p.t", "c", ""), ttl, start),
            Some(json!("c"))
        );
    }
}
