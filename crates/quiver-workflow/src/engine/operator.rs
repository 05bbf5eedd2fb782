//! What people do to runs: a person's answer to an approval, an operator's decision (cancel,
//! and retry, done or fail for a run in doubt). Each is one conditional commit, then the run is
//! driven on.

use quiver_store::workflow::{Run, RunStatus, WaitKind, WaitStatus};

use super::{Engine, Loaded};
use crate::decide::{self, Operator, WaitOutcome};
use crate::error::{Result, WorkflowError};

impl Engine<'_> {
    /// A person's answer to the approval a run waits on, then the run driven on. Refused when
    /// the run waits on no approval or it was answered already. Who may answer is the
    /// front's to check (the runtime's `RunOps::answer`).
    pub fn answer(&self, run_id: &str, approve: bool, by: &str, note: Option<&str>) -> Result<Run> {
        let loaded = self.load(run_id)?;
        let wait = loaded
            .waits
            .iter()
            .rfind(|w| w.kind == WaitKind::Approval && w.status == WaitStatus::Pending)
            .ok_or_else(|| WorkflowError::Refused(format!("run {run_id} waits on no approval")))?;
        self.answer_wait(run_id, wait.id, approve, by, note)
    }

    /// [`Engine::answer`] for the approval wait `wait_id` (the one the person was shown):
    /// refused when it is not a pending approval of the run or it was answered meanwhile.
    pub fn answer_wait(
        &self,
        run_id: &str,
        wait_id: i64,
        approve: bool,
        by: &str,
        note: Option<&str>,
    ) -> Result<Run> {
        let loaded = self.load(run_id)?;
        let wait = loaded
            .waits
            .iter()
            .find(|w| w.id == wait_id && w.kind == WaitKind::Approval)
            .ok_or_else(|| WorkflowError::Refused(format!("run {run_id} waits on no approval")))?;
        if wait.status != WaitStatus::Pending {
            return Err(WorkflowError::Refused(format!(
                "the approval of run {run_id} was answered already"
            )));
        }
        self.refuse_unmet(&loaded)?;
        let outcome = if approve {
            WaitOutcome::Approved { by: by.to_owned() }
        } else {
            WaitOutcome::Denied {
                by: by.to_owned(),
                note: note.map(str::to_owned),
            }
        };
        if !self.resolve(run_id, wait_id, &outcome)? {
            return Err(WorkflowError::Refused(format!(
                "the approval of run {run_id} was answered already"
            )));
        }
        self.drive(run_id)
    }

    /// An operator's decision (retry, done, fail a run in doubt; cancel any run that has not
    /// ended), then the run driven on.
    pub fn operate(&self, run_id: &str, op: &Operator, by: &str) -> Result<Run> {
        let loaded = self.load(run_id)?;
        self.operate_on(&loaded, op, by)
    }

    /// An operator's decision on a run in doubt (retry, done with an output, fail), then the
    /// run driven on; refused unless the run is `in_doubt`. The run is driven first, so a step
    /// whose process is known to be gone is found in doubt now rather than when its lease
    /// runs out.
    pub fn settle(&self, run_id: &str, op: &Operator, by: &str) -> Result<Run> {
        self.drive(run_id)?;
        let loaded = self.load(run_id)?;
        if loaded.run.status != RunStatus::InDoubt {
            return Err(WorkflowError::Refused(format!(
                "run {run_id} is {}, not in_doubt: retry, done and fail are for a step found started without a result",
                loaded.run.status
            )));
        }
        if !matches!(op, Operator::Fail(_)) {
            self.refuse_unmet(&loaded)?;
        }
        self.operate_on(&loaded, op, by)
    }

    /// Refuses what would drive `loaded` on where its pinned packages are not all loaded
    /// ([`crate::pins`]): the answer or decision is to be given where they are.
    fn refuse_unmet(&self, loaded: &Loaded) -> Result<()> {
        let unmet = self.unmet(loaded);
        if unmet.is_empty() {
            return Ok(());
        }
        Err(WorkflowError::Refused(format!(
            "{}: nothing was changed; answer it where that is loaded",
            crate::pins::describe(&loaded.run.id, &unmet)
        )))
    }

    fn operate_on(&self, loaded: &Loaded, op: &Operator, by: &str) -> Result<Run> {
        let run_id = &loaded.run.id;
        let view = loaded.view(self.clock.now_ms(), &self.owner, self.lease_ms);
        let advance = decide::operate(&view, op, by).ok_or_else(|| {
            WorkflowError::Refused(format!(
                "run {run_id} is {}; that does not apply",
                loaded.run.status
            ))
        })?;
        if !self.store.advance(&advance)? {
            return Err(WorkflowError::Refused(format!(
                "run {run_id} changed meanwhile; look again"
            )));
        }
        crate::crash::point("operator_committed");
        self.drive(run_id)
    }
}
