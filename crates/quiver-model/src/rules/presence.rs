//! What the conversation may reach, is offered and may find (DESIGN.md §3 "Presence"), and
//! what a direct call, `load_tool` and `tool_search` load.

use std::collections::BTreeSet;

use super::Session;
use crate::world::{Restrict, Target, World};

impl Session {
    /// What the active skills that hold for this sender unlock now.
    fn unlocked(&self, world: &World) -> BTreeSet<Target> {
        self.active
            .iter()
            .filter(|id| self.holds(world, id))
            .flat_map(|id| Self::unlocks(world, id))
            .collect()
    }

    /// Whether an item is admitted for this turn's sender and origin.
    pub(super) fn admitted(&self, world: &World, target: &Target) -> bool {
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
            // A script is run by `run_skill_script`, never called by a name.
            Target::Script(_) => false,
        }
    }

    /// Whether `target` is private to its package (a skill's own tool is the skill's to unlock:
    /// not private once reachable).
    pub fn private(world: &World, target: &Target) -> bool {
        match target {
            Target::Tool(..) => world.tool(target).is_some_and(|t| !t.expose),
            Target::Scoped(..) | Target::Script(_) => false,
            Target::Agent(..) | Target::Workflow(..) => world.exposed_item(target) == Some(false),
        }
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
                    Target::Script(_) => false,
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
                Target::Scoped(..) | Target::Script(_) => false,
                Target::Agent(..) | Target::Workflow(..) => {
                    world.exposed_item(target) == Some(true)
                }
            }
    }

    /// Loads a directly called item: an exposed one brings its whole package; a hidden tool
    /// named exactly, a skill's own tool or a private one takes a slot alone.
    pub(super) fn load(&mut self, world: &World, target: &Target) {
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
}
