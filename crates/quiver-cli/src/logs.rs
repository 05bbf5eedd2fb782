//! Logs and how much the CLI says: `tracing` events and spans to stderr with timestamps,
//! filtered by `QUIVER_LOG`, else `RUST_LOG`, else `-v`/`-q`; colour only when stderr is a
//! terminal and `NO_COLOR` is unset or empty (<https://no-color.org>).
//!
//! The libraries' targets are their module paths (`quiver_runtime::runtime::turn`,
//! `quiver_mcp::traced`, `quiver_sandbox::sandbox`), so the directive `quiver=debug` matches
//! every Quiver crate and none of their dependencies.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

/// `-v` and `-q`, accepted before or after the subcommand.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Verbosity {
    /// More logs on stderr: `-v` Quiver's info events, `-vv` debug (each MCP request, call,
    /// sandbox start and workflow step), `-vvv` trace. `QUIVER_LOG` or `RUST_LOG` win when set.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less on stderr: `-q` errors only, no notes, no progress bars; `-qq` no warnings either.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub quiet: u8,
}

/// The `-q` count of this process, for the parts that print notes and progress.
static QUIET: AtomicU8 = AtomicU8::new(0);

/// Whether notes (`note: ...`) and progress bars are hidden (`-q`).
pub fn hide_notes() -> bool {
    QUIET.load(Ordering::Relaxed) >= 1
}

/// Whether warnings the CLI prints itself are hidden too (`-qq`).
pub fn hide_warnings() -> bool {
    QUIET.load(Ordering::Relaxed) >= 2
}

/// The filter directives: `QUIVER_LOG`, else `RUST_LOG` (each only when not empty), else the
/// level `-v`/`-q` ask for, the default being warnings.
pub fn directives(
    quiver_log: Option<&str>,
    rust_log: Option<&str>,
    verbosity: Verbosity,
) -> String {
    let set = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    if let Some(directives) = set(quiver_log).or_else(|| set(rust_log)) {
        return directives;
    }
    match (verbosity.quiet, verbosity.verbose) {
        (2.., _) => "off",
        (1, _) => "error",
        (0, 0) => "warn",
        (0, 1) => "warn,quiver=info",
        (0, 2) => "warn,quiver=debug",
        (0, 3..) => "info,quiver=trace",
    }
    .to_owned()
}

/// Whether stderr gets colour: a terminal, and `NO_COLOR` unset or empty.
pub fn ansi(terminal: bool, no_color: Option<&str>) -> bool {
    terminal && no_color.is_none_or(str::is_empty)
}

/// Sends the libraries' events to stderr as [`directives`] and [`ansi`] say. An invalid
/// filter is said once and the default used.
pub fn install(verbosity: Verbosity) {
    QUIET.store(verbosity.quiet, Ordering::Relaxed);
    let var = |name: &str| std::env::var(name).ok();
    let wanted = directives(
        var("QUIVER_LOG").as_deref(),
        var("RUST_LOG").as_deref(),
        verbosity,
    );
    let filter = tracing_subscriber::EnvFilter::try_new(&wanted).unwrap_or_else(|e| {
        crate::err(&format!(
            "warning: the log filter `{wanted}` (QUIVER_LOG or RUST_LOG) is not valid: {e}; warnings only\n\nhint: write it as `tracing` directives, such as `info` or `quiver=debug`"
        ));
        tracing_subscriber::EnvFilter::new("warn")
    });
    let stderr = std::io::stderr();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi(stderr.is_terminal(), var("NO_COLOR").as_deref()))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_comes_from_the_environment_then_the_flags() {
        let v = |verbose, quiet| Verbosity { verbose, quiet };
        let cases = [
            (None, None, v(0, 0), "warn"),
            (None, None, v(1, 0), "warn,quiver=info"),
            (None, None, v(2, 0), "warn,quiver=debug"),
            (None, None, v(5, 0), "info,quiver=trace"),
            (None, None, v(0, 1), "error"),
            (None, None, v(0, 2), "off"),
            (None, Some("quiver=debug"), v(0, 0), "quiver=debug"),
            (None, Some("quiver=debug"), v(0, 1), "quiver=debug"),
            (Some("error"), Some("quiver=debug"), v(2, 0), "error"),
            (Some(""), Some("quiver=debug"), v(0, 0), "quiver=debug"),
            (Some(" "), Some(""), v(1, 0), "warn,quiver=info"),
        ];
        for (quiver_log, rust_log, verbosity, want) in cases {
            assert_eq!(
                directives(quiver_log, rust_log, verbosity),
                want,
                "{quiver_log:?} {rust_log:?} {verbosity:?}"
            );
        }
    }

    #[test]
    fn colour_only_at_a_terminal_without_no_color() {
        let cases = [
            (true, None, true),
            (true, Some(""), true),
            (true, Some("1"), false),
            (true, Some("0"), false),
            (false, None, false),
            (false, Some(""), false),
        ];
        for (terminal, no_color, want) in cases {
            assert_eq!(ansi(terminal, no_color), want, "{terminal} {no_color:?}");
        }
    }
}
