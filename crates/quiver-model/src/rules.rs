//! The rules of DESIGN.md §3–§4 as a small state machine: what a caller is offered, what a
//! call of anything gets (unknown, refused and why, the questions it asks, whether it runs),
//! and how long each grant lasts. Pure: no I/O, no clock.
//!
//! The model states the rules as the design says they are, not as the runtime happens to do
//! them: where the two differ, the generated tests report it.
//!
//! Here: the session, a call's questions and verdict. Beside it: `presence` (what the
//! conversation may reach, is offered and may find, and what loads), `skills` (reading a skill,
//! a fork, what a skill unlocks) and `scripts` (`run_skill_script`).

use std::collections::{BTreeMap, BTreeSet};

use crate::grants::Turns;
use crate::world::{Approval, Caller, Category, ListEntry, Restrict, Role, Skill, Target, World};

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A private item called from outside its package.
    Private,
    /// Refused earlier in this turn (the tool, or its risk category).
    Locked,
    /// An active skill's `disallowed-tools`.
    Disallowed,
    /// The operator's emergency stop.
    EmergencyStop,
    /// The user refused the package in this session.
    ConsentRefused,
    /// A question was answered no.
    Declined,
    /// A question needs a person and none can answer (unattended, or an anonymous sender for
    /// a card only a named person may answer).
    NoPerson,
}

/// The questions a call asks before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Questions {
    /// Package consent, for this package.
    pub consent: Option<usize>,
    /// An approval of this call.
    pub approval: bool,
    /// Only a person may answer the approval (dangerous, `human`).
    pub person_only: bool,
}

impl Questions {
    /// Whether anything is asked.
    pub fn any(&self) -> bool {
        self.consent.is_some() || self.approval
    }
}

/// The model's answer for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// "unknown tool", with no hint that it exists.
    Unknown,
    /// Refused, after asking `asked` (a refusal by an answer asks first).
    Refused(Why, Questions),
    /// Runs, after asking `asked`.
    Runs(Questions),
}

impl Verdict {
    /// Whether it runs.
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Runs(_))
    }

    /// The questions asked.
    pub fn asked(&self) -> Questions {
        match *self {
            Verdict::Unknown => Questions::default(),
            Verdict::Refused(_, q) | Verdict::Runs(q) => q,
        }
    }
}

/// One conversation's state, as the rules see it.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who talks, and from where.
    pub caller: Caller,
    /// Whether turns are marked.
    pub turns: Turns,
    /// Packages opened (`read_skill`): their exposed items are pinned.
    pub opened: BTreeSet<usize>,
    /// Packages loaded whole (a direct call, `load_tool`, `tool_search` of an exposed item).
    pub loaded: BTreeSet<usize>,
    /// Items loaded alone (a hidden tool by its exact name, a skill's own tool).
    pub loaded_alone: BTreeSet<Target>,
    /// Active skills (ids).
    pub active: BTreeSet<String>,
    /// Package consent answered, per package: granted or refused, for the session.
    pub consent: BTreeMap<usize, bool>,
    /// `once` tools approved in this session.
    pub once: BTreeSet<Target>,
    /// Skills read in this turn: their lists apply to it.
    pub read_this_turn: Vec<String>,
    /// Calls made since the last skill read (for [`crate::grants::Lifetime::NextCall`]).
    pub calls_since_read: usize,
    /// Tools refused in this turn.
    pub locked: BTreeSet<Target>,
    /// Whether a dangerous tool (category `member`) was refused in this turn.
    pub member_locked: bool,
    /// A package's own agents whose fork the stop refused in this turn: the runtime records
    /// that refusal's lockout, and a later fork into them in the turn is refused.
    pub forks_locked: BTreeSet<Target>,
    /// The operator's emergency stop.
    pub stopped: bool,
    /// How the person answers consent questions.
    pub consent_yes: bool,
    /// How the person answers approval questions.
    pub approval_yes: bool,
}

impl Session {
    /// A new session for `caller`; the person answers yes until told otherwise.
    pub fn new(caller: Caller, turns: Turns) -> Session {
        Session {
            caller,
            turns,
            opened: BTreeSet::new(),
            loaded: BTreeSet::new(),
            loaded_alone: BTreeSet::new(),
            active: BTreeSet::new(),
            consent: BTreeMap::new(),
            once: BTreeSet::new(),
            read_this_turn: Vec::new(),
            calls_since_read: 0,
            locked: BTreeSet::new(),
            member_locked: false,
            forks_locked: BTreeSet::new(),
            stopped: false,
            consent_yes: true,
            approval_yes: true,
        }
    }

    /// A new turn: turn-scoped grants and restrictions end (with unmarked turns, the
    /// front cannot tell: restrictions stay, and widenings already end with the next call).
    pub fn new_turn(&mut self) {
        if self.turns == Turns::Marked {
            self.read_this_turn.clear();
            self.locked.clear();
            self.member_locked = false;
            self.forks_locked.clear();
        }
    }

    /// A new request of a client that marks no turns: a lockout lasts one request (the front
    /// cannot tell turns apart; lockouts are not grants, so this only narrows less).
    pub fn next_request(&mut self) {
        if self.turns == Turns::Unmarked {
            self.locked.clear();
            self.member_locked = false;
            self.forks_locked.clear();
        }
    }

    /// Whether the caller meets a restriction.
    pub fn admits(&self, restrict: Restrict) -> bool {
        match restrict {
            Restrict::None => true,
            Restrict::Master => self.caller.role == Role::Master,
            Restrict::Group | Restrict::Qq => self.caller.in_qq_group,
        }
    }

    /// Whether the active skill `id` has effect for this sender.
    fn holds(&self, world: &World, id: &str) -> bool {
        self.active.contains(id)
            && world
                .skill(id)
                .is_some_and(|(_, _, s)| self.admits(s.restrict))
    }

    /// Whether an entry of a skill's list names `target`.
    fn matches(entry: &ListEntry, target: &Target) -> bool {
        match entry {
            ListEntry::Bare(name) => *name == target.local(),
            ListEntry::Qualified(r) => r.qualified() == target.qualified(),
        }
    }

    /// The skills whose lists apply now: read in this turn, or (unmarked turns) for
    /// restrictions, every active skill.
    fn skills_in_force<'w>(&self, world: &'w World, restriction: bool) -> Vec<(usize, &'w Skill)> {
        let ids: Vec<&String> = match (self.turns, restriction) {
            (Turns::Marked, _) => self.read_this_turn.iter().collect(),
            (Turns::Unmarked, true) => self.active.iter().collect(),
            (Turns::Unmarked, false) if self.calls_since_read == 0 => {
                self.read_this_turn.iter().collect()
            }
            (Turns::Unmarked, false) => Vec::new(),
        };
        ids.into_iter()
            .filter(|id| self.holds(world, id))
            .filter_map(|id| world.skill(id).map(|(p, _, s)| (p, s)))
            .collect()
    }

    /// Whether an active skill's `disallowed-tools` removes `target` now.
    pub fn disallowed(&self, world: &World, target: &Target) -> bool {
        self.skills_in_force(world, true)
            .iter()
            .any(|(_, s)| s.disallowed.iter().any(|e| Self::matches(e, target)))
    }

    /// Whether a skill of `target`'s own package pre-approves it now (`allowed-tools`).
    pub fn preapproved(&self, world: &World, target: &Target) -> bool {
        self.skills_in_force(world, false).iter().any(|(p, s)| {
            *p == target.package() && s.allowed.iter().any(|e| Self::matches(e, target))
        })
    }

    /// The questions a call of `target` on the conversation's behalf asks (consent for a
    /// package the caller is not part of, then the approval).
    fn questions(&self, world: &World, target: &Target) -> Questions {
        let p = target.package();
        let consent = (self.consent.get(&p) != Some(&true)).then_some(p);
        let Some(tool) = world.tool(target) else {
            // An agent only reasons: consent only. A skill script is an `action` of its
            // package: `on-risk`, with no permission beyond the package's (generated packages
            // declare none, so nothing open-ended), so confirmed unless pre-approved.
            let script = matches!(target, Target::Script(_));
            return Questions {
                consent,
                approval: script && !self.preapproved(world, target),
                person_only: false,
            };
        };
        let person_only = tool.dangerous || tool.approval == Approval::Human;
        let by_mode = match tool.approval {
            Approval::Never => false,
            Approval::OnRisk => tool.category == Category::Action,
            Approval::Once => !self.once.contains(target),
            Approval::Always => true,
            Approval::Human => true,
        };
        let skipped = tool.approval != Approval::Human && self.preapproved(world, target);
        Questions {
            consent,
            approval: tool.dangerous || (by_mode && !skipped),
            person_only,
        }
    }

    /// Locks `target` for the rest of the turn after a policy refusal.
    fn lock(&mut self, world: &World, target: &Target) {
        self.locked.insert(target.clone());
        if world.tool(target).is_some_and(|t| t.dangerous) {
            self.member_locked = true;
        }
    }

    /// A direct call of `target` by the conversation: its verdict, and the session's new state.
    pub fn call(&mut self, world: &World, target: &Target) -> Verdict {
        let verdict = self.decide(world, target);
        self.calls_since_read += 1;
        verdict
    }

    fn decide(&mut self, world: &World, target: &Target) -> Verdict {
        if !world.exists(target) || !self.reaches(world, target) {
            return Verdict::Unknown;
        }
        let dangerous = world.tool(target).is_some_and(|t| t.dangerous);
        let early = if Self::private(world, target) {
            Some(Why::Private)
        } else if self.locked.contains(target) || (dangerous && self.member_locked) {
            Some(Why::Locked)
        } else if self.disallowed(world, target) {
            Some(Why::Disallowed)
        } else {
            None
        };
        if let Some(why) = early {
            self.lock(world, target);
            return Verdict::Refused(why, Questions::default());
        }
        self.load(world, target);
        if self.stopped {
            self.lock(world, target);
            return Verdict::Refused(Why::EmergencyStop, Questions::default());
        }
        let questions = self.questions(world, target);
        self.answer(world, target, questions)
    }

    /// Asks `questions` (consent first, then the approval) and records the answers.
    fn answer(&mut self, world: &World, target: &Target, questions: Questions) -> Verdict {
        let p = target.package();
        if self.consent.get(&p) == Some(&false) {
            self.lock(world, target);
            return Verdict::Refused(Why::ConsentRefused, Questions::default());
        }
        let anonymous_card = questions.person_only && self.caller.role == Role::Anonymous;
        if questions.any() && (self.caller.unattended || anonymous_card) {
            self.lock(world, target);
            return Verdict::Refused(Why::NoPerson, Questions::default());
        }
        if questions.consent.is_some() {
            self.consent.insert(p, self.consent_yes);
            if !self.consent_yes {
                self.lock(world, target);
                let asked = Questions {
                    approval: false,
                    person_only: false,
                    ..questions
                };
                return Verdict::Refused(Why::Declined, asked);
            }
        }
        if questions.approval {
            if !self.approval_yes {
                self.lock(world, target);
                return Verdict::Refused(Why::Declined, questions);
            }
            let once = world
                .tool(target)
                .is_some_and(|t| t.approval == Approval::Once);
            if once && !self.preapproved(world, target) {
                self.once.insert(target.clone());
            }
        }
        Verdict::Runs(questions)
    }
}

pub use skills::Read;

mod presence;
mod scripts;
mod skills;
#[cfg(test)]
mod tests;
