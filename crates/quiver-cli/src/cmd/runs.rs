//! `quiver run` and `quiver runs`: start a workflow run and drive it with the engine the Host
//! builds over the state database (each tool or agent step a call of the one pipeline), and
//! read the stored runs.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use quiver_host::{Host, HostOptions};
use quiver_runtime::admin::RunView;
use quiver_runtime::approver::Approver;
use quiver_runtime::{ApproverSet, RunError, RunOps};
use quiver_store::workflow::{Run, RunFilter, RunStatus};
use serde_json::{Value, json};

use super::runtime::{SenderArgs, StateArgs};
use crate::roots::RootArgs;

/// Arguments of `quiver run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workflow, `<package>.<workflow>`.
    pub workflow: String,
    /// The input, as a JSON object.
    #[arg(long, default_value = "{}")]
    pub input: String,
    /// An idempotency key: a second run with the same key is the first run.
    #[arg(long)]
    pub key: Option<String>,
    /// Wait until the run ends (through timers and answered approvals), or stands in doubt.
    #[arg(long)]
    pub wait: bool,
    /// Print the run as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sender: SenderArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// `quiver runs ...`.
#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// List the runs, newest first.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Show one run with its attempts and waits.
    Show {
        /// The run's id (`run-...`).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Drive a run until it ends, stands in doubt or the timeout passes (exit 0 completed, 1
    /// failed or cancelled, 2 in doubt or still going).
    Wait(super::runs_ops::WaitArgs),
    /// Cancel a run: stored first, then its step's tool is killed and its questions withdrawn.
    Cancel(super::runs_ops::OpArgs),
    /// Run the step of a run in doubt again.
    Retry(super::runs_ops::OpArgs),
    /// Mark the step of a run in doubt done (`--done --output JSON`) or fail it (`--fail`).
    Resolve(super::runs_ops::ResolveArgs),
}

/// Opens the Host over the state database (its runtime has the workflow store): the
/// terminal's person answers questions when `person` is set.
pub(super) fn open_host(roots: &RootArgs, state: &StateArgs, person: bool) -> miette::Result<Host> {
    let host = open_host_bare(roots, state, person)?;
    // Driving a run may reach an `agent` step.
    host.run_agents_with_configured_models()
        .map_err(|e| miette::miette!(help = "see docs/agent.md for the configuration", "{e}"))?;
    Ok(host)
}

/// [`open_host`] without the agent models: for what reads runs and drives none.
fn open_host_bare(roots: &RootArgs, state: &StateArgs, person: bool) -> miette::Result<Host> {
    let config = crate::roots::config()?;
    let state = state.state_with(&config)?;
    let person = person.then(|| {
        Arc::new(quiver_runtime::approver::TerminalApprover::new(
            std::io::BufReader::new(std::io::stdin()),
            std::io::stderr(),
            true,
            false,
        )) as Arc<dyn Approver>
    });
    let loading = crate::progress::Progress::loading();
    let host = Host::open(
        config,
        HostOptions {
            roots: roots.roots.clone(),
            state,
            search: None,
            approvers: ApproverSet {
                person,
                console: None,
                reviewer: None,
            },
            launcher: crate::roots::launcher()?,
            reload: false,
        },
    )
    .map_err(crate::roots::fail)?;
    drop(loading);
    crate::roots::notices(host.notices());
    Ok(host)
}

/// Runs `quiver run`: exit 0 when the run completed or waits, 1 when it failed or was
/// cancelled, 2 when `--wait` stopped at a run in doubt (an operator decides).
pub fn run(roots: &RootArgs, args: RunArgs) -> miette::Result<ExitCode> {
    let input: Value = serde_json::from_str(&args.input)
        .map_err(|e| miette::miette!("`--input` is not JSON: {e}"))?;
    let sender = args.sender.principal(None)?;
    let interactive = std::io::stdin().is_terminal();
    let host = open_host(roots, &args.state, interactive)?;
    let runtime = host.runtime();
    let fail = |e: RunError| miette::miette!("{e}");
    let ops = RunOps::new(runtime).map_err(fail)?;
    let (run, created) = ops
        .start(
            &args.workflow,
            &sender,
            input,
            json!({"kind": "manual", "front": "cli"}),
            interactive,
            args.key,
        )
        .map_err(fail)?;
    if !created {
        crate::err(&format!("{} exists already with this key", run.id));
    }
    let run = if args.wait {
        ops.wait(&run.id, None, super::runs_ops::WAIT_POLL)
    } else {
        ops.drive(&run.id)
    }
    .map_err(fail)?;
    print_run(&run, args.json);
    Ok(match run.status {
        RunStatus::Failed | RunStatus::Cancelled => ExitCode::FAILURE,
        RunStatus::InDoubt if args.wait => {
            super::runs_ops::in_doubt_help(&run);
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    })
}

pub(super) fn print_run(run: &Run, as_json: bool) {
    if as_json {
        crate::out(&serde_json::to_string_pretty(run).unwrap_or_default());
        return;
    }
    let mut text = format!(
        "{}  {}  {}",
        crate::shown(&run.id),
        crate::shown(&run.workflow),
        run.status.as_str()
    );
    if let Some(output) = &run.output {
        text.push_str(&format!("\n  output: {}", crate::shown_json(output)));
    }
    if let Some(error) = &run.error {
        text.push_str(&format!("\n  error: {}", crate::shown(error)));
    }
    crate::out(&text);
}

/// Runs `quiver runs ...`: exit 1 when the run does not exist (`wait`: see its own codes).
pub fn runs(roots: &RootArgs, command: RunsCommand) -> miette::Result<ExitCode> {
    let fail = |e: quiver_runtime::RuntimeError| miette::miette!("{e}");
    match command {
        RunsCommand::Wait(args) => super::runs_ops::wait(roots, args),
        RunsCommand::Cancel(args) => super::runs_ops::cancel(roots, args),
        RunsCommand::Retry(args) => super::runs_ops::retry(roots, args),
        RunsCommand::Resolve(args) => super::runs_ops::resolve(roots, args),
        RunsCommand::List { json, state } => {
            let mut runs = state.admin()?.runs(&RunFilter::default()).map_err(fail)?;
            runs.sort_by_key(|r| std::cmp::Reverse(r.created_at));
            if json {
                crate::out(&serde_json::to_string_pretty(&runs).unwrap_or_default());
            } else if runs.is_empty() {
                crate::out("no runs");
            } else {
                for run in &runs {
                    print_run(run, false);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        RunsCommand::Show { id, json, state } => {
            let Some(view) = state.admin()?.run(&id).map_err(fail)? else {
                crate::err(&format!("no run `{id}`"));
                return Ok(ExitCode::FAILURE);
            };
            let RunView {
                run,
                attempts,
                waits,
            } = &view;
            let waiting_for = waiting_for(roots, &state, run);
            if json {
                let mut value = serde_json::to_value(&view).unwrap_or_default();
                if let (Some(object), Some(note)) = (value.as_object_mut(), &waiting_for) {
                    object.insert("waiting_for".into(), Value::String(note.clone()));
                }
                crate::out(&serde_json::to_string_pretty(&value).unwrap_or_default());
            } else {
                print_run(run, false);
                if let Some(note) = &waiting_for {
                    crate::out(&format!("  waits for {}", crate::shown(note)));
                }
                for a in attempts {
                    crate::out(&format!(
                        "  step {} attempt {}: {}",
                        crate::shown(&a.step_id),
                        a.attempt,
                        serde_json::to_value(a.status).unwrap_or_default()
                    ));
                }
                for w in waits.iter().filter(|w| w.status.as_str() == "pending") {
                    crate::out(&format!(
                        "  waits ({}): {}",
                        w.kind.as_str(),
                        crate::shown_json(&w.detail)
                    ));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What a run that has not ended waits for before an instance with this catalog may drive it
/// (the package digests it pins that are not loaded here), computed against the local catalog;
/// `None` when nothing, or when it cannot be told (said on stderr).
fn waiting_for(roots: &RootArgs, state: &StateArgs, run: &Run) -> Option<String> {
    if run.status.is_final() {
        return None;
    }
    let note = open_host_bare(roots, state, false).and_then(|host| {
        let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
        ops.waiting_for(&run.id).map_err(|e| miette::miette!("{e}"))
    });
    note.unwrap_or_else(|e| {
        crate::err(&format!(
            "cannot tell which package digests the run waits for: {e}"
        ));
        None
    })
}
