//! Workflow runs as the rules see them (DESIGN.md §4 "Runs and their people",
//! docs/workflows.md "Steps as calls"). Each tool or agent step is a call by the run's package
//! in the run's own session, for the run's principal, at no platform or scope: the package's
//! own items (private ones too) without consent, another package's exposed items with that
//! package's consent for the run's session, another package's private items and any skill's
//! own tool (no skill is active in a run) unknown, so the run fails. The emergency stop refuses
//! a step. An approval step waits for a person. A step whose call needs a person's answer asks
//! the person waiting on the run when one is there and may answer it; otherwise the run
//! **parks** (`waiting`), never fails. A person's yes to a parked call runs it with its
//! questions answered (its package's consent recorded for the run's session); a no fails the
//! run. Pure: no I/O.

use std::collections::BTreeSet;

use crate::rules::{Session, Why};
use crate::world::{Approval, Category, Restrict, Role, Step, Target, World};
use crate::write::written_steps;

/// Who is there to answer a run's questions while it is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// The person waiting on the run (a chat's terminal, an MCP client's elicitation), and how
    /// they answer.
    Person {
        /// Consent questions.
        consent_yes: bool,
        /// Approval questions.
        approval_yes: bool,
    },
    /// Nobody: a run started by a trigger, or driven on in another process after a person's
    /// answer.
    Nobody,
}

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A step named something the run may not reach.
    Unknown,
    /// A step was refused.
    Refused(Why),
    /// A person answered no to what the run waited on.
    Rejected,
}

/// What a waiting run waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// An approval step.
    Approval,
    /// A step's call whose question needs a person; `person_only`: only a named person may
    /// answer it (dangerous, `human`).
    Call {
        /// Whether only a named person may answer.
        person_only: bool,
    },
}

/// Where a run stands once driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Parked on a person.
    Waiting(Parked),
    /// Every step ran.
    Completed,
    /// It ended without its output.
    Failed(Failure),
}

/// One run of a workflow.
#[derive(Debug, Clone)]
pub struct Run {
    /// The workflow's package: the caller of its steps.
    pub package: usize,
    /// Its steps as written.
    pub steps: Vec<Step>,
    /// The step it is at (the step count once completed).
    pub at: usize,
    /// Where it stands.
    pub status: Status,
    /// The role of the principal its steps run for.
    pub starter: Role,
    /// Packages consented to in the run's session.
    consent: BTreeSet<usize>,
    /// `once` tools approved in the run's session.
    once: BTreeSet<Target>,
    /// Whether a person said yes to the parked call of the current step.
    approved: bool,
}

impl Run {
    /// Starts a run of workflow `w` of package `p` for a principal of role `starter` and drives
    /// it with `presence`; `None` when there is no such workflow.
    pub fn start(
        world: &World,
        (p, w): (usize, usize),
        starter: Role,
        presence: Presence,
        stopped: bool,
    ) -> Option<Run> {
        let workflow = world.packages.get(p)?.workflows.get(w)?;
        let mut run = Run {
            package: p,
            steps: written_steps(world, p, workflow),
            at: 0,
            status: Status::Completed,
            starter,
            consent: BTreeSet::new(),
            once: BTreeSet::new(),
            approved: false,
        };
        run.drive(world, presence, stopped);
        Some(run)
    }

    /// A named person's answer to what the run waits on, given elsewhere; then the run is
    /// driven on there, with nobody present. `false` when the run waits on nothing.
    pub fn answer(&mut self, world: &World, yes: bool, stopped: bool) -> bool {
        let Status::Waiting(parked) = self.status else {
            return false;
        };
        if !yes {
            self.status = Status::Failed(Failure::Rejected);
            return true;
        }
        match parked {
            Parked::Approval => self.at += 1,
            Parked::Call { .. } => self.approved = true,
        }
        self.drive(world, Presence::Nobody, stopped);
        true
    }

    /// Runs steps from the current one until the run ends or parks.
    fn drive(&mut self, world: &World, presence: Presence, stopped: bool) {
        while let Some(step) = self.steps.get(self.at).cloned() {
            let called = match &step {
                Step::Approval => Err(Status::Waiting(Parked::Approval)),
                Step::Tool(r) | Step::Agent(r) => {
                    let target = world.resolve(&r.qualified()).filter(|t| match step {
                        Step::Agent(_) => matches!(t, Target::Agent(..)),
                        _ => matches!(t, Target::Tool(..)),
                    });
                    self.call(world, target, presence, stopped)
                }
            };
            if let Err(status) = called {
                self.status = status;
                return;
            }
            self.approved = false;
            self.at += 1;
        }
        self.status = Status::Completed;
    }

    /// Whether the run's principal, at no platform or scope, is admitted to `restrict`.
    fn admits(&self, restrict: Restrict) -> bool {
        match restrict {
            Restrict::None => true,
            Restrict::Master => self.starter == Role::Master,
            Restrict::Group | Restrict::Qq => false,
        }
    }

    /// One step's call of `target` (`None`: nothing the step may name): `Ok` when it runs,
    /// else the status the run takes.
    fn call(
        &mut self,
        world: &World,
        target: Option<Target>,
        presence: Presence,
        stopped: bool,
    ) -> Result<(), Status> {
        let Some(target) = target else {
            return Err(Status::Failed(Failure::Unknown));
        };
        let own = target.package() == self.package;
        let tool = world.tool(&target);
        let admitted = tool.is_none_or(|t| self.admits(t.restrict));
        if !admitted || (!own && Session::private(world, &target)) {
            return Err(Status::Failed(Failure::Unknown));
        }
        if stopped {
            return Err(Status::Failed(Failure::Refused(Why::EmergencyStop)));
        }
        let consent = !own && !self.consent.contains(&target.package());
        let (approval, person_only) = tool.map_or((false, false), |t| {
            let by_mode = match t.approval {
                Approval::Never => false,
                Approval::OnRisk => t.category == Category::Action,
                Approval::Once => !self.once.contains(&target),
                Approval::Always | Approval::Human => true,
            };
            (
                t.dangerous || by_mode,
                t.dangerous || t.approval == Approval::Human,
            )
        });
        if !consent && !approval {
            return Ok(());
        }
        let once = tool.is_some_and(|t| t.approval == Approval::Once);
        // A person's yes to this very call answers its questions.
        let (consent_yes, approval_yes) = match presence {
            _ if self.approved => (true, true),
            // An anonymous principal answers no card only a named person may: nobody present
            // may answer it, so the run parks for someone who may.
            Presence::Person { .. } if person_only && self.starter == Role::Anonymous => {
                return Err(Status::Waiting(Parked::Call { person_only }));
            }
            Presence::Person {
                consent_yes,
                approval_yes,
            } => (consent_yes, approval_yes),
            Presence::Nobody => return Err(Status::Waiting(Parked::Call { person_only })),
        };
        if consent {
            if !consent_yes {
                return Err(Status::Failed(Failure::Refused(Why::Declined)));
            }
            self.consent.insert(target.package());
        }
        if approval {
            if !approval_yes {
                return Err(Status::Failed(Failure::Refused(Why::Declined)));
            }
            if once {
                self.once.insert(target);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
