//! `quiver completions SHELL`: the shell's completion script for every command and option,
//! generated from the same definitions that parse them (`clap_complete`), on stdout.

use std::io::Write;
use std::process::ExitCode;

/// Arguments of `quiver completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completion script of `shell` for `command`.
pub fn run(mut command: clap::Command, args: CompletionsArgs) -> miette::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "quiver", &mut script);
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) ends the command quietly, as for every other output.
    let _ = stdout.write_all(&script).and_then(|()| stdout.flush());
    Ok(ExitCode::SUCCESS)
}
