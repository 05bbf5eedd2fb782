//! Skills as the rules see them: what reading one does (activates it and opens its package,
//! or, with `context: fork`, runs its agent as a call), and what an active skill unlocks.

use std::collections::BTreeSet;

use super::{Questions, Session, Verdict, Why};
use crate::grants::Turns;
use crate::world::{Target, World};

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
    /// What skill `id` unlocks when read: its own tools named in `tools:` (all of them without
    /// one) and its package's exposed items named there. Names of anything else are left out.
    pub fn unlocks(world: &World, id: &str) -> BTreeSet<Target> {
        let Some((p, s, skill)) = world.skill(id) else {
            return BTreeSet::new();
        };
        let Some(names) = &skill.tools else {
            return Self::own_tools(p, s, skill.scoped.len()).collect();
        };
        names
            .iter()
            .filter_map(|name| Self::unlock(world, p, s, name))
            .collect()
    }

    /// The own tools of skill `s` (none for the root skill) with `count` of them.
    fn own_tools(p: usize, s: Option<usize>, count: usize) -> impl Iterator<Item = Target> {
        s.into_iter()
            .flat_map(move |s| (0..count).map(move |k| Target::Scoped(p, s, k)))
    }

    /// What the name `name` in `tools:` of skill `s` of package `p` unlocks, if it may.
    fn unlock(world: &World, p: usize, s: Option<usize>, name: &str) -> Option<Target> {
        let qualified = if name.contains('.') {
            name.to_owned()
        } else {
            format!("p{p}.{name}")
        };
        let target = world.resolve(&qualified)?;
        let ok = match &target {
            Target::Scoped(q, t, _) => *q == p && Some(*t) == s,
            Target::Tool(q, _) => {
                *q == p && world.tool(&target).is_some_and(|t| t.expose && !t.hidden)
            }
            Target::Agent(q, _) | Target::Workflow(q, _) => {
                *q == p && world.exposed_item(&target) == Some(true)
            }
            Target::Script(_) => false,
        };
        ok.then_some(target)
    }

    /// Whether `quiver install` takes package `p`: its declaration check refuses a package
    /// where a skill's `tools:` names anything [`Session::unlocks`] leaves out.
    pub fn installable(world: &World, p: usize) -> bool {
        let Some(package) = world.packages.get(p) else {
            return false;
        };
        let root = package.root_skill.iter().map(|skill| (None, skill));
        let skills = package.skills.iter().enumerate().map(|(s, k)| (Some(s), k));
        root.chain(skills).all(|(s, skill)| {
            skill
                .tools
                .iter()
                .flatten()
                .all(|name| Self::unlock(world, p, s, name).is_some())
        })
    }

    /// `world` with every name in a skill's `tools:` that it may not unlock left out (what a
    /// publisher fixes before `quiver install` takes the package): it unlocks the same.
    pub fn tidied(world: &World) -> World {
        let mut tidy = world.clone();
        for (p, package) in tidy.packages.iter_mut().enumerate() {
            let root = package.root_skill.iter_mut().map(|skill| (None, skill));
            let skills = package
                .skills
                .iter_mut()
                .enumerate()
                .map(|(s, k)| (Some(s), k));
            for (s, skill) in root.chain(skills) {
                if let Some(names) = &mut skill.tools {
                    names.retain(|name| Self::unlock(world, p, s, name).is_some());
                }
            }
        }
        tidy
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
        if agent.package() != p {
            // Exactly the conversation's direct call of that agent: unknown when private, the
            // turn's lockouts and `disallowed-tools`, loading its package, the stop, consent.
            return self.decide(world, agent);
        }
        // The fork is a call of the agent through the pipeline: the stop's refusal locks it
        // for the rest of the turn, as a call's or a script's does.
        if self.forks_locked.contains(agent) {
            return Verdict::Refused(Why::Locked, Questions::default());
        }
        if self.stopped {
            self.forks_locked.insert(agent.clone());
            return Verdict::Refused(Why::EmergencyStop, Questions::default());
        }
        Verdict::Runs(Questions::default())
    }
}

/// The index of agent `a{i}`.
fn agent_index(name: &str) -> usize {
    name.strip_prefix('a')
        .and_then(|i| i.parse().ok())
        .unwrap_or(usize::MAX)
}
