//! `quiver reload`: asks the `quiver serve` processes over this state folder to parse every
//! package again and swap the new catalog in, through the same path a file change takes
//! (`quiver_host::reload::request`: a request file in the state folder, no network).

use std::process::ExitCode;
use std::time::Duration;

use quiver_host::reload::request;

use crate::cmd::runtime::StateArgs;

/// Arguments of `quiver reload`.
#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    /// How long to wait for a serving process to answer, in seconds.
    #[arg(long, default_value_t = 10)]
    pub wait: u64,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Runs `quiver reload`: 0 when a serving process reloaded, 1 when none answered.
pub fn run(args: ReloadArgs) -> miette::Result<ExitCode> {
    let state = args.state.state()?;
    let token = request::ask(&state.dir).map_err(|e| {
        miette::miette!(
            "cannot write the reload request under `{}`: {e}",
            state.dir.display()
        )
    })?;
    // Several processes may serve one state folder: once one answered, the others get a
    // moment more.
    let answers = request::answers(
        &state.dir,
        &token,
        Duration::from_secs(args.wait),
        Duration::from_millis(600),
    );
    if answers.is_empty() {
        crate::err(&format!(
            "error: no running `quiver serve` over `{}` answered within {} s\n\nhint: start one with `quiver serve`; a new process loads the packages anyway",
            state.dir.display(),
            args.wait
        ));
        return Ok(ExitCode::from(1));
    }
    for a in answers {
        crate::out(&format!(
            "reloaded: {} package(s), {} error(s) (quiver serve, pid {})",
            a.packages, a.errors, a.pid
        ));
    }
    Ok(ExitCode::SUCCESS)
}
