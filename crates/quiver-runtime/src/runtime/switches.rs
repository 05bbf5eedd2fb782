//! The operator's switches as a runtime applies them: the control plane and the packages
//! switched off for everyone (in the store, re-read when a turn begins) or in one conversation
//! (in the session's state).

use std::collections::BTreeSet;

use quiver_policy::ControlPlane;
use serde_json::{Value, json};

use super::{Runtime, RuntimeError};

impl Runtime {
    /// Sets the control plane for every process on this store (durable before it returns;
    /// other processes see it from their next turn). `by` names the operator.
    pub fn set_control(&self, control: ControlPlane, by: &str) -> Result<(), RuntimeError> {
        crate::operator::set_control(self.store.as_ref(), control, by)?;
        if let Ok(mut c) = self.control.write() {
            *c = control;
        }
        Ok(())
    }

    /// Re-reads the operator's switches from the store, where another process may have changed
    /// them.
    pub(super) fn refresh_operator_state(&self) -> Result<(), RuntimeError> {
        self.apply_operator_state(crate::operator::read(self.store.as_ref())?);
        Ok(())
    }

    /// Applies the operator's switches as read from the store.
    pub(super) fn apply_operator_state(&self, state: crate::operator::OperatorState) {
        if let Ok(mut c) = self.control.write() {
            *c = state.control;
        }
        if let Ok(mut d) = self.disabled.write() {
            *d = state.disabled;
        }
    }

    /// Switches a package off (absent from the catalog, its tools unknown) or on, for every
    /// session and every process on this store; `by` names the operator.
    pub fn set_enabled(&self, package: &str, enabled: bool, by: &str) -> Result<(), RuntimeError> {
        crate::operator::set_enabled(self.store.as_ref(), package, enabled, by)?;
        if let Ok(mut disabled) = self.disabled.write() {
            if enabled {
                disabled.remove(package);
            } else {
                disabled.insert(package.to_owned());
            }
        }
        Ok(())
    }

    /// The user switches a package off (or back on) in one conversation only.
    pub fn set_enabled_in_session(
        &self,
        session: &str,
        package: &str,
        enabled: bool,
    ) -> Result<(), RuntimeError> {
        let record = self
            .store
            .session(session)?
            .filter(|s| s.is_active())
            .ok_or_else(|| RuntimeError::NoSession(session.to_owned()))?;
        let mut state = record.state;
        let mut off = session_disabled(&state);
        if enabled {
            off.remove(package);
        } else {
            off.insert(package.to_owned());
        }
        if let Value::Object(map) = &mut state {
            map.insert(SESSION_DISABLED_KEY.to_owned(), json!(off));
        }
        self.store.set_session_state(session, &state)?;
        Ok(())
    }

    pub(super) fn is_enabled(&self, package: &str) -> bool {
        self.disabled.read().map_or(true, |d| !d.contains(package))
    }

    /// The packages the operator switched off, read from the store now (a switch made by any
    /// process counts): what the pipeline's enabled check refuses, for fronts that list what
    /// is offered outside a turn (the MCP front's `skills/list`, `resources/*`, `tools/list`).
    pub fn disabled_packages(&self) -> Result<BTreeSet<String>, RuntimeError> {
        self.refresh_operator_state()?;
        Ok(self
            .disabled
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone())
    }
}

/// The key, in a session's state, of the packages its user switched off.
pub(super) const SESSION_DISABLED_KEY: &str = "disabled";

/// The packages a session's user switched off, from its state.
pub(super) fn session_disabled(state: &Value) -> BTreeSet<String> {
    state
        .get(SESSION_DISABLED_KEY)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
