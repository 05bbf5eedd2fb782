//! Skill scripts (`run_skill_script`) against the model ([`Session::run_script`]): the script
//! of a generated skill (`scripts/go.sh`), named right or wrong (a skill not active, one this
//! sender may not see, a fork, another package's skill, a missing file, a path out of
//! `scripts/`), run in process as the built-in `<package>.run_skill_script`. It must run only
//! where the rules say, after the questions they ask; what runs is checked with every other
//! run (its package's consent, nothing under the emergency stop).

use quiver_model::rules::{Session, Verdict};
use quiver_model::world::{SCRIPT_TOOL, Script, Target};
use quiver_runtime::approver::Question;
use quiver_runtime::{CallStatus, Turn};
use serde_json::{Value, json};

use super::check::Invariant;
use super::harness::Checker;

/// What a front saw of one `run_skill_script` call.
pub struct ScriptCall<'v> {
    /// Whether the script ran.
    pub ran: bool,
    /// The runtime's class of the outcome (`unknown`, `refused`, `ran`), where the front
    /// tells it.
    pub class: Option<&'static str>,
    /// The consent and approval questions asked, where the front tells them.
    pub cards: Option<(bool, bool)>,
    /// Whether an approval was asked.
    pub approval_asked: bool,
    /// What the caller read.
    pub said: &'v Value,
}

/// The arguments of a `run_skill_script` call.
pub fn script_arguments(id: &str, script: Script) -> Value {
    json!({"skill": id, "script": script.argument()})
}

impl Checker<'_> {
    /// `run_skill_script` through the runtime API.
    pub fn run_script_in_turn(&mut self, turn: &mut Turn<'_>, id: &str, script: Script) {
        let args = script_arguments(id, script);
        let before = self.model.clone();
        let out = turn.call(SCRIPT_TOOL, args.clone()).unwrap();
        self.check_audit(&out, None, &args, SCRIPT_TOOL);
        let cards = self.new_cards();
        let disk = self.disk.unwrap_or(self.world);
        let verdict = self.model.run_script_on(self.world, disk, id, script);
        self.sync_consents();
        let consent = cards.iter().any(|c| c.question == Question::Consent);
        let approval = cards.iter().any(|c| c.question == Question::Approval);
        let class = match out.status {
            CallStatus::Ok => "ran",
            CallStatus::Refused => "refused",
            _ => "unknown",
        };
        let seen = ScriptCall {
            ran: out.status == CallStatus::Ok,
            class: Some(class),
            cards: Some((consent, approval)),
            approval_asked: approval,
            said: &out.content,
        };
        self.compare_script(&before, (id, script), verdict, &seen);
    }

    /// Compares what a front did with a script call with the model's `verdict` (the session
    /// was `before` the call).
    pub fn compare_script(
        &mut self,
        before: &Session,
        (id, script): (&str, Script),
        verdict: Verdict,
        seen: &ScriptCall<'_>,
    ) {
        let what = format!("run_skill_script({id}, {})", script.argument());
        if seen.ran != verdict.runs() {
            let tag = match verdict {
                // Asked the approval that a skill's pre-approval covers, and declined.
                _ if !seen.ran && !verdict.asked().approval && seen.approval_asked => {
                    "preapproval-not-renewed"
                }
                _ if !seen.ran => "script-refused",
                Verdict::Unknown if script != Script::Own => "script-outside-its-skill-ran",
                Verdict::Unknown if !before.active.contains(id) => "script-of-inactive-skill-ran",
                _ => "script-ran-against-the-rules",
            };
            self.report(
                Invariant::VerdictIsModels,
                tag,
                format!(
                    "{what}: model {verdict:?}, runtime ran {} {}",
                    seen.ran, seen.said
                ),
            );
            return;
        }
        let model_class = match verdict {
            Verdict::Unknown => "unknown",
            Verdict::Refused(..) => "refused",
            Verdict::Runs(_) => "ran",
        };
        if seen.class.is_some_and(|c| c != model_class) {
            self.report(
                Invariant::VerdictIsModels,
                "script-verdict-differs",
                format!(
                    "{what}: model {verdict:?}, runtime {:?} {}",
                    seen.class, seen.said
                ),
            );
            return;
        }
        let asked = verdict.asked();
        if seen.ran && asked.approval && !seen.approval_asked {
            let package = id.split('/').next().unwrap_or(id);
            let p = package
                .trim_start_matches('p')
                .parse()
                .unwrap_or(usize::MAX);
            let tag = self.skipped_approval_tag(before, &Target::Script(p));
            self.report(
                Invariant::GrantWithinTurn,
                tag,
                format!("{what} ran without the approval the rules require"),
            );
        } else if let Some((consent, approval)) = seen.cards
            && (asked.consent.is_some() != consent || asked.approval != approval)
        {
            self.report(
                Invariant::VerdictIsModels,
                "questions-differ",
                format!("{what}: model asks {asked:?}, runtime asked consent {consent} approval {approval}"),
            );
        }
    }

    /// The class of a call of `target` that ran without the approval the rules require: a
    /// pre-approval of a skill still active from an earlier turn (or call) that outlived it,
    /// or an approval skipped outright. `before` is the session before the call.
    pub fn skipped_approval_tag(&self, before: &Session, target: &Target) -> &'static str {
        let outlived = before.active.iter().any(|id| {
            let mut probe = before.clone();
            probe.read_this_turn = vec![id.clone()];
            probe.calls_since_read = 0;
            probe.preapproved(self.world, target)
        });
        if outlived {
            "preapproval-outlived-turn"
        } else {
            "approval-skipped"
        }
    }
}
