//! Quiver's workflow engine: runs `workflows/<name>.yaml` durably on the store.
//!
//! The parts, from the bottom:
//! - [`eval`]: conditions and `{{ ... }}` templates (parsed by the loader,
//!   `quiver_package::workflow::expr`) evaluated over a run's context;
//! - [`schedule`]: cron in a time zone (`croner`, `chrono-tz`), next fires, catch-up;
//! - [`backoff`]: the pause before a retry; [`clock`]: time behind a trait;
//! - [`Definition`]: what a run pins, by digest, with the content digests of the packages its
//!   steps run; [`pins`]: the gate that drives a run only where those are loaded;
//! - [`decide`]: the state machine as pure functions of the stored state;
//! - [`StepRunner`]: what the runtime implements to run tool and agent steps through its call
//!   pipeline;
//! - [`Engine`]: load → decide → commit started → call the runner → commit the result and the
//!   next step together, on any [`quiver_store::WorkflowStore`]; one thread of a process drives
//!   a run at a time; runs start from calls, schedule fires, events and webhook deliveries;
//!   people's answers and operators' decisions ([`Engine::answer_wait`], [`Engine::operate`],
//!   [`Engine::settle`]);
//! - [`parked`]: the runs parked on a person, for the approval queue;
//! - [`scheduler`]: one pass of a long-running front's scheduler (events fanned out, due fires
//!   started, waits woken, the next wake time), without threads or sleeping.
//!
//! ```no_run
//! use quiver_workflow::{Engine, Start, SystemClock, StepCall, StepOutcome, StepRunner};
//! # fn main() -> Result<(), quiver_workflow::WorkflowError> {
//! struct Echo;
//! impl StepRunner for Echo {
//!     fn run(&self, call: &StepCall) -> StepOutcome {
//!         StepOutcome::Output(call.arguments.clone())
//!     }
//! }
//! let store = quiver_store::SqliteStore::open("quiver.db")?;
//! let engine = Engine::new(&store, &Echo, &SystemClock);
//! # let digest = String::new();
//! let start = Start {
//!     input: serde_json::json!({}),
//!     trigger: serde_json::json!({"kind": "manual"}),
//!     principal: serde_json::json!({"user": "me"}),
//!     started_by: "me".into(),
//!     attended: true,
//!     settings: serde_json::json!({}),
//!     key: None,
//! };
//! let (run, _created) = engine.start(&digest, &start)?;
//! let run = engine.drive(&run.id)?;
//! println!("{}", run.status);
//! # Ok(())
//! # }
//! ```

pub mod backoff;
pub mod clock;
pub mod crash;
pub mod decide;
mod definition;
mod driving;
mod engine;
mod error;
pub mod eval;
pub mod lease;
mod parked;
pub mod pins;
mod runner;
pub mod schedule;
pub mod scheduler;
mod triggers;

pub use clock::{Clock, ManualClock, STORE_CLOCK, StoreClock, SystemClock};
pub use definition::{Definition, RerunSafe, StepMeta};
pub use engine::{Engine, MAX_ACTIVE_RUNS_PER_PACKAGE, Start};
pub use error::{Result, WorkflowError};
pub use parked::{Parked, Question, parked, parked_run};
pub use runner::{StepCall, StepOutcome, StepRunner, Target};

/// The id of a run's own session, where its steps' calls, cards and audit records live.
pub fn run_session_id(run_id: &str) -> String {
    format!("ses-{run_id}")
}
