//! What a long-running front needs to start runs with nobody present: the workflows of the
//! catalog that a schedule or an event starts (pinned, as the scheduler watches them), the
//! principal they run with, the engine owner id of this process, and a waker the front's
//! scheduler hears when a run was started here that it should drive (a webhook delivery).

use std::collections::BTreeSet;
use std::sync::Arc;

use quiver_package::rules::Role;
use quiver_policy::Principal;
use quiver_workflow::scheduler::Watched;
use quiver_workflow::{Engine, Start};
use serde_json::json;

use crate::runtime::Runtime;

/// Told the id of a run started in this process that someone should drive now.
pub type RunWaker = Arc<dyn Fn(&str) + Send + Sync>;

/// The user id unattended runs of schedules and events run as (role `trusted`): it can ask
/// nobody, so whatever needs a person parks the run; it never approves anything.
pub const SCHEDULER_USER: &str = "scheduler";

impl Runtime {
    /// Sets the owner id under which this process's workflow engines take leases (one live
    /// process per id: the host holds a lock for it), so that a restart recovers the
    /// attempts of the process that held the id before at once. The first one set stays.
    pub fn set_workflow_owner(&self, owner: String) -> bool {
        self.workflow_owner.set(owner).is_ok()
    }

    /// An engine over the workflow store with this process's owner id (when one was set),
    /// running its steps with `steps`; `None` when no front set a workflow store.
    pub fn workflow_engine<'a>(
        &'a self,
        steps: &'a dyn quiver_workflow::StepRunner,
    ) -> Option<Engine<'a>> {
        let store = self.workflow_store.get()?;
        let engine = Engine::new(store.as_ref(), steps, &quiver_workflow::STORE_CLOCK);
        Some(match self.workflow_owner.get() {
            Some(owner) => engine.with_owner(owner.clone()),
            None => engine,
        })
    }

    /// Sets who hears of runs started in this process that should be driven now (the
    /// front's scheduler). The first one set stays.
    pub fn set_run_waker(&self, waker: RunWaker) -> bool {
        self.run_waker.set(waker).is_ok()
    }

    /// Tells the waker, if any, that run `id` should be driven; `false` when nobody hears.
    pub(crate) fn wake_run(&self, id: &str) -> bool {
        self.run_waker.get().map(|wake| wake(id)).is_some()
    }

    /// The principal unattended runs of schedules and events run with.
    pub fn scheduler_principal() -> Principal {
        Principal::user(SCHEDULER_USER, Role::Trusted)
    }

    /// The ids of the catalog's packages (an event from one of them is another package's).
    pub fn package_ids(&self) -> BTreeSet<String> {
        self.catalog()
            .packages()
            .iter()
            .filter(|p| !p.shadowed)
            .map(|p| p.package.id.to_string())
            .collect()
    }

    /// Every workflow of the catalog that a schedule or an event starts, pinned with `engine`,
    /// as the scheduler watches it: its package's `events` subscriptions, and unattended runs
    /// for [`Runtime::scheduler_principal`] with the package's non-secret settings. What
    /// cannot be watched (a schedule that does not compile, a store error) is a problem line.
    pub fn watched_workflows(&self, engine: &Engine<'_>) -> (Vec<Watched>, Vec<String>) {
        let catalog = self.catalog();
        let principal = Runtime::scheduler_principal();
        let mut watched = Vec::new();
        let mut problems = Vec::new();
        for entry in catalog.packages().iter().filter(|p| !p.shadowed) {
            let package = &entry.package;
            for workflow in &package.workflows {
                let qualified = format!("{}.{}", package.id, workflow.name);
                let Some(def) = self.workflow_definition(&qualified) else {
                    continue;
                };
                let start: Start = self.run_start(
                    package.id.as_str(),
                    &principal,
                    json!({}),
                    json!({}),
                    false,
                    None,
                );
                match Watched::new(engine, &def, &package.manifest.events, start) {
                    Ok(Some(w)) => watched.push(w),
                    Ok(None) => {}
                    Err(e) => problems.push(format!("{qualified}: {e}")),
                }
            }
        }
        (watched, problems)
    }
}
