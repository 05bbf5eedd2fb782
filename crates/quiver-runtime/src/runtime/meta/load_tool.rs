//! `load_tool(name)`: loads a tool the caller may reach, named by its wire name
//! (`notes__add_note`) or its qualified name (`notes.add_note`), into the session's tool list,
//! so it can be called: an exposed item brings its whole package's exposed items (seed 000), and the
//! loaded slots count packages, least recently used evicted first. What it may not reach is
//! unknown.

use serde_json::{Value, json};

use super::text_arg;
use crate::presence::{callable, reach};
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

impl Turn<'_> {
    /// Runs `load_tool`.
    pub(in crate::runtime) fn load_tool(
        &mut self,
        call_id: &str,
        arguments: &Value,
    ) -> Result<CallOutcome, RuntimeError> {
        let name = text_arg(arguments, "name").unwrap_or_default();
        let view = self.view()?;
        // A qualified name (`notes.add_note`) names the same item as its wire name.
        let wire = self
            .catalog
            .item(&name)
            .and_then(|item| item.wire.as_deref())
            .unwrap_or(&name);
        // Only what the caller may call is loaded (a private tool named by its exact
        // name is reachable, and refused when called: it is never put on the list).
        let Some(index) = reach(&self.catalog, &view, wire, &|i| self.admitted(i))
            .filter(|&i| callable(&self.catalog, &view, &self.catalog.items()[i]))
        else {
            return Ok(self.unknown(call_id, &name));
        };
        self.load_item(index)?;
        let item = &self.catalog.items()[index];
        Ok(CallOutcome::new(
            call_id,
            CallStatus::Ok,
            json!({"loaded": item.wire}),
        ))
    }
}
