//! The `quiver` command line: argument parsing and the commands behind it.
//!
//! Data goes to stdout, everything else (diagnostics, progress) to stderr.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Quiver: skills and tools for AI agents, safely.
#[derive(Debug, Parser)]
#[command(name = "quiver", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Agent Skills commands compatible with the reference `agentskills` CLI.
    #[command(subcommand)]
    Skill(cmd::skill::SkillCommand),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Skill(command) => cmd::skill::run(command),
        Command::Bench(command) => cmd::bench::run(command),
    };
    match result {
        Ok(code) => code,
        Err(report) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("{report:?}");
            }
            ExitCode::from(2)
        }
    }
}
