//! `quiver skill`.

use std::process::ExitCode;

/// Subcommands of `quiver skill`.
#[derive(Debug, clap::Subcommand)]
pub enum SkillCommand {}

/// Runs `quiver skill`.
pub fn run(command: SkillCommand) -> miette::Result<ExitCode> {
    match command {}
}
