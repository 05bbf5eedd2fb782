//! `quiver bench`.

use std::process::ExitCode;

/// Subcommands of `quiver bench`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {}

/// Runs `quiver bench`.
pub fn run(command: BenchCommand) -> miette::Result<ExitCode> {
    match command {}
}
