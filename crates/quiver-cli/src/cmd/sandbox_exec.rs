//! `quiver sandbox-exec --policy-stdin -- CMD...`: the sandbox launcher. The runtime starts it
//! for every package tool; it is dispatched from `main` before clap, tokio or any thread
//! starts, and hands off to [`quiver_sandbox::launcher::main`].

use std::ffi::OsString;
use std::process::ExitCode;

/// The subcommand's name, as `main` recognises it.
pub const NAME: &str = "sandbox-exec";

/// Runs the launcher with the arguments after `sandbox-exec`.
pub fn run(args: &[OsString]) -> ExitCode {
    let code = quiver_sandbox::launcher::main(args);
    ExitCode::from(u8::try_from(code).unwrap_or(quiver_sandbox::launcher::SETUP_FAILED as u8))
}
