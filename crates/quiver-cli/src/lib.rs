//! The `quiver` command line: argument parsing and the commands behind it.
//!
//! Data goes to stdout, everything else (diagnostics, progress, summaries, logs) to stderr.
//! Exit codes: 0 success, 1 the command's check failed (lint errors, test misses, an eval
//! under its thresholds), 2 usage or runtime error.

mod cmd;
mod diagnostics;
mod logs;
mod progress;
mod roots;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Quiver: skills and tools for AI agents, safely.
#[derive(Debug, Parser)]
#[command(name = "quiver", version, about)]
struct Cli {
    #[command(flatten)]
    roots: roots::RootArgs,
    #[command(flatten)]
    verbosity: logs::Verbosity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check packages and report every problem with file and line.
    Lint(cmd::lint::LintArgs),
    /// List the packages of the catalog and what they expose.
    List(cmd::catalog::ListArgs),
    /// Show one package, item or skill in full.
    Show(cmd::catalog::ShowArgs),
    /// Search the catalog as `tool_search` does.
    Search(cmd::catalog::SearchArgs),
    /// Check that each tool's examples find it and its negative examples do not.
    Test(cmd::test::TestArgs),
    /// Set up: a provider, the project's package root with a first package, a sandbox check,
    /// and what to paste into MCP clients.
    Init(cmd::init::InitArgs),
    /// Create a skill, tool or package that passes `quiver lint`.
    New(cmd::new::NewArgs),
    /// Run one call through the whole pipeline (consent, approvals, audit).
    Call(cmd::runtime::CallArgs),
    /// List, show and end sessions.
    #[command(subcommand)]
    Session(cmd::runtime::SessionCommand),
    /// Show the audit log.
    Audit(cmd::runtime::AuditArgs),
    /// Start a workflow run (`<package>.<workflow>`) and drive it until it ends or waits.
    Run(cmd::runs::RunArgs),
    /// List, show, wait for, cancel, retry and resolve workflow runs.
    #[command(subcommand)]
    Runs(cmd::runs::RunsCommand),
    /// Emit a package event (wakes the workflow runs waiting for it).
    #[command(subcommand)]
    Events(cmd::events::EventsCommand),
    /// List the workflows' schedules with their next fires.
    #[command(subcommand)]
    Schedules(cmd::schedules::SchedulesCommand),
    /// Answer the console's approval queue: list, approve, deny.
    #[command(subcommand)]
    Approvals(cmd::approvals::ApprovalsCommand),
    /// Show or set the control plane (normal, emergency-stop, read-only, muted).
    Control(cmd::operator::ControlArgs),
    /// Switch a package back on for everyone.
    Enable(cmd::operator::SwitchArgs),
    /// Switch a package off for everyone (absent from the catalog, its tools unknown).
    Disable(cmd::operator::SwitchArgs),
    /// Chat with a model that uses the catalog (or run one turn with `-m`).
    Chat(cmd::chat::ChatArgs),
    /// Measure whether a model picks the right tools, against the eager baseline.
    Eval(cmd::eval::EvalArgs),
    /// What the catalog costs per turn in tokens (`--cost`).
    Inspect(cmd::cost::InspectArgs),
    /// Serve the catalog to MCP clients over stdio or Streamable HTTP.
    Serve(cmd::serve::ServeArgs),
    /// Ask the running `quiver serve` processes to reload every package now.
    Reload(cmd::reload::ReloadArgs),
    /// Agent Skills commands compatible with the reference `agentskills` CLI.
    #[command(subcommand)]
    Skill(cmd::skill::SkillCommand),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Install, list and remove the embedding model that makes search hybrid.
    #[command(subcommand)]
    Models(cmd::models::ModelsCommand),
    /// Pack a package folder into a deterministic `.qpkg`, optionally signed.
    Pack(cmd::pack::PackArgs),
    /// Add a signature to a `.qpkg`.
    Sign(cmd::pack::SignArgs),
    /// Check a `.qpkg` as `install` would (archive, signatures, package) without installing it.
    Verify(cmd::pack::VerifyArgs),
    /// Install a signed `.qpkg` (or a folder with `--allow-unsigned`) into the store.
    Install(cmd::install::InstallArgs),
    /// Install a new version of an installed package, showing the permission diff.
    Update(cmd::install::InstallArgs),
    /// Remove an installed package (`--purge`: its stored versions too).
    Uninstall(cmd::install::UninstallArgs),
    /// Go back to the version installed before the current one.
    Rollback(cmd::install::RollbackArgs),
    /// List the installed packages with their digests and standing.
    Installed(cmd::install::InstalledArgs),
    /// Build a package index folder with a signed snapshot.
    #[command(subcommand)]
    Index(cmd::index::IndexCommand),
    /// Make, list and export signing keys.
    #[command(subcommand)]
    Keys(cmd::keys::KeysCommand),
    /// Trust, list, retire and revoke publisher keys.
    #[command(subcommand)]
    Trust(cmd::keys::TrustCommand),
    /// Print the shell completion script (`quiver completions bash > ~/.local/share/bash-completion/completions/quiver`).
    Completions(cmd::completions::CompletionsArgs),
}

/// The hidden subcommand that runs the sandbox launcher (`quiver sandbox-exec`).
pub const SANDBOX_EXEC: &str = cmd::sandbox_exec::NAME;

/// Runs the sandbox launcher with the arguments after `sandbox-exec`; `main` calls it before
/// any thread starts.
pub fn sandbox_exec(args: &[std::ffi::OsString]) -> ExitCode {
    cmd::sandbox_exec::run(args)
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logs::install(cli.verbosity);
    let result = match cli.command {
        Command::Lint(args) => cmd::lint::run(args),
        Command::List(args) => cmd::catalog::list(&cli.roots, args),
        Command::Show(args) => cmd::catalog::show(&cli.roots, args),
        Command::Search(args) => cmd::catalog::search(&cli.roots, args),
        Command::Test(args) => cmd::test::run(args),
        Command::Init(args) => cmd::init::run(&cli.roots, args),
        Command::New(args) => cmd::new::run(args),
        Command::Call(args) => cmd::runtime::call(&cli.roots, args),
        Command::Session(command) => cmd::runtime::session(command),
        Command::Audit(args) => cmd::runtime::audit(args),
        Command::Run(args) => cmd::runs::run(&cli.roots, args),
        Command::Runs(command) => cmd::runs::runs(&cli.roots, command),
        Command::Events(command) => cmd::events::run(&cli.roots, command),
        Command::Schedules(command) => cmd::schedules::run(&cli.roots, command),
        Command::Approvals(command) => cmd::approvals::run(&cli.roots, command),
        Command::Control(args) => cmd::operator::control(args),
        Command::Enable(args) => cmd::operator::switch(args, true),
        Command::Disable(args) => cmd::operator::switch(args, false),
        Command::Chat(args) => cmd::chat::chat(&cli.roots, args),
        Command::Eval(args) => cmd::eval::run(&cli.roots, args),
        Command::Inspect(args) => cmd::cost::inspect(&cli.roots, args),
        Command::Serve(args) => cmd::serve::run(&cli.roots, args),
        Command::Reload(args) => cmd::reload::run(args),
        Command::Skill(command) => cmd::skill::run(command),
        Command::Bench(command) => cmd::bench::run(command),
        Command::Models(command) => cmd::models::run(command),
        Command::Pack(args) => cmd::pack::pack(args),
        Command::Sign(args) => cmd::pack::sign(args),
        Command::Verify(args) => cmd::pack::verify(args),
        Command::Install(args) => cmd::install::install(args, false),
        Command::Update(args) => cmd::install::install(args, true),
        Command::Uninstall(args) => cmd::install::uninstall(args),
        Command::Rollback(args) => cmd::install::rollback(args),
        Command::Installed(args) => cmd::install::installed(args),
        Command::Keys(command) => cmd::keys::keys(command),
        Command::Index(command) => cmd::index::run(command),
        Command::Trust(command) => cmd::keys::trust(command),
        Command::Completions(args) => {
            cmd::completions::run(<Cli as clap::CommandFactory>::command(), args)
        }
    };
    match result {
        Ok(code) => code,
        Err(report) => {
            err(&format!("{report:?}"));
            ExitCode::from(2)
        }
    }
}

/// Text a package, a caller or a tool wrote (a title, an error, a reason, a name), as a human
/// renderer prints it: every terminal control, bidirectional and zero-width character, and
/// every line break, written as a visible escape, so nothing it says can move the cursor,
/// recolour the terminal or forge a line of its own.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    quiver_package::text::escape_for_terminal(text)
}

/// Several lines of text that hold what a package wrote (a notice, a diagnostic's message),
/// each line escaped as [`shown`] escapes text, the line breaks kept.
pub(crate) fn shown_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| shown(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON value a package, a caller or a tool wrote (arguments, an output), compact, as a
/// human renderer prints it (see [`shown`]).
pub(crate) fn shown_json(value: &serde_json::Value) -> String {
    shown(&value.to_string()).into_owned()
}

/// Writes a line of data to stdout; a closed pipe ends the process quietly.
pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{text}").is_err() {
        std::process::exit(0);
    }
}

/// Writes a line to stderr.
pub(crate) fn err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
