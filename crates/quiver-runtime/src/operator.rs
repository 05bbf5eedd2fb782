//! The operator's runtime-wide switches, kept in the store so they outlive a restart and reach
//! every process on the same database: the control plane and the packages switched off.
//! [`crate::Runtime`] applies them from the next turn; fronts without a runtime (the CLI) set
//! them here.

use std::collections::BTreeSet;

use quiver_policy::ControlPlane;
use quiver_store::{Result, Store};
use serde_json::Value;

/// The store key of the control plane.
const CONTROL_KEY: &str = "control";
/// The store key prefix of a package the operator switched off (`disabled:<package>`).
const DISABLED_PREFIX: &str = "disabled:";

/// The operator's switches as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorState {
    /// The control plane.
    pub control: ControlPlane,
    /// Packages switched off for everyone.
    pub disabled: BTreeSet<String>,
}

/// Reads the switches.
pub fn read(store: &dyn Store) -> Result<OperatorState> {
    let values = store.operator_values()?;
    let control = values
        .get(CONTROL_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let disabled = values
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .filter_map(|(k, _)| k.strip_prefix(DISABLED_PREFIX).map(str::to_owned))
        .collect();
    Ok(OperatorState { control, disabled })
}

/// Sets the control plane; `by` names the operator.
pub fn set_control(store: &dyn Store, control: ControlPlane, by: &str) -> Result<()> {
    let value = serde_json::to_value(control).unwrap_or_default();
    store.set_operator_value(CONTROL_KEY, &value, by)
}

/// Switches `package` off (or back on) for everyone; `by` names the operator.
pub fn set_enabled(store: &dyn Store, package: &str, enabled: bool, by: &str) -> Result<()> {
    store.set_operator_value(
        &format!("{DISABLED_PREFIX}{package}"),
        &Value::Bool(!enabled),
        by,
    )
}
