//! `quiver schedules list`: every `schedule` trigger of the catalog's workflows with its next
//! fire, computed in the schedule's time zone.

use std::process::ExitCode;

use quiver_runtime::RunOps;
use quiver_workflow::{Clock, SystemClock};

use super::runs::open_host;
use super::runtime::StateArgs;
use crate::roots::RootArgs;

/// `quiver schedules ...`.
#[derive(Debug, clap::Subcommand)]
pub enum SchedulesCommand {
    /// List the schedules with their next fire times.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// Runs `quiver schedules ...`.
pub fn run(roots: &RootArgs, command: SchedulesCommand) -> miette::Result<ExitCode> {
    let SchedulesCommand::List { json, state } = command;
    let host = open_host(roots, &state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    let entries = ops
        .schedules(SystemClock.now())
        .map_err(|e| miette::miette!("{e}"))?;
    if json {
        crate::out(&serde_json::to_string_pretty(&entries).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        crate::out("no schedules");
    }
    for e in &entries {
        let s = &e.upcoming.schedule;
        let next = match (&e.upcoming.next, &e.upcoming.error) {
            (Some(next), _) => format!("next {next}"),
            (None, Some(error)) => format!("cannot fire: {}", crate::shown(error)),
            (None, None) => "never fires again".to_owned(),
        };
        crate::out(&format!(
            "{}  `{}` in {}  {next}  (overlap {}, catchup {})",
            crate::shown(&e.workflow),
            crate::shown(&s.cron),
            crate::shown(&s.timezone),
            serde_json::to_value(s.overlap)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            serde_json::to_value(s.catchup)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
