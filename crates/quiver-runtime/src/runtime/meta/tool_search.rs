//! `tool_search(query)`: searches the catalog (bilingual BM25, plus the optional English
//! booster) for what this caller may reach, and loads the tools found into the session so the
//! model can call them (an exposed item with all of its package's exposed items).

use quiver_catalog::EntryKind;
use serde_json::{Value, json};

use crate::presence::reach;
use crate::runtime::{RuntimeError, Turn};

impl Turn<'_> {
    /// Runs `tool_search` for `query`.
    pub(in crate::runtime) fn tool_search(&mut self, query: &str) -> Result<Value, RuntimeError> {
        let view = self.view()?;
        let found = self
            .catalog
            .search(query, self.runtime.config.search_results, &|e| {
                self.entry_admitted(e)
                    && match e.kind {
                        EntryKind::Tool | EntryKind::Agent | EntryKind::Workflow => {
                            e.wire.as_deref().is_some_and(|w| {
                                reach(&self.catalog, &view, w, &|i| {
                                    self.admitted(i) && !self.removed_this_turn(i)
                                })
                                .is_some()
                            })
                        }
                        _ => true,
                    }
            });
        let mut results = Vec::new();
        for f in found {
            let e = f.entry;
            if let (Some(index), Some(wire)) = (e.item, &e.wire) {
                // A hit on an exposed item brings all of its package's exposed items.
                self.load_item(index)?;
                results.push(
                    json!({"kind": e.kind, "name": wire, "summary": e.summary, "loaded": true}),
                );
            } else {
                let hint = match e.kind {
                    EntryKind::Skill | EntryKind::Package => {
                        format!("open with read_skill(\"{}\")", e.id)
                    }
                    _ => String::new(),
                };
                results.push(
                    json!({"kind": e.kind, "name": e.id, "summary": e.summary, "next": hint}),
                );
            }
        }
        Ok(json!({"results": results}))
    }
}
