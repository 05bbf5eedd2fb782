//! `quiver install`, `update`, `uninstall`, `rollback` and `installed`: packages into and out
//! of the content-addressed store (see `quiver_install::store`). Before anything is committed
//! the package is shown: publisher, key fingerprints, source, digest, permissions in words,
//! exposed and dangerous tools, and on an update the permission diff. `--yes` answers the
//! install question, never an escalation: added permissions need `--accept-permissions` (or a
//! `y` typed at a terminal to that question itself).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use quiver_install::InstallError;
use quiver_install::lockfile::LockFile;
use quiver_install::store::{CommitOptions, Committed, Record, Staged, Store};
use quiver_install::trust::TrustStore;
use quiver_package::distribution::permission_diff::{PermissionChange, escalates};
use serde_json::json;

use super::install_sources;

/// Arguments of `quiver install` and `quiver update`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// A `.qpkg` file; a package folder (with `--allow-unsigned`); `git+URL@COMMIT` (a full
    /// commit id; with `--allow-unsigned`); or a `skills-lock.json` (its sources, each as one
    /// of these).
    pub source: String,
    /// Read SOURCE as `publisher/id[@version]` in this index: a folder `quiver index build`
    /// made, or the URL of a site serving one (`https://example.com/index`).
    #[arg(long, value_name = "DIR|URL")]
    pub index: Option<String>,
    /// From a git repository of several packages, only these (repeatable; default: all).
    #[arg(long = "skill", value_name = "NAME")]
    pub skills: Vec<String>,
    /// Refuse any package that is not exactly as `quiver.lock` records it.
    #[arg(long)]
    pub locked: bool,
    /// The lock file (default `quiver.lock` in the current folder). Updated after each install
    /// when it exists.
    #[arg(long, value_name = "PATH", default_value = "quiver.lock")]
    pub lockfile: PathBuf,
    /// Install a folder as it is, unsigned (marked unsigned everywhere).
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Answer the install question yes (never accepts added permissions).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Accept the permissions an update adds.
    #[arg(long)]
    pub accept_permissions: bool,
    /// Accept a version lower than the installed one.
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Install each package's `requirements.txt` from this folder of wheels only, never from
    /// the package index (offline installs).
    #[arg(long, value_name = "DIR", env = "QUIVER_WHEELS")]
    pub wheels: Option<PathBuf>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The package id.
    pub id: String,
    /// Also delete its versions from the store (and any store folder nothing names).
    #[arg(long)]
    pub purge: bool,
    /// The lock file the package is taken out of, when it exists.
    #[arg(long, value_name = "PATH", default_value = "quiver.lock")]
    pub lockfile: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The package id.
    pub id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver installed`.
#[derive(Debug, clap::Args)]
pub struct InstalledArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The state folder, or an error naming the variables to set.
pub fn state() -> miette::Result<PathBuf> {
    quiver_host::paths::require_state_dir().map_err(crate::roots::fail)
}

/// Reports a refusal: the diagnostics of a package that does not pass its check, then the
/// reason; exit 1 for a refusal, an error (exit 2) for an I/O failure.
pub fn install_failure(e: InstallError, json: bool) -> miette::Result<ExitCode> {
    match e {
        InstallError::Io { .. } | InstallError::Stream(_) | InstallError::State { .. } => {
            Err(miette::miette!("{e}"))
        }
        e => {
            if let InstallError::Check(diags) = &e {
                let base = std::env::current_dir().unwrap_or_default();
                crate::diagnostics::emit(diags, false, &base);
            }
            if json {
                let changes = match &e {
                    InstallError::Escalation(esc) => json!(esc.changes),
                    _ => json!(null),
                };
                crate::out(
                    &json!({"ok": false, "error": e.to_string(), "permission_changes": changes})
                        .to_string(),
                );
            }
            crate::err(&format!("error: {}", crate::shown(&e.to_string())));
            if matches!(e, InstallError::Escalation(_)) {
                crate::err("\nhint: `--accept-permissions` accepts them (`--yes` never does)");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Runs `quiver install` (`update`: the package must be installed already): every package
/// the source names, one after another; exit 1 at the first one refused.
pub fn install(args: InstallArgs, update: bool) -> miette::Result<ExitCode> {
    let state = state()?;
    let trust = TrustStore::load(&state).map_err(|e| miette::miette!("{e}"))?;
    let store = Store::new(&state);
    let lock = LockFile::read(&args.lockfile).map_err(|e| miette::miette!("{e}"))?;
    if args.locked && lock.is_none() {
        return install_failure(
            InstallError::Refused(format!(
                "`--locked` needs the lock file `{}`",
                args.lockfile.display()
            )),
            args.json,
        );
    }
    if let Some(wheels) = &args.wheels
        && !wheels.is_dir()
    {
        return install_failure(
            InstallError::Refused(format!(
                "`--wheels {}` is not a folder of wheels",
                wheels.display()
            )),
            args.json,
        );
    }
    let scratch = tempfile::tempdir().map_err(|e| miette::miette!("{e}"))?;
    let sources = match install_sources::sources(&args, scratch.path(), &trust, &state) {
        Ok(s) => s,
        Err(e) => return install_failure(e, args.json),
    };
    let lock = lock.unwrap_or_default();
    let mut results = Vec::new();
    for source in sources {
        let staged = match install_sources::stage(&store, &trust, &args, &source) {
            Ok(s) => s,
            Err(e) => return install_failure(e, args.json),
        };
        if args.locked
            && let Err(e) = lock.check(&staged.record)
        {
            return install_failure(e, args.json);
        }
        match commit_one(&store, &trust, staged, &args, update)? {
            Ok(result) => results.push(result),
            Err(code) => return Ok(code),
        }
    }
    if !results.is_empty() {
        tell_servers(&state);
    }
    if args.lockfile.exists() && !args.locked && !results.is_empty() {
        // Read again and written under the state lock: another install may have changed it.
        let _held = store.lock_state().map_err(|e| miette::miette!("{e}"))?;
        let mut fresh = LockFile::read(&args.lockfile)
            .map_err(|e| miette::miette!("{e}"))?
            .unwrap_or_default();
        for (_, record) in &results {
            fresh.record(record);
        }
        fresh
            .write(&args.lockfile)
            .map_err(|e| miette::miette!("{e}"))?;
    }
    if args.json {
        let v: Vec<_> = results
            .iter()
            .map(|(said, r)| json!({"outcome": said, "record": r}))
            .collect();
        crate::out(&json!({"ok": true, "installed": v}).to_string());
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows one staged package, asks, commits it; `Err(code)` when it was not installed.
fn commit_one(
    store: &Store,
    trust: &TrustStore,
    staged: Staged,
    args: &InstallArgs,
    update: bool,
) -> miette::Result<Result<(&'static str, Record), ExitCode>> {
    let pending = store
        .pending_changes(&staged)
        .map_err(|e| miette::miette!("{e}"))?;
    if update && pending.is_none() {
        let e = InstallError::Refused(format!(
            "`{}` is not installed; use `quiver install`",
            staged.record.id
        ));
        return install_failure(e, args.json).map(Err);
    }
    describe(&staged, trust);
    let mut accept_permissions = args.accept_permissions;
    if let Some((old, changes)) = &pending {
        crate::err(&format!("update from {} ({})", old.version, old.digest));
        print_changes(changes);
        if escalates(changes) && !accept_permissions && !args.json && interactive() {
            accept_permissions = ask("accept the added permissions?");
        }
    }
    let yes = args.yes || (interactive() && ask("install?"));
    if !yes {
        crate::err("not installed\n\nhint: pass `--yes` to install without the question");
        return Ok(Err(ExitCode::FAILURE));
    }
    let options = CommitOptions {
        accept_permissions,
        allow_downgrade: args.allow_downgrade,
        wheels: args
            .wheels
            .as_deref()
            .map(std::path::absolute)
            .transpose()
            .map_err(|e| miette::miette!("{e}"))?,
        fail_at: None,
    };
    let record = staged.record.clone();
    let outcome = match store.commit(staged, &options) {
        Ok(o) => o,
        Err(e) => return install_failure(e, args.json).map(Err),
    };
    let said = match &outcome {
        Committed::New => "installed",
        Committed::Updated { .. } => "updated",
        Committed::Unchanged => "already installed",
    };
    if !args.json {
        crate::out(&format!(
            "{said} {} {} ({})",
            record.id, record.version, record.digest
        ));
    }
    Ok(Ok((said, record)))
}

/// Everything the user should see before saying yes, on stderr.
fn describe(staged: &Staged, trust: &TrustStore) {
    if let Ok(state) = state() {
        for warning in quiver_install::summary::confusable_warnings(&Store::new(&state), staged) {
            crate::err(&warning);
        }
    }
    let lines: Vec<String> = quiver_install::summary::describe(staged, Some(trust))
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let indent = if i == 0 { "" } else { "  " };
            format!("{indent}{}", crate::shown(line))
        })
        .collect();
    crate::err(&lines.join("\n"));
    let base = std::env::current_dir().unwrap_or_default();
    crate::diagnostics::emit(&staged.diagnostics, false, &base);
}

/// The permission diff, one line per dimension, on stderr.
fn print_changes(changes: &[PermissionChange]) {
    if changes.is_empty() {
        crate::err("  permissions: unchanged");
    }
    for c in changes {
        for a in &c.added {
            crate::err(&format!("  + {}: {}", c.dimension, crate::shown(a)));
        }
        for r in &c.removed {
            crate::err(&format!("  - {}: {}", c.dimension, crate::shown(r)));
        }
    }
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

fn ask(question: &str) -> bool {
    crate::err(&format!("{question} [y/N]"));
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok() && matches!(answer.trim(), "y" | "Y" | "yes")
}

/// Runs `quiver uninstall`.
pub fn uninstall(args: UninstallArgs) -> miette::Result<ExitCode> {
    let state = state()?;
    let store = Store::new(&state);
    let v = match store.uninstall(&args.id, args.purge) {
        Ok(v) => v,
        Err(e) => return install_failure(e, args.json),
    };
    tell_servers(&state);
    let _held = store.lock_state().map_err(|e| miette::miette!("{e}"))?;
    if let Some(mut lock) = LockFile::read(&args.lockfile).map_err(|e| miette::miette!("{e}"))?
        && lock.packages.remove(&args.id).is_some()
    {
        lock.write(&args.lockfile)
            .map_err(|e| miette::miette!("{e}"))?;
    }
    done(
        args.json,
        &format!("uninstalled {} {}", v.current.id, v.current.version),
        json!({"ok": true, "removed": v.current}),
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver rollback`.
pub fn rollback(args: RollbackArgs) -> miette::Result<ExitCode> {
    let state = state()?;
    let store = Store::new(&state);
    match store.rollback(&args.id) {
        Ok(r) => {
            tell_servers(&state);
            done(
                args.json,
                &format!("{} is back at {} ({})", r.id, r.version, r.digest),
                json!({"ok": true, "record": r}),
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => install_failure(e, args.json),
    }
}

/// Runs `quiver installed`: each installed package, its version, digest and standing.
pub fn installed(args: InstalledArgs) -> miette::Result<ExitCode> {
    let state = state()?;
    let trust = TrustStore::load(&state).map_err(|e| miette::miette!("{e}"))?;
    let store = Store::new(&state);
    let roots = store.roots(&trust).map_err(|e| miette::miette!("{e}"))?;
    let rows: Vec<_> = roots
        .roots
        .iter()
        .map(|(_, r)| (r, if r.unsigned { "unsigned" } else { "signed" }))
        .chain(
            roots
                .disabled
                .iter()
                .map(|r| (r, "disabled: signed only by revoked keys")),
        )
        .collect();
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(r, s)| json!({"record": r, "standing": s}))
            .collect();
        crate::out(&serde_json::Value::Array(v).to_string());
    } else if rows.is_empty() {
        crate::err("nothing installed");
    } else {
        for (r, s) in rows {
            crate::out(&format!(
                "{}/{}\t{}\t{}\t{s}",
                r.publisher, r.id, r.version, r.digest
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks every running `quiver serve` over `state` to reload (the `quiver reload` request), so
/// it serves what is installed now; nobody need be listening.
pub fn tell_servers(state: &std::path::Path) {
    if let Err(e) = quiver_host::reload::request::ask(state) {
        tracing::warn!("cannot ask running servers to reload: {e}");
    }
}

fn done(json: bool, text: &str, value: serde_json::Value) {
    if json {
        crate::out(&value.to_string());
    } else {
        crate::out(text);
    }
}
