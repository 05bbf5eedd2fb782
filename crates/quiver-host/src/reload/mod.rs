//! The catalog reload: one thread rebuilds the catalog and swaps it into the runtime when
//! - the project or user roots change on disk ([`watch`]: the system's events, or polling,
//!   gathered through a quiet window): only the packages the changed paths touch are parsed
//!   again (`cache`), and a package whose edit does not load keeps its last good version;
//! - `quiver reload` asks ([`request`]): every package is parsed again;
//! - an external MCP server says its tool list changed (`notifications/tools/list_changed`):
//!   the servers are listed again, at most once a second.
//!
//! Turns already running keep the catalog they started with (a turn holds its snapshot); a
//! rebuild that fails (panics) swaps nothing. One rebuild runs at a time; news arriving during
//! one asks for one more. After each swap the listeners (`Reload::on_swap`) hear of it: the
//! MCP front tells its clients when the skills they see changed, and every process on the
//! store hears that this one reloaded ([`Runtime::announce_catalog`]: their schedulers look at
//! once).
//!
//! No cycle: the executor's callback and the watcher hold only the [`Signal`]; the reload
//! thread holds the runtime and the executor, and ends when its [`Reload`] is dropped.

pub mod bench;
pub(crate) mod cache;
mod paths;
mod quiet;
pub mod request;
pub mod watch;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quiver_catalog::{Catalog, Scope};
use quiver_mcp_client::ToolsChanged;
use quiver_package::{Diagnostic, Package};
use quiver_runtime::Runtime;
use quiver_runtime::sandboxed::SandboxExecutor;

use crate::host::{CatalogSource, Loaded};
use cache::{Dirty, PackageCache};

/// Rebuilds for an external server's news start at least this far apart.
const MIN_REBUILD_INTERVAL: Duration = Duration::from_secs(1);

/// Told the new catalog after each swap.
pub type OnSwap = Arc<dyn Fn(&Catalog) + Send + Sync>;

/// What is asked of the reload thread.
#[derive(Default)]
struct Pending {
    /// An external MCP server's tool list changed.
    servers: bool,
    /// Files that changed under the roots.
    files: Vec<PathBuf>,
    /// The reload stops.
    stop: bool,
}

/// What the executor's MCP clients and the watcher raise: a rebuild is wanted, or the reload
/// stops.
#[derive(Default)]
pub struct Signal {
    state: Mutex<Pending>,
    wake: Condvar,
    listeners: Mutex<Vec<OnSwap>>,
}

impl Signal {
    /// Asks for a rebuild with the external servers listed again. Called on an MCP client's
    /// session thread, so it never waits.
    pub fn servers_changed(&self) {
        self.lock().servers = true;
        self.wake.notify_one();
    }

    /// Asks for a rebuild of the packages these changed paths touch.
    pub fn files_changed(&self, paths: Vec<PathBuf>) {
        self.lock().files.extend(paths);
        self.wake.notify_one();
    }

    /// The callback an executor's MCP clients call when a server's tool list changed.
    pub fn callback(self: &Arc<Self>) -> ToolsChanged {
        let signal = Arc::clone(self);
        Arc::new(move || signal.servers_changed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout` for work; `None` when the reload stops.
    fn wait(&self, timeout: Duration) -> Option<Pending> {
        let mut state = self.lock();
        if !state.servers && state.files.is_empty() && !state.stop {
            state = self
                .wake
                .wait_timeout(state, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if state.stop {
            return None;
        }
        Some(std::mem::take(&mut *state))
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_one();
    }

    fn swapped(&self, catalog: &Catalog) {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for listener in listeners {
            listener(catalog);
        }
    }
}

/// The catalog builder the reload thread owns: the last good parse of every package, and the
/// external servers' packages as last listed.
pub(crate) struct Rebuilder {
    source: CatalogSource,
    cache: PackageCache,
    extra: (Vec<(Package, Scope)>, Vec<Diagnostic>),
}

impl Rebuilder {
    /// Parses every package of `source`, lists its external servers through `executor`, and
    /// builds the first catalog.
    pub(crate) fn start(
        source: CatalogSource,
        executor: Option<&SandboxExecutor>,
    ) -> (Rebuilder, Loaded) {
        let extra = source.discover(executor);
        let mut rebuilder = Rebuilder {
            source,
            cache: PackageCache::default(),
            extra,
        };
        let loaded = rebuilder.build(&Dirty::All);
        (rebuilder, loaded)
    }

    /// Builds a catalog with the packages `dirty` names parsed again; `None` when the build
    /// failed (it panicked), and then the cache starts afresh.
    pub(crate) fn rebuild(&mut self, dirty: &Dirty) -> Option<Loaded> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.build(dirty))) {
            Ok(loaded) => Some(loaded),
            Err(_) => {
                self.cache = PackageCache::default();
                None
            }
        }
    }

    fn build(&mut self, dirty: &Dirty) -> Loaded {
        let started = Instant::now();
        if matches!(dirty, Dirty::All) {
            // A full reload (`quiver reload`, which `quiver install` asks for) also picks up
            // the packages installed or removed since.
            self.source.refresh_installed();
        }
        let refreshed = self.cache.refresh(self.source.roots(), dirty);
        let mut packages = refreshed.packages;
        let mut diagnostics = refreshed.diagnostics;
        packages.extend(self.extra.0.iter().cloned());
        diagnostics.extend(self.extra.1.iter().cloned());
        let catalog = Catalog::build(packages, diagnostics, self.source.options());
        tracing::debug!(
            parsed = refreshed.parsed,
            packages = catalog.packages().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "catalog rebuilt"
        );
        self.source.loaded(catalog)
    }
}

/// The running reload; dropping it stops its thread.
pub struct Reload {
    pub(crate) signal: Arc<Signal>,
    /// The project and user roots, which the watcher watches.
    pub(crate) watched: Vec<PathBuf>,
    thread: Option<JoinHandle<()>>,
}

impl Reload {
    /// Starts the thread that rebuilds `runtime`'s catalog with `rebuilder` each time `signal`
    /// asks (listing the external servers again through `executor`), or a `quiver reload`
    /// over `state_dir` does.
    pub(crate) fn start(
        signal: Arc<Signal>,
        mut rebuilder: Rebuilder,
        runtime: Arc<Runtime>,
        executor: Arc<SandboxExecutor>,
        state_dir: &Path,
    ) -> std::io::Result<Reload> {
        let watched = rebuilder
            .source
            .roots()
            .iter()
            .filter(|r| r.scope != Scope::Installed)
            .map(|r| r.path.clone())
            .collect();
        let waiting = Arc::clone(&signal);
        let mut requests = request::Requests::new(state_dir);
        let instance = quiver_store::waiter::current()
            .unwrap_or_else(|| format!("pid-{}", std::process::id()));
        let thread = std::thread::Builder::new()
            .name("quiver-catalog-reload".into())
            .spawn(move || {
                while let Some(work) = waiting.wait(request::POLL) {
                    let asked = requests.poll();
                    let dirty = if asked.is_some() {
                        Dirty::All
                    } else if !work.files.is_empty() {
                        Dirty::Paths(work.files)
                    } else if work.servers {
                        Dirty::Nothing
                    } else {
                        continue;
                    };
                    let started = Instant::now();
                    if work.servers {
                        rebuilder.extra = rebuilder.source.discover(Some(&executor));
                    }
                    let Some(loaded) = rebuilder.rebuild(&dirty) else {
                        tracing::error!(
                            "rebuilding the catalog failed; the current catalog stays in use"
                        );
                        continue;
                    };
                    let catalog = Arc::new(loaded.catalog);
                    runtime.swap_catalog(catalog.clone());
                    if let Err(error) = runtime.announce_catalog(&instance) {
                        // Latency only: the others see it at their next poll.
                        tracing::debug!(%error, "could not announce the reloaded catalog");
                    }
                    tracing::info!(
                        packages = catalog.packages().len(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        servers = work.servers,
                        asked = asked.is_some(),
                        "the catalog was reloaded"
                    );
                    waiting.swapped(&catalog);
                    if let Some(token) = asked {
                        let errors = catalog.diagnostics().iter().filter(|d| d.is_error());
                        requests.answer(&token, catalog.packages().len(), errors.count());
                    }
                    if work.servers {
                        // A server that keeps announcing changes cannot keep Quiver rebuilding.
                        std::thread::sleep(MIN_REBUILD_INTERVAL.saturating_sub(started.elapsed()));
                    }
                }
            })?;
        Ok(Reload {
            signal,
            watched,
            thread: Some(thread),
        })
    }

    /// Calls `listener` with the new catalog after each swap.
    pub(crate) fn on_swap(&self, listener: OnSwap) {
        self.signal
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(listener);
    }
}

impl Drop for Reload {
    fn drop(&mut self) {
        self.signal.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
