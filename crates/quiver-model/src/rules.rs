//! The rules of DESIGN.md §3–§4 as a small state machine: what a caller is offered, what a
//! call of anything gets (unknown, refused and why, the questions it asks, whether it runs),
//! and how long each grant lasts. Pure: no I/O, no clock.
//!
//! The model states the rules as the design says they are, not as the runtime happens to do
//! them: where the two differ, the generated tests report it.

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
    /// The operator's emergency stop.
    pub stopped: bool,
    /// How the person answers consent questions.
    pub consent_yes: bool,
    /// How the person answers approval questions.
    pub approval_yes: bool,
}

/// What reading a skill does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// "no such skill" (missing, not admitted): nothing changes.
    NoSuchSkill,
    /// The package opened (a package without a skill).
    Opened,
    /// The skill is active and its package opened; `tools` are the package's exposed items,
    /// `unlocked` what the skill unlocks: every one of them callable now.
    Activated {
        /// The package's exposed items (root tools and agents, admitted).
        tools: BTreeSet<Target>,
        /// What the skill unlocks.
        unlocked: BTreeSet<Target>,
    },
    /// A `context: fork` skill: its agent runs (or not) as a call on the conversation's behalf.
    Fork(Verdict),
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
        }
    }

    /// A new request of a client that marks no turns: a lockout lasts one request (the front
    /// cannot tell turns apart; lockouts are not grants, so this only narrows less).
    pub fn next_request(&mut self) {
        if self.turns == Turns::Unmarked {
            self.locked.clear();
            self.member_locked = false;
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

    /// What skill `id` unlocks when read: its own tools named in `tools:` (all of them without
    /// one) and its package's exposed items named there. Names of anything else are left out.
    pub fn unlocks(world: &World, id: &str) -> BTreeSet<Target> {
        let Some((p, s, skill)) = world.skill(id) else {
            return BTreeSet::new();
        };
        let own: Vec<Target> = match s {
            Some(s) => (0..skill.scoped.len())
                .map(|k| Target::Scoped(p, s, k))
                .collect(),
            None => Vec::new(),
        };
        let Some(names) = &skill.tools else {
            return own.into_iter().collect();
        };
        let mut out = BTreeSet::new();
        for name in names {
            let qualified = if name.contains('.') {
                name.clone()
            } else {
                format!("p{p}.{name}")
            };
            let Some(target) = world.resolve(&qualified) else {
                continue;
            };
            let ok = match &target {
                Target::Scoped(..) => own.contains(&target),
                Target::Tool(q, _) => {
                    *q == p && world.tool(&target).is_some_and(|t| t.expose && !t.hidden)
                }
                Target::Agent(q, _) | Target::Workflow(q, _) => {
                    *q == p && world.exposed_item(&target) == Some(true)
                }
            };
            if ok {
                out.insert(target);
            }
        }
        out
    }

    /// What the active skills that hold for this sender unlock now.
    fn unlocked(&self, world: &World) -> BTreeSet<Target> {
        self.active
            .iter()
            .filter(|id| self.holds(world, id))
            .flat_map(|id| Self::unlocks(world, id))
            .collect()
    }

    /// Whether an item is admitted for this turn's sender and origin.
    fn admitted(&self, world: &World, target: &Target) -> bool {
        match world.tool(target) {
            Some(tool) => self.admits(tool.restrict),
            None => world.exists(target),
        }
    }

    /// Whether a direct call by the conversation may name `target` (else "unknown tool"):
    /// an admitted exposed item, a root tool of an opened package, a skill's tool unlocked by
    /// an active skill, a hidden tool by its exact name.
    pub fn reaches(&self, world: &World, target: &Target) -> bool {
        if !self.admitted(world, target) {
            return false;
        }
        match target {
            Target::Tool(p, _) => world
                .tool(target)
                .is_some_and(|t| t.expose || t.hidden || self.opened.contains(p)),
            Target::Scoped(..) => self.unlocked(world).contains(target),
            Target::Agent(..) | Target::Workflow(..) => world.exposed_item(target) == Some(true),
        }
    }

    /// Whether `target` is private to its package (a skill's own tool is the skill's to unlock:
    /// not private once reachable).
    pub fn private(world: &World, target: &Target) -> bool {
        match target {
            Target::Tool(..) => world.tool(target).is_some_and(|t| !t.expose),
            Target::Scoped(..) => false,
            Target::Agent(..) | Target::Workflow(..) => world.exposed_item(target) == Some(false),
        }
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

    /// What the conversation is offered now, besides the meta-tools (hidden tools loaded by
    /// their exact name are left out: whether they are listed is not a rule of the design).
    pub fn offered(&self, world: &World) -> BTreeSet<Target> {
        let unlocked = self.unlocked(world);
        world
            .targets()
            .into_iter()
            .filter(|t| self.admitted(world, t))
            .filter(|t| {
                let p = t.package();
                let pinned = self.opened.contains(&p) || self.loaded.contains(&p);
                match t {
                    Target::Tool(..) => world.tool(t).is_some_and(|tool| {
                        tool.expose
                            && !tool.hidden
                            && (pinned || tool.restrict == Restrict::Qq || unlocked.contains(t))
                    }),
                    Target::Scoped(..) => unlocked.contains(t),
                    Target::Agent(..) | Target::Workflow(..) => {
                        world.exposed_item(t) == Some(true) && (pinned || unlocked.contains(t))
                    }
                }
            })
            .filter(|t| !self.disallowed(world, t))
            .collect()
    }

    /// Whether the conversation may call `target` now: reachable, not private, not removed.
    pub fn callable(&self, world: &World, target: &Target) -> bool {
        self.reaches(world, target)
            && !Self::private(world, target)
            && !self.disallowed(world, target)
            && !self.locked.contains(target)
    }

    /// What `tool_search` may find: admitted exposed items that are not hidden and not a
    /// skill's or an agent's own.
    pub fn searchable(&self, world: &World, target: &Target) -> bool {
        self.admitted(world, target)
            && match target {
                Target::Tool(..) => world.tool(target).is_some_and(|t| t.expose && !t.hidden),
                Target::Scoped(..) => false,
                Target::Agent(..) | Target::Workflow(..) => {
                    world.exposed_item(target) == Some(true)
                }
            }
    }

    /// The questions a call of `target` on the conversation's behalf asks (consent for a
    /// package the caller is not part of, then the approval).
    fn questions(&self, world: &World, target: &Target) -> Questions {
        let p = target.package();
        let consent = (self.consent.get(&p) != Some(&true)).then_some(p);
        let Some(tool) = world.tool(target) else {
            // An agent only reasons: consent only.
            return Questions {
                consent,
                ..Questions::default()
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

    /// Loads a directly called item: an exposed one brings its whole package; a hidden tool
    /// named exactly, a skill's own tool or a private one takes a slot alone.
    fn load(&mut self, world: &World, target: &Target) {
        if self.offered(world).contains(target) {
            return;
        }
        let hidden = world.tool(target).is_some_and(|t| t.hidden);
        match target {
            Target::Tool(p, _) | Target::Agent(p, _)
                if !Self::private(world, target) && !hidden =>
            {
                self.loaded.insert(*p);
            }
            _ => {
                self.loaded_alone.insert(target.clone());
            }
        }
    }

    /// `load_tool(name)`: loads what the conversation may call (a private item is not its
    /// to load); `false` for "unknown tool".
    pub fn load_tool(&mut self, world: &World, target: &Target) -> bool {
        self.calls_since_read += 1;
        if !world.exists(target) || !self.reaches(world, target) || Self::private(world, target) {
            return false;
        }
        self.load(world, target);
        true
    }

    /// `tool_search` found `targets`: each must be searchable; exposed ones load their package.
    pub fn found(&mut self, world: &World, targets: &[Target]) {
        self.calls_since_read += 1;
        for t in targets {
            if self.searchable(world, t) {
                self.loaded.insert(t.package());
            }
        }
    }

    /// `read_skill(id)` by the model.
    pub fn read_skill(&mut self, world: &World, id: &str) -> Read {
        self.calls_since_read += 1;
        let package: Option<usize> = id
            .split('/')
            .next()
            .and_then(|p| p.strip_prefix('p'))
            .and_then(|p| p.parse().ok())
            .filter(|p| *p < world.packages.len());
        let Some(p) = package else {
            return Read::NoSuchSkill;
        };
        let Some((_, _, skill)) = world.skill(id) else {
            if id == format!("p{p}") && world.packages[p].root_skill.is_none() {
                self.opened.insert(p);
                return Read::Opened;
            }
            return Read::NoSuchSkill;
        };
        if !self.admits(skill.restrict) {
            return Read::NoSuchSkill;
        }
        if let Some(agent) = skill.fork.clone() {
            return Read::Fork(self.fork(
                world,
                p,
                &Target::Agent(agent.package, agent_index(&agent.name)),
            ));
        }
        self.active.insert(id.to_owned());
        self.opened.insert(p);
        if self.turns == Turns::Unmarked && self.calls_since_read > 1 {
            // Without turn marks, only the skills read since the last other call widen.
            self.read_this_turn.clear();
        }
        self.read_this_turn.push(id.to_owned());
        self.calls_since_read = 0;
        let tools = world
            .targets()
            .into_iter()
            .filter(|t| t.package() == p && self.searchable(world, t))
            .collect();
        Read::Activated {
            tools,
            unlocked: Self::unlocks(world, id)
                .into_iter()
                .filter(|t| self.admitted(world, t))
                .collect(),
        }
    }

    /// A fork of a skill of package `p` into `agent`: its own package's agent runs as the
    /// package's own (no consent); another package's agent is that package's exposed item
    /// called on the conversation's behalf (unknown when private, consent when exposed).
    fn fork(&mut self, world: &World, p: usize, agent: &Target) -> Verdict {
        if world.agent(agent).is_none() {
            return Verdict::Unknown;
        }
        if agent.package() != p && Self::private(world, agent) {
            return Verdict::Unknown;
        }
        if self.stopped {
            return Verdict::Refused(Why::EmergencyStop, Questions::default());
        }
        if agent.package() == p {
            return Verdict::Runs(Questions::default());
        }
        let questions = self.questions(world, agent);
        self.answer(world, agent, questions)
    }
}

/// The index of agent `a{i}`.
fn agent_index(name: &str) -> usize {
    name.strip_prefix('a')
        .and_then(|i| i.parse().ok())
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;
