//! `quiver control` and `quiver enable|disable`: the operator's runtime-wide switches, stored in
//! the state database so every running front (and the next start) applies them from its next
//! turn.

use std::process::ExitCode;

use quiver_policy::ControlPlane;
use quiver_runtime::operator;

use super::runtime::StateArgs;

/// The control plane's states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ControlState {
    /// Everything runs as the policies say.
    Normal,
    /// Nothing runs.
    EmergencyStop,
    /// Only perception and decision tools run; dangerous tools never.
    ReadOnly,
    /// Recorded for fronts that speak on their own, which then stay silent (no front shipped
    /// today speaks unasked); calls and tools are unaffected, and each call's trace says so.
    Muted,
}

/// Arguments of `quiver control`.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// The state to set; without it, the current one is shown.
    pub state: Option<ControlState>,
    /// Print `{"control", "disabled"}` as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state_db: StateArgs,
}

/// Arguments of `quiver enable` and `quiver disable`.
#[derive(Debug, clap::Args)]
pub struct SwitchArgs {
    /// The package id.
    pub package: String,
    /// Print `{"package", "enabled"}` as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// The operator's name in the records: `cli:$USER`.
pub(crate) fn operator_name() -> String {
    format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".to_owned())
    )
}

/// Runs `quiver control [STATE]`.
pub fn control(args: ControlArgs) -> miette::Result<ExitCode> {
    let admin = args.state_db.admin()?;
    if let Some(state) = args.state {
        let control = ControlPlane {
            emergency_stop: state == ControlState::EmergencyStop,
            read_only: state == ControlState::ReadOnly,
            muted: state == ControlState::Muted,
        };
        admin
            .set_control(control, &operator_name())
            .map_err(|e| miette::miette!("{e}"))?;
    }
    let current = admin.switches().map_err(|e| miette::miette!("{e}"))?;
    let name = operator::control_name(current.control);
    if args.json {
        crate::out(&serde_json::json!({"control": name, "disabled": current.disabled}).to_string());
        return Ok(ExitCode::SUCCESS);
    }
    let disabled = if current.disabled.is_empty() {
        "none".to_owned()
    } else {
        current.disabled.into_iter().collect::<Vec<_>>().join(", ")
    };
    crate::out(&format!("control: {name}\npackages off: {disabled}"));
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver enable ID` (`enabled`) or `quiver disable ID`.
pub fn switch(args: SwitchArgs, enabled: bool) -> miette::Result<ExitCode> {
    args.state
        .admin()?
        .set_enabled(&args.package, enabled, &operator_name())
        .map_err(|e| miette::miette!("{e}"))?;
    if args.json {
        crate::out(&serde_json::json!({"package": args.package, "enabled": enabled}).to_string());
        return Ok(ExitCode::SUCCESS);
    }
    crate::out(&format!(
        "{}: {}",
        args.package,
        if enabled { "on" } else { "off" }
    ));
    Ok(ExitCode::SUCCESS)
}
