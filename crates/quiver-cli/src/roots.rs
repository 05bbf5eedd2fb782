//! What every command shares: `--root`, the config file read once per command
//! ([`quiver_host::Config`]), the sandbox launcher, and the catalog for commands that need no
//! runtime.

use std::path::PathBuf;

use quiver_catalog::Catalog;
use quiver_host::{CatalogSource, Config, HostError, Loaded, SearchModels};

/// Arguments shared by every command that reads a catalog.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RootArgs {
    /// A folder of packages (repeatable). When given, only these roots are read.
    #[arg(long = "root", value_name = "PATH", global = true)]
    pub roots: Vec<PathBuf>,
}

/// A host error as a report.
pub fn fail(e: HostError) -> miette::Report {
    miette::miette!("{e}")
}

/// The config file, read once for this command; its warnings go to stderr.
pub fn config() -> miette::Result<Config> {
    let config = Config::load().map_err(fail)?;
    for warning in &config.warnings {
        crate::err(warning);
    }
    Ok(config)
}

/// The sandbox launcher: `quiver-sandbox-exec` next to this binary (see [`LAUNCHER`]) when
/// it is of this very build, else this binary behind its hidden `sandbox-exec` subcommand (a
/// `quiver` copied alone, or one rebuilt without its launcher: `cargo run` builds one binary).
pub fn launcher() -> miette::Result<Vec<std::ffi::OsString>> {
    let exe = std::env::current_exe().map_err(|e| {
        miette::miette!("cannot find Quiver's own binary to launch the sandbox: {e}")
    })?;
    let beside = exe.with_file_name(LAUNCHER);
    if same_build(&beside) {
        return Ok(vec![beside.into_os_string()]);
    }
    Ok(vec![
        exe.into_os_string(),
        crate::cmd::sandbox_exec::NAME.into(),
    ])
}

/// The launcher binary's file name: small, so each sandboxed call starts it quickly.
pub const LAUNCHER: &str = "quiver-sandbox-exec";

/// Whether `launcher` exists and reports this binary's sandbox build.
fn same_build(launcher: &std::path::Path) -> bool {
    if !launcher.is_file() {
        return false;
    }
    let same = std::process::Command::new(launcher)
        .arg(quiver_sandbox::launcher::BUILD_ID_FLAG)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|out| {
            out.status.success() && out.stdout.trim_ascii() == quiver_sandbox::BUILD.as_bytes()
        });
    if !same {
        tracing::warn!(
            "`{}` is from another build of Quiver; sandboxed calls start this binary instead (rebuild both with `cargo build -p quiver-cli`)",
            launcher.display()
        );
    }
    same
}

/// The search models for a command where search matters: their notes (BM25 only, no
/// booster) are printed here, once.
pub fn search_models(config: &Config) -> SearchModels {
    let models = SearchModels::load(config.search);
    if !crate::logs::hide_notes() {
        for note in &models.notes {
            crate::err(note);
        }
    }
    models
}

/// Prints what a person should read about a catalog just built (unless `-qq`).
pub fn notices(lines: &[String]) {
    if crate::logs::hide_warnings() {
        return;
    }
    for line in lines {
        crate::err(&crate::shown_lines(line));
    }
}

/// The catalog for a command without a runtime, with `search` for hybrid search (`None`:
/// BM25 alone). External MCP servers, if any, are started to list their tools and stop with
/// this command.
pub fn catalog(
    config: &Config,
    roots: &RootArgs,
    search: Option<&SearchModels>,
) -> miette::Result<Catalog> {
    let source = CatalogSource::new(config, &roots.roots, search).map_err(fail)?;
    let loading = crate::progress::Progress::loading();
    let Loaded { catalog, notices } = if config.mcp_servers.is_empty() {
        source.build(None)
    } else {
        let state = quiver_host::paths::require_state_dir().map_err(fail)?;
        let executor = quiver_host::executor(config, launcher()?, &state, None).map_err(fail)?;
        source.build(Some(&executor))
    };
    drop(loading);
    self::notices(&notices);
    Ok(catalog)
}

/// What a catalog loaded, for a start line: `N packages from ROOTS` (`--root`, else "the
/// configured roots"), and each root the scan stopped in (`root-too-many-folders`), so a cut
/// catalog is said where people look, not only by `quiver lint`.
pub fn loaded(catalog: &Catalog, roots: &[PathBuf]) -> String {
    let count = catalog.packages().len();
    let mut text = format!("{count} package{}", if count == 1 { "" } else { "s" });
    if !roots.is_empty() {
        let shown: Vec<String> = roots.iter().map(|p| p.display().to_string()).collect();
        text.push_str(&format!(" from {}", shown.join(", ")));
    }
    let cut: Vec<String> = catalog
        .diagnostics()
        .iter()
        .filter(|d| d.code == "root-too-many-folders")
        .map(|d| format!("`{}`", d.file.display()))
        .collect();
    if !cut.is_empty() {
        text.push_str(&format!(
            ", NOT ALL LOADED: the scan stopped after {} folders in {}",
            quiver_catalog::scan::MAX_FOLDERS,
            cut.join(", ")
        ));
    }
    crate::shown(&text).into_owned()
}
