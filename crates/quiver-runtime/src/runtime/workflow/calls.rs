//! Calling an exposed workflow: after steps 1–5 of the pipeline (admission, the control plane,
//! hooks, audit), step 6 starts a run with the workflow engine over the store the front set
//! with [`Runtime::set_workflow_store`] and drives it until it ends or waits (an approval, a
//! timer, a question nobody can answer now): in the caller's thread, or, in a long-running
//! front ([`Runtime::drive_workflow_calls_in_background`]), in a thread of its own for at most
//! `workflow_call_wait`, after which the call returns and the thread drives on. The caller
//! reads the run's output when it ended, else `{run_id, status}`. An attended run's questions
//! go to the caller's person (an MCP client's elicitation, a chat's terminal).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};

use quiver_catalog::Catalog;
use quiver_package::Package;
use quiver_package::tool::Category;
use quiver_store::workflow::{Run, RunStatus};
use quiver_store::{AuditEntry, AuditStep, StoreError, WorkflowStore};
use quiver_workflow::{Definition, Engine, Start, WorkflowError};
use serde_json::{Map, Value, json};

use crate::approver::Approver;
use crate::runtime::call::Target;
use crate::runtime::call::audit::decision;
use crate::runtime::call::execute::Ran;
use crate::runtime::{CallOutcome, CallStatus, Runtime, RuntimeError, Turn, WorkflowSteps};

impl Runtime {
    /// Sets the store the workflow engine keeps its runs in (the same SQLite file as the
    /// runtime's store); without one, calling a workflow ends with a clear error. The first
    /// store set stays.
    pub fn set_workflow_store(&self, store: Arc<dyn WorkflowStore>) -> bool {
        // The engines' clock is the store's (PostgreSQL's, shared by every instance): its
        // offset is measured once here, and again at each heartbeat of `quiver serve`.
        if let Err(error) = quiver_workflow::STORE_CLOCK.sync(store.as_ref()) {
            tracing::warn!(%error, "cannot read the store's clock; the engines use this machine's");
        }
        self.workflow_store.set(store).is_ok()
    }

    /// The workflow engine's store, when a front set one.
    pub fn workflow_store(&self) -> Option<&Arc<dyn WorkflowStore>> {
        self.workflow_store.get()
    }

    /// Makes a call of a workflow drive its run in a thread of its own and wait for it at most
    /// `workflow_call_wait` (a long-running front, whose process outlives the call; a one-shot
    /// process drives the run in the caller's thread, since its exit would cut a step short).
    pub fn drive_workflow_calls_in_background(self: &Arc<Runtime>) -> bool {
        self.background.set(Arc::downgrade(self)).is_ok()
    }

    /// Drives run `id` for a caller with `steps` in its thread, or in a thread of its own for
    /// at most `workflow_call_wait` when the front asked for that; the run as it then stands.
    /// A run started by another run's step (`nested`) is driven in that step's thread, and at
    /// most [`MAX_RUN_THREADS`] runs have threads of their own at once: beyond them a run is
    /// driven in its caller's thread.
    fn drive_for_caller(
        &self,
        engine: &Engine<'_>,
        id: &str,
        person: Option<Arc<dyn Approver>>,
        nested: bool,
    ) -> Result<Run, WorkflowError> {
        let background = self.background.get().and_then(Weak::upgrade);
        let (Some(runtime), false) = (background, nested) else {
            return engine.drive(id);
        };
        let Some(slot) = RunThread::take() else {
            return engine.drive(id);
        };
        let (sent, received) = mpsc::channel();
        let run_id = id.to_owned();
        // Once the caller stops waiting, nobody is there to answer: a question parks the run.
        let waiting = Arc::new(AtomicBool::new(true));
        let waited = waiting.clone();
        let spawned = std::thread::Builder::new()
            .name("quiver-run".into())
            .spawn(move || {
                let _slot = slot;
                let steps = WorkflowSteps::new(&runtime).with_person(person, Some(waited));
                let driven = runtime
                    .workflow_engine(&steps)
                    .map(|engine| engine.drive(&run_id));
                if let Some(driven) = driven {
                    // The caller may have stopped waiting: the run is stored either way.
                    let _ = sent.send(driven);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a thread for run {id} ({e}): it runs in the caller's");
            return engine.drive(id);
        }
        match received.recv_timeout(self.config.workflow_call_wait) {
            Ok(driven) => driven,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                waiting.store(false, Ordering::Release);
                let stored = match self.workflow_store.get() {
                    Some(store) => store.run(id)?,
                    None => None,
                };
                stored.ok_or_else(|| WorkflowError::NoRun(id.to_owned()))
            }
        }
    }
}

/// Most runs driven in threads of their own at once (a long-running front's calls).
pub const MAX_RUN_THREADS: usize = 16;

/// Most levels of runs started by other runs' steps: a call of a workflow from a step of a
/// run `MAX_RUN_DEPTH` deep is refused.
pub const MAX_RUN_DEPTH: u64 = 8;

static RUN_THREADS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_RUN_THREADS`] places of a run driven in a thread of its own, given back
/// when dropped.
struct RunThread;

impl RunThread {
    fn take() -> Option<RunThread> {
        RUN_THREADS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_RUN_THREADS).then_some(n + 1)
            })
            .ok()
            .map(|_| RunThread)
    }
}

impl Drop for RunThread {
    fn drop(&mut self) {
        RUN_THREADS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Runtime {
    /// How a run of a workflow of `package` starts for `sender` (every front builds its
    /// [`Start`] here): whose authority its steps run with, who started it, and the package's
    /// non-secret settings its templates may read. `trigger` is what started it (JSON:
    /// `{"kind": "manual"}`, a call, a fire, an event, a delivery); `key` an explicit
    /// idempotency key.
    pub fn run_start(
        &self,
        package: &str,
        sender: &quiver_policy::Principal,
        input: Value,
        trigger: Value,
        attended: bool,
        key: Option<String>,
    ) -> Start {
        Start {
            input,
            trigger,
            principal: serde_json::to_value(sender).unwrap_or_default(),
            started_by: sender
                .user_id
                .clone()
                .unwrap_or_else(|| "anonymous".to_owned()),
            attended,
            settings: self.public_settings(package),
            key,
        }
    }

    /// The package's configured settings without its secret ones: what templates may read.
    fn public_settings(&self, package: &str) -> Value {
        let catalog = self.catalog();
        let secret = catalog
            .package(package)
            .map(|p| p.package.manifest.secret_settings())
            .unwrap_or_default();
        let settings: Map<String, Value> = self
            .config
            .settings
            .get(package)
            .map(|all| {
                all.iter()
                    .filter(|(k, _)| !secret.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Value::Object(settings)
    }

    /// The definition a run of the workflow `qualified` (`pkg.workflow`) of the current
    /// catalog pins, if there is one.
    pub fn workflow_definition(&self, qualified: &str) -> Option<Definition> {
        let catalog = self.catalog();
        let (package, name) = qualified.split_once('.')?;
        let package = &catalog
            .packages()
            .iter()
            .find(|p| !p.shadowed && p.package.id.as_str() == package)?
            .package;
        let workflow = package.workflows.iter().find(|w| w.name.as_str() == name)?;
        Some(definition_in(&catalog, package, workflow))
    }
}

/// The definition of `workflow` of `package`, the catalog telling whether another package's
/// tool is re-run safe, with the content digests of the packages its steps run as this
/// catalog has them pinned (a new run runs what this instance has loaded).
fn definition_in(
    catalog: &Catalog,
    package: &Package,
    workflow: &quiver_package::workflow::Workflow,
) -> Definition {
    let rerun_safe = |qualified: &str| {
        let tool = catalog.tool(catalog.item(qualified)?)?;
        Some(tool.idempotent || matches!(tool.category, Category::Perception | Category::Decision))
    };
    Definition::new(package, workflow, &rerun_safe).pinned(&|id| package_digest(catalog, id))
}

/// The content digest of the package `id` as `catalog` has loaded it, if it has.
pub(in crate::runtime) fn package_digest(catalog: &Catalog, id: &str) -> Option<String> {
    catalog
        .package(id)
        .and_then(|p| p.content_digest())
        .map(str::to_owned)
}

impl Turn<'_> {
    /// Starts a run of the workflow `target` with `arguments` as its input and drives it:
    /// its output if it ended, `{run_id, status}` if it waits, or what the caller reads
    /// instead (an input that does not fit, a failed run).
    pub(in crate::runtime) fn start_workflow(
        &self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Result<Ran, CallOutcome>, RuntimeError> {
        let error = |status, message: String| {
            Ok(Err(CallOutcome::new(
                call_id,
                status,
                json!({"error": message}),
            )))
        };
        let person = if self.unattended {
            None
        } else {
            self.person().cloned()
        };
        let steps = WorkflowSteps::new(self.runtime).with_person(person.clone(), None);
        let (Some(engine), Some(workflow)) = (
            self.runtime.workflow_engine(&steps),
            target
                .package
                .workflows
                .iter()
                .find(|w| w.name.as_str() == target.facts.name),
        ) else {
            return error(
                CallStatus::Error,
                format!("`{}` cannot run here: no workflow engine", target.asked_as),
            );
        };
        let depth = self.run_depth()?;
        if depth > MAX_RUN_DEPTH {
            return error(
                CallStatus::Refused,
                format!(
                    "`{}` is not started: runs started by other runs' steps nest at most {MAX_RUN_DEPTH} deep (do workflows call each other?); do not retry",
                    target.asked_as
                ),
            );
        }
        let definition = definition_in(&self.catalog, target.package, workflow);
        let start = self.runtime.run_start(
            target.package.id.as_str(),
            &self.sender,
            arguments.clone(),
            json!({"kind": "call", "session": self.session, "call_id": call_id, "depth": depth}),
            !self.unattended,
            None,
        );
        self.record_started(audit, crate::runtime::call::audit::Phase::Running)?;
        let started = engine
            .pin(&definition)
            .and_then(|digest| engine.start(&digest, &start));
        let nested = self.step.is_some();
        let driven = started.and_then(|(run, _)| {
            self.runtime
                .drive_for_caller(&engine, &run.id, person, nested)
        });
        let run = match driven {
            Ok(run) => run,
            Err(WorkflowError::Refused(why)) => return error(CallStatus::Invalid, why),
            Err(WorkflowError::Store(StoreError::Full(why))) => {
                return error(CallStatus::Refused, format!("{why}; do not retry"));
            }
            Err(e) => return error(CallStatus::Error, e.to_string()),
        };
        audit.decisions.push(decision(
            AuditStep::Execute,
            "workflow",
            &format!("run {} is {}", run.id, run.status.as_str()),
        ));
        audit.detail = Some(json!({"run_id": run.id}));
        let value = match run.status {
            RunStatus::Completed => run.output.unwrap_or(Value::Null),
            RunStatus::Failed | RunStatus::Cancelled => {
                return error(
                    CallStatus::Error,
                    format!(
                        "run {} {}: {}",
                        run.id,
                        run.status.as_str(),
                        run.error.unwrap_or_default()
                    ),
                );
            }
            status => json!({"run_id": run.id, "status": status.as_str()}),
        };
        Ok(Ok(Ran {
            value,
            cached: false,
            cache_key: None,
        }))
    }
}

impl Turn<'_> {
    /// How deep a run this turn starts would be: 0 for a conversation's call, one more than
    /// its run for a run's step.
    fn run_depth(&self) -> Result<u64, RuntimeError> {
        let (Some(step), Some(store)) = (&self.step, self.runtime.workflow_store()) else {
            return Ok(0);
        };
        let parent = store
            .run(&step.run_id)?
            .and_then(|run| run.trigger.get("depth").and_then(Value::as_u64))
            .unwrap_or(0);
        Ok(parent + 1)
    }
}
