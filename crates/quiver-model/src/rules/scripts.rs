//! `run_skill_script(skill, script, args)` (DESIGN.md §3): a file under `scripts/` of a skill
//! that is active in the session and that this turn's sender may see, run as an `action` call
//! of the skill's package with the package's permissions. The control plane, the turn's
//! lockouts and `disallowed-tools`, the package's consent and the approval of an `on-risk`
//! action (which a skill of the same package may pre-approve with `allowed-tools:
//! run_skill_script`) apply as to any tool of that package. Anything else (no such skill, a
//! skill not active or not visible to this sender, a fork, a file that is not one of its
//! scripts, a path out of `scripts/`) runs nothing and asks nothing.
//!
//! A turn's catalog snapshot holds the skill (whether it exists, who may see it, its lists),
//! not the files of its folder: a script is the file on disk at the time of the call
//! (docs/runtime.md, "Hot reload"). In a turn begun before a reload, the skill's folder may
//! have been rewritten: a script removed since is no script (nothing runs, nothing is asked),
//! one added since is the skill's script.

use super::{Questions, Session, Verdict, Why};
use crate::world::{Script, Target, World};

impl Session {
    /// `run_skill_script` of skill `id` and `script` by the conversation: its verdict
    /// ([`Verdict::Unknown`] for a call that names no script it may run), and the session's
    /// new state.
    pub fn run_script(&mut self, world: &World, id: &str, script: Script) -> Verdict {
        self.run_script_on(world, world, id, script)
    }

    /// [`Session::run_script`] in a turn that holds the catalog `world` while the folders on
    /// disk are those of `disk` (a later version, swapped in by a reload during the turn).
    pub fn run_script_on(
        &mut self,
        world: &World,
        disk: &World,
        id: &str,
        script: Script,
    ) -> Verdict {
        let verdict = self.decide_script(world, disk, id, script);
        self.calls_since_read += 1;
        verdict
    }

    fn decide_script(&mut self, world: &World, disk: &World, id: &str, script: Script) -> Verdict {
        let Some((p, _, _)) = world.skill(id) else {
            return Verdict::Unknown;
        };
        // The file is looked for in the skill's folder as it is on disk now.
        let on_disk = disk.skill(id).is_some_and(|(_, _, skill)| skill.script);
        if !self.holds(world, id) || script != Script::Own || !on_disk {
            return Verdict::Unknown;
        }
        let target = Target::Script(p);
        let early = if self.locked.contains(&target) {
            Some(Why::Locked)
        } else if self.disallowed(world, &target) {
            Some(Why::Disallowed)
        } else if self.stopped {
            Some(Why::EmergencyStop)
        } else {
            None
        };
        if let Some(why) = early {
            self.lock(world, &target);
            return Verdict::Refused(why, Questions::default());
        }
        let questions = self.questions(world, &target);
        self.answer(world, &target, questions)
    }
}
