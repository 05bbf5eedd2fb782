//! `quiver events emit`: stores a package event (before anything is told of it), then wakes
//! and drives the workflow runs whose event wait it matches.

use std::process::ExitCode;

use quiver_runtime::RunOps;
use serde_json::Value;

use super::runs::{open_host, print_run};
use super::runtime::StateArgs;
use crate::roots::RootArgs;

/// `quiver events ...`.
#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// Store an event and wake the runs waiting for it.
    Emit {
        /// The event's name.
        name: String,
        /// Its payload, as JSON (what a matching wait's step outputs).
        #[arg(long, default_value = "{}", value_name = "JSON")]
        payload: String,
        /// Who emits it.
        #[arg(long, default_value = "operator")]
        source: String,
        /// Print the event id and the woken runs as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// Runs `quiver events ...`: exit 0 once the event is stored.
pub fn run(roots: &RootArgs, command: EventsCommand) -> miette::Result<ExitCode> {
    let EventsCommand::Emit {
        name,
        payload,
        source,
        json,
        state,
    } = command;
    let payload: Value = serde_json::from_str(&payload)
        .map_err(|e| miette::miette!("`--payload` is not JSON: {e}"))?;
    let host = open_host(roots, &state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    let emitted = ops
        .emit(&name, &source, &payload)
        .map_err(|e| miette::miette!("{e}"))?;
    if json {
        crate::out(&serde_json::to_string_pretty(&emitted).unwrap_or_default());
    } else {
        crate::out(&format!(
            "event {} `{name}` stored; {} run(s) woke",
            emitted.event_id,
            emitted.woke.len()
        ));
        for run in &emitted.woke {
            print_run(run, false);
        }
    }
    Ok(ExitCode::SUCCESS)
}
