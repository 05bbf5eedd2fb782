//! Step 2: visibility. The policy decides on the call as a whole (steps 2, 3 and 5 at once,
//! each check in its trace); this step asks it, with the call's presence (in the caller's
//! tool list, or only loadable) and its caller (the model, or the package's own agent, which
//! may call the package's private items without a consent question). A direct call of a
//! loadable item loads it into the session, least recently used evicted first.

use quiver_policy::{Approvers, CallRequest, Caller, Evaluation, Presence, evaluate_call};

use super::{Runs, Target};
use crate::runtime::{RuntimeError, Turn};

impl Turn<'_> {
    /// The policy's evaluation of `target` for this turn.
    pub(in crate::runtime) fn evaluate(&self, target: &Target<'_>) -> Evaluation {
        let control = self
            .runtime
            .control
            .read()
            .map_or_else(|e| *e.into_inner(), |c| *c);
        let person = !self.unattended && self.person().is_some();
        let caller = match &self.own_agent {
            // A workflow step calls as its run's package: that package's private tools are
            // its own (no consent question); every other package's are refused.
            _ if self.step.is_some() => {
                Caller::Workflow(self.step.as_ref().map_or("", |s| s.package.as_str()))
            }
            // The policy knows an agent by its package: its own package's private items are
            // its own, without a consent question.
            Some((package, _)) if package == target.facts.package => Caller::Agent(package),
            // A forked skill with an agent of its own package runs as that package: like
            // reading the skill, it asks no consent (each tool its run calls is governed on
            // its own), while the control plane, hooks and lockouts apply. A fork into another
            // package's agent is that agent called by the conversation (its package's
            // consent), so it falls through to the model.
            _ if matches!(&target.runs, Runs::ForkedSkill(skill)
                if skill.id.split('/').next() == Some(target.facts.package)) =>
            {
                Caller::Agent(target.facts.package)
            }
            _ => Caller::Model,
        };
        let mut request = CallRequest::new(
            target.facts,
            &self.origin,
            &self.sender,
            &self.grants,
            &self.state,
        );
        request.presence = if target.offered {
            Presence::Offered
        } else {
            Presence::Loadable
        };
        request.caller = caller;
        request.first_string_argument = target.first_string.as_deref();
        request.control = control;
        request.operator = &self.runtime.config.operator;
        request.unattended = self.unattended;
        request.approvers = match &self.step {
            // An unattended run asks nobody: every question parks the run for the console or
            // the CLI (`quiver approvals`), which is always there to answer it later.
            Some(_) if self.unattended => Approvers {
                person: false,
                console: true,
                model_reviewer: false,
            },
            _ => Approvers {
                person,
                console: self.runtime.approvers.console.is_some(),
                model_reviewer: self.runtime.approvers.reviewer.is_some(),
            },
        };
        evaluate_call(&request)
    }

    /// Loads a directly called item into the session, or keeps the loaded tools' order. A
    /// workflow step's session is its run's, with no model to offer tools to: nothing is
    /// loaded (a write fewer per step).
    pub(in crate::runtime) fn load_into_session(
        &self,
        target: &Target<'_>,
    ) -> Result<(), RuntimeError> {
        let Some(index) = target.item.filter(|_| self.step.is_none()) else {
            return Ok(());
        };
        if !target.offered {
            self.load_item(index)?;
        } else if target.touch {
            // A write only when the least-recently-used order changes.
            let slot = crate::presence::slot(&self.catalog, &self.catalog.items()[index]);
            self.runtime.store.touch_tool(&self.session, slot)?;
        }
        Ok(())
    }
}
