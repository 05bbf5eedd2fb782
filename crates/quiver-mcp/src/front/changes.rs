//! Telling clients that the skills they see changed: the host calls
//! [`Front::catalog_swapped`] after each reload; each connection waits on
//! [`Front::catalog_swaps`] and compares [`Front::skills_fingerprint`] for its caller before and
//! after, so a reload that changed nothing this caller sees sends nothing. The tool list
//! never changes (2026-07-28 forbids it), so only `notifications/resources/list_changed` is
//! sent, by the wire module.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::{Caller, Front};

impl Front {
    /// A new catalog was swapped into the runtime.
    pub fn catalog_swapped(&self) {
        self.swaps.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes at each swap ([`Front::catalog_swapped`]).
    pub fn catalog_swaps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swaps.subscribe()
    }

    /// A digest of the skills `caller` sees as resources: their ids, URIs, frontmatter, and
    /// each file's URI, size and modification time (metadata only, no file is read).
    pub fn skills_fingerprint(&self, caller: &Caller) -> u64 {
        let mut hasher = DefaultHasher::new();
        for skill in self.visible_skills(caller) {
            skill.id.hash(&mut hasher);
            skill.uri.hash(&mut hasher);
            serde_json::Value::Object(skill.frontmatter)
                .to_string()
                .hash(&mut hasher);
            for file in &skill.files {
                file.uri.hash(&mut hasher);
                file.size.hash(&mut hasher);
                file.modified().hash(&mut hasher);
            }
        }
        hasher.finish()
    }
}
