//! The perception cache: identical calls of a `perception` tool with `cache: N` are answered
//! from here for N seconds. The key names everything the answer depends on (tool, canonical
//! arguments, principal and origin), so one sender never gets another's result; the map is
//! owned by the [`Runtime`](super::Runtime) and bounded in size, the oldest entry evicted first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Most results kept at once.
pub(super) const MAX_CACHED: usize = 1024;

/// What a cached result depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CacheKey {
    /// `<package>.<tool>`.
    pub tool: String,
    /// The arguments, as canonical JSON.
    pub arguments: String,
    /// Who asked, as JSON.
    pub principal: String,
    /// Where, as JSON.
    pub origin: String,
}

/// A bounded map of results with their time.
#[derive(Default)]
pub(super) struct PerceptionCache {
    entries: Mutex<HashMap<CacheKey, (Instant, Value)>>,
}

impl PerceptionCache {
    /// The result stored under `key` less than `ttl` ago.
    pub fn get(&self, key: &CacheKey, ttl: Duration) -> Option<Value> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, v)| v.clone())
    }

    /// Stores `value` under `key`; when full, drops the oldest entry first.
    pub fn insert(&self, key: CacheKey, value: Value) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_CACHED
            && !entries.contains_key(&key)
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// How many results are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tool: &str, principal: &str) -> CacheKey {
        CacheKey {
            tool: tool.into(),
            arguments: "{}".into(),
            principal: principal.into(),
            origin: "{}".into(),
        }
    }

    #[test]
    fn the_cache_is_bounded_and_keyed_by_who_asks() {
        let cache = PerceptionCache::default();
        let ttl = Duration::from_secs(60);
        cache.insert(key("w.f", "a"), Value::from(1));
        assert_eq!(cache.get(&key("w.f", "a"), ttl), Some(Value::from(1)));
        assert_eq!(cache.get(&key("w.f", "b"), ttl), None);
        assert_eq!(cache.get(&key("w.f", "a"), Duration::ZERO), None);
        for i in 0..MAX_CACHED + 10 {
            cache.insert(key(&format!("t{i}"), "a"), Value::from(i));
        }
        assert_eq!(cache.len(), MAX_CACHED);
    }
}
