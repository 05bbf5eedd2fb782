//! [`Host::open`]: the one assembly of runtime, executor and catalog that `call`, `chat` and
//! `serve` share, from one [`Config`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_package::{Diagnostic, Package};
use quiver_runtime::executor::Executor;
use quiver_runtime::runtime::META_TOOLS;
use quiver_runtime::sandboxed::SandboxExecutor;
use quiver_runtime::{ApproverSet, Runtime, RuntimeConfig};
use quiver_sandbox::SandboxConfig;
use quiver_store::{PostgresStore, SqliteStore, StateStore};

use crate::HostError;
use crate::config::Config;
use crate::reload::watch::{WatchOptions, Watcher};
use crate::reload::{OnSwap, Rebuilder, Reload, Signal};
use crate::search::SearchModels;

/// How to build catalogs for an invocation: its roots, options (search models included) and
/// the config file's external MCP servers with their settings.
#[derive(Clone)]
pub struct CatalogSource {
    roots: Vec<Root>,
    options: CatalogOptions,
    config: Config,
    /// The state folder whose installed packages are among the roots (none with `--root`).
    installed_from: Option<PathBuf>,
}

/// A built catalog, and the lines a person should read about it (the external MCP servers'
/// problems, which name the config file, and a count of the packages' problems).
pub struct Loaded {
    /// The catalog.
    pub catalog: Catalog,
    /// Whole messages for stderr.
    pub notices: Vec<String>,
}

impl CatalogSource {
    /// The catalogs over `explicit` roots (`--root`), else the configured ones; `search` the
    /// models of hybrid search (`None`: BM25 alone).
    pub fn new(
        config: &Config,
        explicit: &[PathBuf],
        search: Option<&SearchModels>,
    ) -> Result<CatalogSource, HostError> {
        let (roots, mut options) = crate::paths::resolve_roots(explicit, config)?;
        options.semantic = search.and_then(|s| s.semantic.clone());
        Ok(CatalogSource {
            roots,
            options,
            config: config.clone(),
            installed_from: explicit.is_empty().then(crate::paths::state_dir).flatten(),
        })
    }

    /// Reads the installed packages' roots again (`quiver install`, `uninstall`, `rollback`
    /// and a revoked key change them), keeping every other root.
    pub(crate) fn refresh_installed(&mut self) {
        let Some(state) = &self.installed_from else {
            return;
        };
        let store = state.join("store");
        self.roots.retain(|r| !r.path.starts_with(&store));
        self.roots.extend(crate::paths::installed_roots(state));
    }

    /// The roots read.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// Builds the catalog; the config file's external MCP servers are discovered through
    /// `executor`, so a server started to list its tools stays up and answers the calls
    /// (without one they are left out).
    pub fn build(&self, executor: Option<&SandboxExecutor>) -> Loaded {
        let (extra, extra_diagnostics) = self.discover(executor);
        let started = std::time::Instant::now();
        let catalog = Catalog::load_with(&self.roots, extra, extra_diagnostics, &self.options);
        tracing::debug!(
            packages = catalog.packages().len(),
            roots = self.roots.len(),
            diagnostics = catalog.diagnostics().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "catalog loaded"
        );
        self.loaded(catalog)
    }

    /// The options catalogs are built with.
    pub(crate) fn options(&self) -> &CatalogOptions {
        &self.options
    }

    /// The config file's external MCP servers as packages, listed through `executor` (none
    /// without one), and their problems.
    pub(crate) fn discover(
        &self,
        executor: Option<&SandboxExecutor>,
    ) -> (Vec<(Package, Scope)>, Vec<Diagnostic>) {
        if let Some(executor) = executor
            && !self.config.mcp_servers.is_empty()
        {
            let (packages, diagnostics) =
                executor.discover_mcp_servers(&self.config.runtime.settings);
            let packages = packages.into_iter().map(|p| (p, Scope::User)).collect();
            (packages, diagnostics)
        } else {
            (Vec::new(), Vec::new())
        }
    }

    /// `catalog` with the lines a person should read about it.
    pub(crate) fn loaded(&self, catalog: Catalog) -> Loaded {
        let servers = &self.config.mcp_servers;
        let mut notices = Vec::new();
        let mut errors = 0;
        for d in catalog.diagnostics() {
            if !servers.is_empty() && d.file == servers.file {
                notices.push(d.to_string());
            } else if crate::notices::said_at_load(d) {
                notices.push(crate::notices::notice(d));
            } else if d.is_error() {
                errors += 1;
            }
        }
        notices.extend(quiver_runtime::presence::operator_always_loaded_problems(
            &catalog,
            &self.config.runtime.always_loaded,
        ));
        if errors > 0 {
            notices.push(format!(
                "warning: {errors} problem(s) kept some packages or items from loading; run `quiver lint` for details"
            ));
        }
        Loaded { catalog, notices }
    }
}

/// The sandbox configuration: `launcher` (this binary and its hidden launcher subcommand)
/// and data folders under the state folder. `runtime.allow_unsandboxed: true` (or
/// `QUIVER_ALLOW_UNSANDBOXED=1`) lets an operator run package tools without isolation where
/// the machine cannot enforce it. `limits.ceiling` is the most a tool may ask for.
pub fn sandbox_config(config: &Config, launcher: Vec<OsString>, state_dir: &Path) -> SandboxConfig {
    let mut sandbox = SandboxConfig::new(launcher, state_dir.to_owned());
    // The config file holds settings and tokens: no tool ever sees it, whatever it declares.
    sandbox.hidden.extend(config.path.clone());
    // So does the agent configuration, which holds the providers' keys.
    sandbox
        .hidden
        .extend(quiver_agent::AgentConfig::default_path());
    sandbox.allow_unsandboxed = config.runtime.allow_unsandboxed
        || std::env::var("QUIVER_ALLOW_UNSANDBOXED").is_ok_and(|v| v == "1");
    let ceiling = quiver_runtime::sandboxed::limit_request(&config.limits_ceiling);
    (sandbox.limits, sandbox.ceiling) = sandbox.limits.with_ceiling(&ceiling);
    sandbox
}

/// The executor for package tools: Quiver's sandbox with its data under `state_dir`, and the
/// config file's external MCP servers; `changed` hears when one of them says its tool list
/// changed.
pub fn executor(
    config: &Config,
    launcher: Vec<OsString>,
    state_dir: &Path,
    changed: Option<&Arc<Signal>>,
) -> Result<SandboxExecutor, HostError> {
    executor_with(config, sandbox_config(config, launcher, state_dir), changed)
}

/// The files the runtime keeps its state in beside the state database `db` (wherever it
/// lives, `--db` outside the state folder too): the database, its `-wal`, `-shm` and
/// `-journal`, the engine locks, the MCP front's secret and owner token. No tool sees them.
pub fn state_files(db: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["", "-wal", "-shm", "-journal", ".engines"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect();
    let beside = db.parent().unwrap_or_else(|| Path::new("."));
    files.push(beside.join(MCP_SECRET_FILE));
    files.push(beside.join(quiver_mcp::owner_token::TOKEN_FILE));
    files
}

fn executor_with(
    config: &Config,
    sandbox: SandboxConfig,
    changed: Option<&Arc<Signal>>,
) -> Result<SandboxExecutor, HostError> {
    let executor = SandboxExecutor::new(sandbox)
        .map_err(|e| HostError::Sandbox(e.to_string()))?
        .with_mcp_servers(Arc::new(config.mcp_servers.clone()));
    Ok(match changed {
        Some(signal) => executor.with_tools_changed(signal.callback()),
        None => executor,
    })
}

/// The meta-tools each agent is offered: the config file's `runtime.agents.<agent>.meta_tools`
/// where it sets them, else the ones the package agent declares among its tools.
pub fn agent_meta_tools(config: &mut RuntimeConfig, catalog: &Catalog) {
    for (agent, metas) in quiver_agent::agents::agent_meta_tools(catalog) {
        config.agent_meta_tools.entry(agent).or_insert(metas);
    }
}

/// The state of an invocation: Quiver's state folder (tools' data folders, external MCP
/// servers' caches) and the state database: an SQLite file (the default) or a PostgreSQL
/// database that several instances share.
#[derive(Clone)]
pub struct State {
    /// The state folder.
    pub dir: PathBuf,
    /// The SQLite database's file. With PostgreSQL, where this machine's files that sit beside
    /// a database go (the MCP secret, the workflow engines' owner locks): `state.db` in the
    /// state folder, never opened.
    pub path: PathBuf,
    /// The PostgreSQL database holding the state (host, port and name; never a password),
    /// `None` for SQLite.
    pub database: Option<String>,
    // The store over it: the runtime's (and the admin's) alone, never a front's.
    store: Arc<dyn StateStore>,
}

impl State {
    /// The state folder of this environment (see [`crate::paths::state_dir`]) with `db`,
    /// else its `state.db`.
    pub fn open(db: Option<&Path>) -> Result<State, HostError> {
        State::in_dir(&crate::paths::require_state_dir()?, db)
    }

    /// The state folder of this environment with the state in the PostgreSQL database at
    /// `url` (`postgres://user@host:port/db`), migrated to this build's schema.
    pub fn open_postgres(url: &str) -> Result<State, HostError> {
        let dir = crate::paths::require_state_dir()?;
        let store = PostgresStore::open(url).map_err(|e| HostError::State {
            path: PathBuf::from(redact(url)),
            why: e.to_string(),
        })?;
        Ok(State {
            path: dir.join("state.db"),
            dir,
            database: Some(store.target().to_owned()),
            store: Arc::new(store),
        })
    }

    /// Where the state is, for a person: the PostgreSQL database or the SQLite file.
    pub fn describe(&self) -> String {
        match &self.database {
            Some(database) => database.clone(),
            None => self.path.display().to_string(),
        }
    }

    /// The operator's door to this state ([`quiver_runtime::admin::Admin`]): fronts read and
    /// change state through it or through a runtime, never through the store.
    pub fn admin(&self) -> quiver_runtime::admin::Admin {
        quiver_runtime::admin::Admin::new(self.store.clone(), self.store.clone())
    }

    /// The console's queue over this state as an approver: a card waits there for a person
    /// (`quiver approvals`, the console) up to `wait`.
    pub fn console_approver(
        &self,
        wait: std::time::Duration,
    ) -> Arc<dyn quiver_runtime::approver::Approver> {
        Arc::new(quiver_runtime::approver::QueueApprover::new(
            self.store.clone(),
            wait,
        ))
    }

    /// The state folder `dir` with `db`, else `dir/state.db`.
    pub fn in_dir(dir: &Path, db: Option<&Path>) -> Result<State, HostError> {
        let path = db.map_or_else(|| dir.join("state.db"), Path::to_owned);
        let store = SqliteStore::open(&path).map_err(|e| HostError::State {
            path: path.clone(),
            why: e.to_string(),
        })?;
        Ok(State {
            dir: dir.to_owned(),
            path,
            database: None,
            store: Arc::new(store),
        })
    }
}

/// A connection URL without its password (`postgres://user:secret@h/db` → `postgres://user@h/db`).
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// What [`Host::open`] builds.
pub struct HostOptions {
    /// `--root`: only these roots when given.
    pub roots: Vec<PathBuf>,
    /// The state database, opened.
    pub state: State,
    /// The models of hybrid search (`None`: BM25 alone).
    pub search: Option<SearchModels>,
    /// Who answers approvals.
    pub approvers: ApproverSet,
    /// The sandbox launcher: this binary and its hidden subcommand.
    pub launcher: Vec<OsString>,
    /// Rebuild the catalog when an external MCP server's tool list changes or `quiver reload`
    /// asks (long-running commands); [`Host::watch_roots`] adds the roots' changes.
    pub reload: bool,
}

/// The application of one invocation: runtime, executor and catalog over one config.
pub struct Host {
    config: Config,
    runtime: Arc<Runtime>,
    // The sandbox: it runs the tools, or (with a given executor) only lists the config's
    // external MCP servers; `None` when a given executor runs the tools and no server is set.
    sandbox: Option<Arc<SandboxExecutor>>,
    db: PathBuf,
    // The operator's door to the same state, for the console.
    admin: quiver_runtime::admin::Admin,
    // The state is in a database other machines' instances share (PostgreSQL).
    shared: bool,
    notices: Vec<String>,
    agent_meta_tools: HashMap<String, Vec<String>>,
    // Dropped first: it only raises the reload's signal.
    watcher: Option<Watcher>,
    // Dropping it stops the rebuild thread, which holds the runtime and the executor.
    _reload: Option<Reload>,
}

impl Host {
    /// Builds the runtime, its sandbox executor and its catalog from `config`.
    pub fn open(config: Config, options: HostOptions) -> Result<Host, HostError> {
        Host::assemble(config, options, None)
    }

    /// Builds the host with `tools` running the package tools instead of the sandbox: a dry
    /// run (`quiver eval`, `quiver inspect --cost`) or tools in-process (`quiver bench mcp`).
    /// The sandbox is started only to list the config's external MCP servers, and nothing
    /// reloads.
    pub fn open_with_executor(
        config: Config,
        mut options: HostOptions,
        tools: Arc<dyn Executor>,
    ) -> Result<Host, HostError> {
        options.reload = false;
        Host::assemble(config, options, Some(tools))
    }

    fn assemble(
        config: Config,
        options: HostOptions,
        tools: Option<Arc<dyn Executor>>,
    ) -> Result<Host, HostError> {
        let source = CatalogSource::new(&config, &options.roots, options.search.as_ref())?;
        let signal = options.reload.then(|| Arc::new(Signal::default()));
        let sandbox = || -> Result<Arc<SandboxExecutor>, HostError> {
            let mut sandbox = sandbox_config(&config, options.launcher.clone(), &options.state.dir);
            // The state database may live outside the state folder (`--db`): it and every
            // file beside it that holds state stay out of every tool's view.
            sandbox.hidden.extend(state_files(&options.state.path));
            Ok(Arc::new(executor_with(&config, sandbox, signal.as_ref())?))
        };
        let (sandbox, runs_tools): (_, Arc<dyn Executor>) = match tools {
            None => {
                let sandbox = sandbox()?;
                (Some(sandbox.clone()), sandbox)
            }
            Some(tools) if config.mcp_servers.is_empty() => (None, tools),
            Some(tools) => (Some(sandbox()?), tools),
        };
        let (rebuilder, loaded) = match &signal {
            Some(_) => {
                let (rebuilder, loaded) = Rebuilder::start(source, sandbox.as_deref());
                (Some(rebuilder), loaded)
            }
            None => (None, source.build(sandbox.as_deref())),
        };
        let State {
            path: db,
            store,
            database,
            dir: state_dir,
        } = options.state;
        let mut runtime_config = config.runtime.clone();
        agent_meta_tools(&mut runtime_config, &loaded.catalog);
        let agent_meta_tools = runtime_config.agent_meta_tools.clone();
        let workflows: Arc<dyn quiver_store::WorkflowStore> = store.clone();
        let admin = quiver_runtime::admin::Admin::new(store.clone(), workflows.clone());
        let runtime = Arc::new(Runtime::new(
            loaded.catalog,
            store as Arc<dyn quiver_store::Store>,
            runs_tools,
            options.approvers,
            runtime_config,
        ));
        // Workflow runs live in the same file: calling a workflow starts one.
        runtime.set_workflow_store(workflows);
        // A call a killed or crashed process left running is closed as `interrupted`.
        match runtime.close_interrupted_calls() {
            Ok(closed) if !closed.is_empty() => {
                tracing::warn!(calls = ?closed, "calls left running by a process that ended were recorded as interrupted");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not close the calls of ended processes"),
        }
        let reload = match (signal, rebuilder, &sandbox) {
            (Some(signal), Some(rebuilder), Some(sandbox)) => Some(
                Reload::start(
                    signal,
                    rebuilder,
                    runtime.clone(),
                    sandbox.clone(),
                    &state_dir,
                )
                .map_err(|e| HostError::Sandbox(format!("starting the catalog reload: {e}")))?,
            ),
            _ => None,
        };
        Ok(Host {
            config,
            runtime,
            sandbox,
            db,
            admin,
            shared: database.is_some(),
            notices: loaded.notices,
            agent_meta_tools,
            watcher: None,
            _reload: reload,
        })
    }

    /// Watches the project and user roots and reloads the packages an edit touches (see
    /// `docs/runtime.md`, "Hot reload"); the host must have been opened with
    /// [`HostOptions::reload`]. Does nothing the second time.
    pub fn watch_roots(&mut self, options: WatchOptions) -> Result<(), HostError> {
        let Some(reload) = &self._reload else {
            return Err(HostError::Reload(
                "this host was opened without its reload".into(),
            ));
        };
        if self.watcher.is_none() {
            let watcher = Watcher::start(reload.watched.clone(), options, reload.signal.clone())
                .map_err(|e| HostError::Reload(format!("starting the watcher: {e}")))?;
            self.watcher = Some(watcher);
        }
        Ok(())
    }

    /// Calls `listener` with the new catalog after each reload's swap (the MCP front tells
    /// its clients); `false` when this host has no reload.
    pub fn on_catalog_swap(&self, listener: OnSwap) -> bool {
        self._reload.as_ref().map(|r| r.on_swap(listener)).is_some()
    }

    /// The web console over this host's state and catalog (docs/console.md), whose queued
    /// calls wait `approval_wait`, signed into with a fresh random token by `owner` (the
    /// local owner, who answers workflow runs there): both.
    pub fn console(
        &self,
        approval_wait: std::time::Duration,
        owner: quiver_policy::Principal,
    ) -> Result<(quiver_console::Console, String), HostError> {
        let token = quiver_console::new_token().map_err(|e| HostError::Console(e.to_string()))?;
        let mut config = quiver_console::ConsoleConfig::new(token.clone(), approval_wait);
        config.owner = owner;
        // Authoring installs as `quiver install` does, then asks the serving processes
        // (this one among them) to reload.
        config.authoring = crate::paths::state_dir().map(|dir| quiver_console::Authoring {
            state_dir: dir.clone(),
            after_install: Arc::new(move || {
                if let Err(e) = crate::reload::request::ask(&dir) {
                    tracing::warn!("cannot ask running servers to reload: {e}");
                }
            }),
        });
        let console =
            quiver_console::Console::new(self.admin.clone(), Some(self.runtime.clone()), config);
        Ok((console, token))
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The sandbox executor (`None` for a host whose given executor runs the tools and
    /// which lists no external MCP server).
    pub fn sandbox(&self) -> Option<&Arc<SandboxExecutor>> {
        self.sandbox.as_ref()
    }

    /// The config this host was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The state database.
    pub fn db(&self) -> &Path {
        &self.db
    }

    /// What a person should read about the catalog built at start-up.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// The profile of the package agent `qualified`, its tools carrying exactly the
    /// meta-tools the runtime offers it (see [`agent_meta_tools`]).
    pub fn agent_profile(
        &self,
        qualified: &str,
    ) -> Result<quiver_agent::agents::AgentProfile, quiver_agent::AgentError> {
        let mut profile = quiver_agent::agents::profile(&self.runtime.catalog(), qualified)?;
        if let Some(metas) = self.agent_meta_tools.get(qualified) {
            profile.tools.retain(|t| !META_TOOLS.contains(&t.as_str()));
            profile.tools.extend(metas.iter().cloned());
        }
        Ok(profile)
    }

    /// Lets agents (a workflow's `agent` steps, exposed agents, forked skills) run on the
    /// models of the agent configuration (`QUIVER_AGENT_CONFIG`, else
    /// `~/.config/quiver/agent.yaml`, and the `QUIVER_*` provider variables). `Ok(false)` when
    /// no provider is configured: an agent step then ends with an error that says so. A front
    /// with a runner of its own (`quiver chat`) sets it instead.
    pub fn run_agents_with_configured_models(&self) -> Result<bool, quiver_agent::AgentError> {
        let config = quiver_agent::AgentConfig::load(None)?;
        if config.default_provider().is_err() {
            return Ok(false);
        }
        let providers = std::sync::Arc::new(quiver_agent::Providers::new(config));
        Ok(self
            .runtime
            .set_agent_runner(std::sync::Arc::new(quiver_agent::SubAgents::new(providers))))
    }

    /// Starts the workflow scheduler over this host's runtime and state database, with
    /// `workers` threads driving runs (see [`crate::scheduler`]), and makes calls of workflows
    /// wait for their runs at most `workflow_call_wait`
    /// ([`Runtime::drive_workflow_calls_in_background`]). It runs until stopped or dropped.
    pub fn start_scheduler(&self, workers: usize) -> Result<crate::Scheduler, HostError> {
        // This process outlives its calls: a call of a workflow waits for its run at most
        // `workflow_call_wait`, and the run goes on.
        self.runtime.drive_workflow_calls_in_background();
        crate::Scheduler::start(self.runtime.clone(), &self.db, self.shared, workers)
    }

    /// The secret that seals the MCP front's conversation handles and pending questions: 32
    /// random bytes kept beside the state database, so handles survive a restart.
    pub fn mcp_secret(&self) -> Result<Vec<u8>, HostError> {
        mcp_secret(&self.db)
    }
}

/// The file beside the state database that holds the MCP front's secret.
const MCP_SECRET_FILE: &str = "mcp-secret";

fn mcp_secret(state_db: &Path) -> Result<Vec<u8>, HostError> {
    let path = state_db
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(MCP_SECRET_FILE);
    if let Ok(bytes) = std::fs::read(&path)
        && bytes.len() >= 32
    {
        return Ok(bytes);
    }
    let fail = |why: String| HostError::Secret {
        path: path.clone(),
        why,
    };
    let mut bytes = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| fail(format!("cannot read /dev/urandom: {e}")))?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(&path)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|e| fail(e.to_string()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_is_shown_without_its_password() {
        let cases = [
            (
                "postgres://q:s3cret@db:5432/quiver",
                "postgres://q@db:5432/quiver",
            ),
            ("postgres://q@db/quiver", "postgres://q@db/quiver"),
            ("postgresql://db/quiver", "postgresql://db/quiver"),
            ("postgres://q:p@ss@db/quiver", "postgres://q@db/quiver"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    /// No state file is ever a skill file, wherever the state lies (a `--db` or a state
    /// folder inside a skill's folder): skill listings leave out every name this names.
    #[test]
    fn state_files_are_never_skill_files() {
        for file in state_files(Path::new("/anywhere/state.db")) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                quiver_package::skill_files::is_state_file(&name),
                "{name} would be served as a skill file"
            );
        }
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The reload rebuilds and swaps the catalog when the executor's servers raise the signal,
    /// and holds nothing that outlives the host: dropping it stops the thread and frees the
    /// runtime and the executor (no callback/`Weak` cycle).
    #[test]
    fn the_reload_swaps_the_catalog_and_ends_with_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let packages = dir.path().join("packages");
        write(
            &packages,
            "one/SKILL.md",
            "---\nname: one\ndescription: The first skill\n---\nBody.\n",
        );
        let host = Host::open(
            Config::default(),
            HostOptions {
                roots: vec![packages.clone()],
                state: State::in_dir(dir.path(), None).unwrap(),
                search: None,
                approvers: ApproverSet::default(),
                launcher: vec!["/nonexistent/quiver".into(), "sandbox-exec".into()],
                reload: true,
            },
        )
        .unwrap();
        let ids = |host: &Host| -> Vec<String> {
            host.runtime()
                .catalog()
                .packages()
                .iter()
                .map(|p| p.package.id.to_string())
                .collect()
        };
        assert_eq!(ids(&host), ["one"]);
        write(
            &packages,
            "two/SKILL.md",
            "---\nname: two\ndescription: The second skill\n---\nBody.\n",
        );
        host._reload.as_ref().unwrap().signal.servers_changed();
        let started = std::time::Instant::now();
        while ids(&host).len() < 2 {
            assert!(
                started.elapsed().as_secs() < 20,
                "the catalog was not rebuilt"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(ids(&host), ["one", "two"]);
        let runtime = Arc::downgrade(host.runtime());
        let executor = Arc::downgrade(host.sandbox().unwrap());
        drop(host);
        assert!(runtime.upgrade().is_none(), "the runtime outlived its host");
        assert!(
            executor.upgrade().is_none(),
            "the executor outlived its host"
        );
    }
}
