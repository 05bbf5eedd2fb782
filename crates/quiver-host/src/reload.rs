//! The catalog reload: when an external MCP server says its tool list changed
//! (`notifications/tools/list_changed`), the catalog is built again and swapped into the
//! runtime: `tool_search` finds the new tools from the next turn on, and turns already running
//! keep the catalog they started with. One rebuild runs at a time, at most one a second; news
//! arriving during one asks for one more.
//!
//! No cycle: the executor's callback holds only the [`Signal`]; the reload thread holds the
//! runtime and the executor, and ends when its [`Reload`] is dropped.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quiver_mcp_client::ToolsChanged;
use quiver_runtime::Runtime;
use quiver_runtime::sandboxed::SandboxExecutor;

use crate::host::CatalogSource;

/// Rebuilds of the catalog start at least this far apart.
const MIN_REBUILD_INTERVAL: Duration = Duration::from_secs(1);

/// What the executor's MCP clients raise: a rebuild is wanted, or the reload stops.
#[derive(Default)]
pub struct Signal {
    /// (a rebuild is asked for, the reload stops)
    state: Mutex<(bool, bool)>,
    wake: Condvar,
}

impl Signal {
    /// Asks for a rebuild. Called on an MCP client's session thread, so it never waits.
    pub fn request(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0 = true;
        self.wake.notify_one();
    }

    /// The callback an executor's MCP clients call when a server's tool list changed.
    pub fn callback(self: &Arc<Self>) -> ToolsChanged {
        let signal = Arc::clone(self);
        Arc::new(move || signal.request())
    }

    /// Waits for a request; `false` when the reload stops.
    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !state.0 && !state.1 {
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.0 = false;
        !state.1
    }

    fn stop(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.wake.notify_one();
    }
}

/// The running reload; dropping it stops its thread.
pub struct Reload {
    pub(crate) signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Reload {
    /// Starts the thread that rebuilds `runtime`'s catalog from `source` (listing the
    /// external servers again through `executor`) each time `signal` asks.
    pub fn start(
        signal: Arc<Signal>,
        source: CatalogSource,
        runtime: Arc<Runtime>,
        executor: Arc<SandboxExecutor>,
    ) -> std::io::Result<Reload> {
        let waiting = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("quiver-catalog-reload".into())
            .spawn(move || {
                while waiting.wait() {
                    let started = Instant::now();
                    let loaded = source.build(Some(&executor));
                    runtime.swap_catalog(loaded.catalog);
                    tracing::info!("an MCP server's tool list changed; the catalog was rebuilt");
                    // A server that keeps announcing changes cannot keep Quiver rebuilding.
                    std::thread::sleep(MIN_REBUILD_INTERVAL.saturating_sub(started.elapsed()));
                }
            })?;
        Ok(Reload {
            signal,
            thread: Some(thread),
        })
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
