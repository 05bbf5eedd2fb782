//! The runtime API in process as a front (`Runtime::begin_turn`, `Turn::call`, `Turn::offer`,
//! `Turn::system_prompt`), as `quiver call` and the chat loop use it: the conversation's
//! operations one by one, compared with the model after every step.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use quiver_model::grants::Turns;
use quiver_model::rules::{Read, Session, Verdict, Why};
use quiver_model::world::{Caller, NameForm, Op, Role, Target, World};
use quiver_policy::ControlPlane;
use quiver_runtime::approver::Question;
use quiver_runtime::{CallStatus, Profile, SessionRequest, Turn};
use serde_json::{Value, json};

use super::check::Invariant;
use super::harness::{Checker, Run, arguments, error_text, harness_placed, origin, principal};

/// Runs `ops` as `caller` over `world` through the runtime API and checks every invariant
/// after every step.
pub fn run_case(world: &World, caller: Caller, ops: &[Op]) -> Run {
    run_case_placed(world, caller, ops, 0)
}

/// [`run_case`] with the packages in the bit mask `installed` installed instead of in the
/// project root.
pub fn run_case_placed(world: &World, caller: Caller, ops: &[Op], installed: u32) -> Run {
    let h = harness_placed(world, true, false, installed);
    let profile = if caller.unattended {
        Profile::Schedule
    } else {
        Profile::Interactive
    };
    let session = h
        .runtime
        .create_session(&SessionRequest {
            origin: origin(&caller),
            agent: "chat".into(),
            principal: principal(&caller),
            profile,
        })
        .unwrap();
    let mut c = Checker::new(
        world,
        &h,
        session.clone(),
        Session::new(caller, Turns::Marked),
    );
    let mut turn = h
        .runtime
        .begin_turn(&session, principal(&caller), "hello")
        .unwrap();
    c.check_prompt(&turn);
    for (step, op) in ops.iter().enumerate() {
        c.step = step;
        if *op == Op::NewTurn {
            drop(turn);
            turn = next_turn(&mut c, &session, caller);
        }
        run_op(&mut c, &mut turn, op);
    }
    drop(turn);
    let ran = h.ran();
    Run {
        violations: c.violations,
        ran,
    }
}

impl Checker<'_> {
    fn check_prompt(&mut self, turn: &Turn<'_>) {
        if let Ok((text, _)) = turn.system_prompt() {
            self.check_sections(&text, "the system prompt");
        } // else the front fails: allowed
    }

    pub fn check_offer(&mut self, turn: &Turn<'_>) {
        let offer = turn.offer().unwrap();
        let names: BTreeSet<String> = offer.tools.iter().map(|t| t.name.clone()).collect();
        for name in &names {
            let Some(target) = self.target_of_wire(name) else {
                continue; // a meta-tool
            };
            if !self.may_call(&target) {
                let tag = self.offered_tag(&target);
                self.report(
                    Invariant::OfferedIsCallable,
                    tag,
                    format!("{name} is offered and may not be called"),
                );
            }
        }
        for target in self.model.offered(self.world) {
            if !names.contains(&target.wire()) {
                self.report(
                    Invariant::VerdictIsModels,
                    "offer-misses-item",
                    format!("{} may be called and is not offered", target.wire()),
                );
            }
        }
    }

    fn read_skill(&mut self, turn: &mut Turn<'_>, id: &str) {
        let args = json!({"id": id});
        let out = turn.call("read_skill", args.clone()).unwrap();
        self.check_audit(&out, None, &args, "");
        self.new_cards();
        let expected = self.model.read_skill(self.world, id);
        let runtime_says = match (
            &out.status,
            out.content.get("status").and_then(Value::as_str),
        ) {
            (CallStatus::Ok, Some("opened")) => "opened",
            (CallStatus::Ok, _) if out.content.get("result").is_some() => "ran",
            (CallStatus::Ok, _) if out.content.get("skill").is_some() => "activated",
            (CallStatus::Ok, _) => "ran",
            (CallStatus::Refused, _) => "refused",
            (CallStatus::Unknown, _) => "unknown",
            _ if error_text(&out).contains("no such skill") => "no-such-skill",
            _ => "error",
        };
        match expected {
            Read::NoSuchSkill if runtime_says != "no-such-skill" => self.report(
                Invariant::VerdictIsModels,
                "read-skill-differs",
                format!("read_skill({id}): model no such skill, runtime {runtime_says}"),
            ),
            Read::Opened if runtime_says != "opened" => self.report(
                Invariant::VerdictIsModels,
                "read-skill-differs",
                format!("read_skill({id}): model opens the package, runtime {runtime_says}"),
            ),
            Read::Activated { .. } if runtime_says != "activated" => self.report(
                Invariant::VerdictIsModels,
                "read-skill-differs",
                format!("read_skill({id}): model activates, runtime {runtime_says}"),
            ),
            Read::Activated { .. } => self.check_listed(&out.content, &format!("read_skill({id})")),
            Read::Fork(verdict) => {
                let ran = runtime_says == "ran";
                if verdict.runs() != ran {
                    let agent = self.world.skill(id).and_then(|(p, _, s)| {
                        let r = s.fork.as_ref()?;
                        Some((p, self.world.resolve(&r.qualified())?))
                    });
                    let tag = match agent {
                        _ if verdict.runs() => "fork-refused",
                        Some((p, a)) if a.package() != p && Session::private(self.world, &a) => {
                            "fork-into-private-agent"
                        }
                        Some((p, a)) if a.package() != p => "fork-without-consent",
                        _ => "fork-ran",
                    };
                    self.report(
                        Invariant::VerdictIsModels,
                        tag,
                        format!(
                            "read_skill({id}) forks: model {verdict:?}, runtime {runtime_says} {}",
                            out.content
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    fn search(&mut self, turn: &mut Turn<'_>, word: &str) {
        let args = json!({"query": word});
        let out = turn.call("tool_search", args.clone()).unwrap();
        self.check_audit(&out, None, &args, "");
        let found: Vec<Target> = out.content["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r.get("loaded").and_then(Value::as_bool) == Some(true))
            .filter_map(|r| r["name"].as_str().and_then(|n| self.target_of_wire(n)))
            .collect();
        for target in &found {
            if !self.may_call(target) {
                let tag = self.search_tag(target);
                self.report(
                    Invariant::OfferedIsCallable,
                    tag,
                    format!("tool_search({word}) found {}", target.wire()),
                );
                self.excused.insert(target.clone(), tag.into());
            }
        }
        self.model.found(self.world, &found);
    }

    fn call(&mut self, turn: &mut Turn<'_>, target: &Target, name: &str) {
        let args = arguments(self.world, Some(target));
        let offered_before = turn
            .offer()
            .unwrap()
            .tools
            .iter()
            .any(|t| t.name == target.wire());
        let reaches = self.world.exists(target) && self.model.reaches(self.world, target);
        let before = self.model.clone();
        let out = turn.call(name, args.clone()).unwrap();
        self.check_audit(&out, Some(target), &args, name);
        let cards = self.new_cards();
        let verdict = self.model.call(self.world, target);
        self.sync_consents();
        self.call_starts_run(target, &verdict);
        let consent_card = cards.iter().any(|c| c.question == Question::Consent);
        let approval_card = cards.iter().any(|c| c.question == Question::Approval);
        let status = out.status;
        let ran = status == CallStatus::Ok;
        if status != CallStatus::Unknown && !reaches {
            let tag = match (self.excused.get(target), target) {
                (Some(cause), _) => cause.clone(),
                (None, Target::Scoped(..)) => self.offered_tag(target).to_owned(),
                _ => "unreachable-item-answered".to_owned(),
            };
            self.report(
                Invariant::CallableIsReachable,
                &tag,
                format!(
                    "{name} answered {status:?} ({}), the rules say unknown",
                    error_text(&out)
                ),
            );
            return;
        }
        if status == CallStatus::Unknown && verdict != Verdict::Unknown {
            let (inv, tag) = if offered_before {
                (Invariant::OfferedIsCallable, "offered-then-unknown")
            } else {
                (Invariant::VerdictIsModels, "reachable-but-unknown")
            };
            self.report(
                inv,
                tag,
                format!("{name}: runtime unknown, model {verdict:?}"),
            );
            return;
        }
        let asked = verdict.asked();
        if ran && asked.approval && !approval_card {
            let tag = self.skipped_approval_tag(&before, target);
            self.report(
                Invariant::GrantWithinTurn,
                tag,
                format!("{name} ran without the approval the rules require"),
            );
        }
        let class = |v: &Verdict| match v {
            Verdict::Unknown => "unknown",
            Verdict::Refused(..) => "refused",
            Verdict::Runs(_) => "ran",
        };
        let runtime_class = match status {
            CallStatus::Unknown => "unknown",
            CallStatus::Refused => "refused",
            CallStatus::Ok => "ran",
            // A run that started and then failed at a step was started: the model does not
            // follow a run's steps (what they run is checked on every run as it happens).
            _ if matches!(target, Target::Workflow(..)) => "ran",
            _ => "error",
        };
        let anonymous = self.model.caller.role == Role::Anonymous;
        if anonymous && ran && matches!(verdict, Verdict::Refused(Why::NoPerson, _)) {
            // Follow the runtime, which let the call run: the model's lockout would echo.
            self.model.locked.remove(target);
            self.model.member_locked = false;
        }
        if class(&verdict) != runtime_class {
            let tag = match verdict {
                Verdict::Refused(Why::NoPerson, _) if anonymous => "anonymous-answers-person-card",
                Verdict::Refused(Why::NoPerson, _) if ran => "ran-without-a-person",
                Verdict::Refused(Why::Private, _) if ran => "private-ran",
                _ => "verdict-differs",
            };
            self.report(
                Invariant::VerdictIsModels,
                tag,
                format!(
                    "{name}: model {verdict:?}, runtime {status:?} {}",
                    out.content
                ),
            );
        } else if asked.consent.is_some() != consent_card
            || (asked.approval != approval_card && !(ran && asked.approval))
        {
            let anonymous_refusal = matches!(verdict, Verdict::Refused(Why::NoPerson, _))
                && self.model.caller.role == Role::Anonymous;
            self.report(
                Invariant::VerdictIsModels,
                if anonymous_refusal { "anonymous-answers-person-card" } else { "questions-differ" },
                format!("{name}: model asks {asked:?}, runtime asked consent {consent_card} approval {approval_card}"),
            );
        }
    }
}

/// Runs one operation of the conversation `session` in `turn` and checks it.
/// Begins the next turn of `session` and checks its prompt.
pub fn next_turn<'h>(c: &mut Checker<'h>, session: &str, caller: Caller) -> Turn<'h> {
    let turn =
        c.h.runtime
            .begin_turn(session, principal(&caller), "again")
            .unwrap();
    c.model.new_turn();
    c.check_prompt(&turn);
    turn
}

pub fn run_op(c: &mut Checker<'_>, turn: &mut Turn<'_>, op: &Op) {
    let (h, world) = (c.h, c.world);
    match op {
        // The caller begins the next turn ([`next_turn`]).
        Op::NewTurn => {}
        Op::EmergencyStop(on) => {
            let control = ControlPlane {
                emergency_stop: *on,
                ..ControlPlane::default()
            };
            h.runtime.set_control(control, "operator").unwrap();
            c.model.stopped = *on;
        }
        Op::ConsentAnswer(yes) => {
            h.person.consent_no.store(!yes, Ordering::SeqCst);
            c.model.consent_yes = *yes;
        }
        Op::ApprovalAnswer(yes) => {
            h.person.approval_no.store(!yes, Ordering::SeqCst);
            c.model.approval_yes = *yes;
        }
        Op::ReadSkill(id) => c.read_skill(turn, id),
        Op::LoadTool(target, form) => {
            let name = target.named(*form);
            let out = turn.call("load_tool", json!({"name": name})).unwrap();
            c.check_audit(&out, None, &json!({"name": name}), "load_tool");
            let before = c.model.clone();
            let loaded = c.model.load_tool(world, target);
            if loaded && out.status != CallStatus::Ok {
                // Follow the runtime where it differs, so one difference is reported once.
                c.model = before;
            }
            if loaded != (out.status == CallStatus::Ok) {
                let tag = match form {
                    NameForm::Qualified if loaded => "load-tool-qualified-name",
                    _ if out.status == CallStatus::Ok && Session::private(world, target) => {
                        "load-tool-loads-private"
                    }
                    _ => "load-tool-differs",
                };
                c.report(
                    Invariant::VerdictIsModels,
                    tag,
                    format!(
                        "load_tool({name}): model loads {loaded}, runtime {:?}",
                        out.status
                    ),
                );
            }
        }
        Op::Search(word) => c.search(turn, word),
        Op::Call(target, form) => c.call(turn, target, &target.named(*form)),
        Op::RunScript(id, script) => c.run_script_in_turn(turn, id, *script),
        Op::TriggerRun(i) => c.trigger_run(*i),
        Op::AnswerRun(yes) => c.answer_run(*yes),
    }
    c.check_runs();
    c.check_run_states();
    c.check_offer(turn);
}
