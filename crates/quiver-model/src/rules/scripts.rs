//! `run_skill_script(skill, script, args)` (DESIGN.md §3): a file under `scripts/` of a skill
//! that is active in the session and that this turn's sender may see, run as an `action` call
//! of the skill's package with the package's permissions. The control plane, the turn's
//! lockouts and `disallowed-tools`, the package's consent and the approval of an `on-risk`
//! action (which a skill of the same package may pre-approve with `allowed-tools:
//! run_skill_script`) apply as to any tool of that package. Anything else (no such skill, a
//! skill not active or not visible to this sender, a fork, a file that is not one of its
//! scripts, a path out of `scripts/`) runs nothing and asks nothing.

use super::{Questions, Session, Verdict, Why};
use crate::world::{Script, Target, World};

impl Session {
    /// `run_skill_script` of skill `id` and `script` by the conversation: its verdict
    /// ([`Verdict::Unknown`] for a call that names no script it may run), and the session's
    /// new state.
    pub fn run_script(&mut self, world: &World, id: &str, script: Script) -> Verdict {
        let verdict = self.decide_script(world, id, script);
        self.calls_since_read += 1;
        verdict
    }

    fn decide_script(&mut self, world: &World, id: &str, script: Script) -> Verdict {
        let Some((p, _, skill)) = world.skill(id) else {
            return Verdict::Unknown;
        };
        if !self.holds(world, id) || script != Script::Own || !skill.script {
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
