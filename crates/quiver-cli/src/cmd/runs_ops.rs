//! `quiver runs wait|cancel|retry|resolve`: an operator's hands on a run, through
//! [`quiver_runtime::RunOps`] over the Host's runtime (a step that runs again is a call of the
//! one pipeline for the run's principal).

use std::process::ExitCode;
use std::time::Duration;

use quiver_runtime::{RunError, RunOps};
use quiver_store::workflow::{Run, RunStatus};
use serde_json::Value;

use super::runs::{open_host, print_run};
use super::runtime::{SenderArgs, StateArgs};
use crate::roots::RootArgs;

/// How often a wait looks at timers and answers.
pub(super) const WAIT_POLL: Duration = Duration::from_millis(200);

/// Arguments of `quiver runs wait`.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// The run's id (`run-...`).
    pub id: String,
    /// Give up after this many seconds (default: wait until the run ends).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Print the run as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Arguments of `quiver runs cancel` and `quiver runs retry`.
#[derive(Debug, clap::Args)]
pub struct OpArgs {
    /// The run's id (`run-...`).
    pub id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sender: SenderArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Arguments of `quiver runs resolve`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("verdict").required(true).args(["done", "fail"])))]
pub struct ResolveArgs {
    /// The run's id (`run-...`).
    pub id: String,
    /// The step in doubt did happen: it is done, with `--output`.
    #[arg(long, requires = "output")]
    pub done: bool,
    /// The step's output, as JSON (with `--done`).
    #[arg(long, value_name = "JSON")]
    pub output: Option<String>,
    /// The step did not happen, or must not count: the run fails.
    #[arg(long)]
    pub fail: bool,
    /// Why it fails (with `--fail`).
    #[arg(long, requires = "fail")]
    pub reason: Option<String>,
    /// Print the run as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sender: SenderArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// `quiver runs wait`: exit 0 when the run completed, 1 when it failed or was cancelled, 2
/// when it is in doubt (at once: only an operator moves it on) or still waits at the timeout.
pub fn wait(roots: &RootArgs, args: WaitArgs) -> miette::Result<ExitCode> {
    let timeout = args
        .timeout
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .map_err(|_| miette::miette!("`--timeout` is a number of seconds, not `{s}`"))
        })
        .transpose()?;
    let host = open_host(roots, &args.state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    let run = ops
        .wait(&args.id, timeout, WAIT_POLL)
        .map_err(|e| miette::miette!("{e}"))?;
    print_run(&run, args.json);
    Ok(match run.status {
        RunStatus::Completed => ExitCode::SUCCESS,
        RunStatus::Failed | RunStatus::Cancelled => ExitCode::FAILURE,
        RunStatus::InDoubt => {
            in_doubt_help(&run);
            ExitCode::from(2)
        }
        _ => {
            crate::err(&format!(
                "{} is still {} after the timeout",
                run.id, run.status
            ));
            ExitCode::from(2)
        }
    })
}

/// Tells the operator how to move a run in doubt on.
pub(super) fn in_doubt_help(run: &Run) {
    crate::err(&format!(
        "{id} is in doubt: its step may have changed the world before a crash; decide with \
         `quiver runs retry {id}`, `quiver runs resolve {id} --done --output JSON` or \
         `quiver runs resolve {id} --fail`",
        id = run.id
    ));
}

/// `quiver runs cancel`: exit 0 when the run is cancelled, 1 when it had ended or does not
/// exist.
pub fn cancel(roots: &RootArgs, args: OpArgs) -> miette::Result<ExitCode> {
    let by = operator(&args.sender)?;
    let host = open_host(roots, &args.state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    match ops.cancel(&args.id, &by) {
        Ok(cancelled) => {
            if args.json {
                crate::out(&serde_json::to_string_pretty(&cancelled).unwrap_or_default());
            } else {
                print_run(&cancelled.run, false);
                if let Some(pgid) = cancelled.killed {
                    crate::out(&format!("  killed the step's process group {pgid}"));
                }
                for card in &cancelled.expired_cards {
                    crate::out(&format!("  withdrew the console card {card}"));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => refused(e),
    }
}

/// `quiver runs retry`: exit 0 when the step ran again (the run's new status is printed), 1
/// when the run is not in doubt or does not exist.
pub fn retry(roots: &RootArgs, args: OpArgs) -> miette::Result<ExitCode> {
    let by = operator(&args.sender)?;
    let host = open_host(roots, &args.state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    settled(ops.retry(&args.id, &by), args.json)
}

/// `quiver runs resolve`: exit 0 when the step in doubt was marked done or failed, 1 when the
/// run is not in doubt or does not exist.
pub fn resolve(roots: &RootArgs, args: ResolveArgs) -> miette::Result<ExitCode> {
    let by = operator(&args.sender)?;
    let output: Option<Value> = args
        .output
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| miette::miette!("`--output` is not JSON: {e}"))?;
    let host = open_host(roots, &args.state, false)?;
    let ops = RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    let result = match output {
        Some(output) if args.done => ops.done(&args.id, output, &by),
        _ => ops.fail(
            &args.id,
            args.reason.as_deref().unwrap_or("resolved as failed"),
            &by,
        ),
    };
    settled(result, args.json)
}

/// Who the operator is: the sender's user id (`--as`; default the local owner).
fn operator(sender: &SenderArgs) -> miette::Result<String> {
    Ok(sender
        .principal(None)?
        .user_id
        .unwrap_or_else(|| "anonymous".to_owned()))
}

fn settled(result: Result<Run, RunError>, as_json: bool) -> miette::Result<ExitCode> {
    match result {
        Ok(run) => {
            print_run(&run, as_json);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => refused(e),
    }
}

/// A refusal or an unknown run: said on stderr, exit 1; anything else is an error (exit 2).
pub(super) fn refused(e: RunError) -> miette::Result<ExitCode> {
    match e {
        RunError::Refused(_) | RunError::NoRun(_) => {
            crate::err(&e.to_string());
            Ok(ExitCode::FAILURE)
        }
        other => Err(miette::miette!("{other}")),
    }
}
