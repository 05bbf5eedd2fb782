//! The runtime API in process as a front: a generated world written as real package folders,
//! a real SQLite file, tools run by `BuiltinExecutor` (in process: every generated tool is
//! registered, so a case takes milliseconds instead of a sandboxed process per call), agents
//! and forks run by a runner that plays the sub-agent (it calls every tool the agent declares
//! in a child session), and a person who answers as the conversation says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use quiver_catalog::Catalog;
use quiver_model::rules::{Read, Session, Turns, Verdict, Why};
use quiver_model::world::{Caller, NameForm, Op, PromptProfile, Role, Target, World};
use quiver_model::write::{section_marker, write_world};
use quiver_policy::{ControlPlane, Origin, Principal, ScopeKind};
use quiver_runtime::approver::{Answer, Approver, Card, Question};
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::runtime::{AgentReply, AgentRunner, AgentTask};
use quiver_runtime::{
    ApproverSet, CallOutcome, CallStatus, Profile, Runtime, RuntimeConfig, SessionRequest, Turn,
};
use quiver_store::{AuditKind, AuditQuery, SqliteStore, Store, StoreOptions, Synchronous};
use serde_json::{Value, json};

use super::check::{Invariant, Violation};

/// The secret value every secret argument carries; it must never reach the audit log.
pub const SECRET: &str = "hunter2-very-secret";

/// Answers consent and approvals as the conversation says, and keeps every card.
#[derive(Default)]
struct Person {
    consent_no: AtomicBool,
    approval_no: AtomicBool,
    cards: Mutex<Vec<Card>>,
}

impl Approver for Person {
    fn decide(&self, card: &Card) -> Answer {
        self.cards.lock().unwrap().push(card.clone());
        let no = match card.question {
            Question::Consent => self.consent_no.load(Ordering::SeqCst),
            Question::Approval => self.approval_no.load(Ordering::SeqCst),
        };
        match (no, card.question) {
            (true, _) => Answer::Deny,
            (false, Question::Consent) => Answer::AllowForSession,
            (false, Question::Approval) => Answer::Allow,
        }
    }
}

/// A run handed to the agent loop.
#[derive(Debug, Clone)]
struct Task {
    agent: Option<String>,
    skill: Option<String>,
    parent: String,
}

/// Plays sub-agents: records each task, and for an agent of the world calls every tool it
/// declares, in a child session, as its model would.
struct Runner {
    world: World,
    tasks: Mutex<Vec<Task>>,
    /// Child sessions, with the package whose agent runs in them.
    children: Mutex<BTreeMap<String, usize>>,
}

impl AgentRunner for Runner {
    fn run(&self, runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String> {
        self.tasks.lock().unwrap().push(Task {
            agent: task.agent.clone(),
            skill: task.skill.clone(),
            parent: task.parent_session.clone(),
        });
        let Some(agent) = task.agent.as_deref() else {
            return Ok(reply("fork", "done"));
        };
        let Some(target) = self.world.resolve(agent).filter(|t| matches!(t, Target::Agent(..)))
        else {
            return Err(format!("no such agent: {agent}"));
        };
        if self.children.lock().unwrap().contains_key(&task.parent_session) {
            // One level of sub-agents is enough to see every rule.
            return Ok(reply("nested", "done"));
        }
        let child = runtime
            .create_child_session(&task.parent_session, agent, &task.sender)
            .map_err(|e| e.to_string())?;
        self.children.lock().unwrap().insert(child.clone(), target.package());
        let mut turn = runtime
            .begin_turn(&child, task.sender.clone(), &task.task)
            .map_err(|e| e.to_string())?;
        if let Some(person) = task.person.clone() {
            turn.set_person(person);
        }
        let declared = self.world.agent(&target).map(|a| a.tools.clone()).unwrap_or_default();
        for r in declared {
            let args = arguments(&self.world, self.world.resolve(&r.qualified()).as_ref());
            turn.call(&r.qualified(), args).map_err(|e| e.to_string())?;
        }
        drop(turn);
        runtime.end_session(&child).map_err(|e| e.to_string())?;
        Ok(reply(&child, "done"))
    }
}

fn reply(session: &str, text: &str) -> AgentReply {
    AgentReply {
        session: session.to_owned(),
        reply: text.to_owned(),
    }
}

/// The arguments a call of `target` sends: a task for an agent, a text (and the secret where
/// the tool has one) for a tool.
pub fn arguments(world: &World, target: Option<&Target>) -> Value {
    match target {
        Some(t @ Target::Agent(..)) if world.exists(t) => json!({"task": "do it"}),
        Some(t) if world.tool(t).is_some_and(|tool| tool.secret) => {
            json!({"text": "x", "token": SECRET})
        }
        _ => json!({"text": "x"}),
    }
}

/// The principal of a caller.
pub fn principal(caller: &Caller) -> Principal {
    match caller.role {
        Role::Master => Principal::user("owner", quiver_package::rules::Role::Master),
        Role::User => Principal::user("u1", quiver_package::rules::Role::User),
        Role::Anonymous => Principal::anonymous(),
    }
}

/// The origin of a caller.
pub fn origin(caller: &Caller) -> Origin {
    if caller.in_qq_group {
        Origin::on("qq", ScopeKind::Group, "1")
    } else {
        Origin::default()
    }
}

/// One case run against the runtime: every violation seen, in step order.
pub struct Run {
    /// The violations.
    pub violations: Vec<Violation>,
}

/// The state a case runs in.
struct Harness {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    store: Arc<SqliteStore>,
    person: Arc<Person>,
    runner: Arc<Runner>,
    runs: Arc<Mutex<Vec<(String, String)>>>,
}

/// A migrated, empty state database, made once per process: a case copies it (opening a new
/// database runs every migration, ~25–70 ms on this machine; a copy takes ~2 ms).
fn template_db() -> &'static std::path::Path {
    static TEMPLATE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        drop(SqliteStore::open(dir.path().join("state.db")).unwrap());
        dir
    });
    Box::leak(dir.path().join("state.db").into_boxed_path())
}

fn harness(world: &World) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    write_world(world, &packages).unwrap();
    let catalog = Catalog::load_dirs(&[packages.as_path()]);
    let db = dir.path().join("state.db");
    std::fs::copy(template_db(), &db).unwrap();
    let options = StoreOptions {
        readers: 1,
        synchronous: Synchronous::Normal,
        ..StoreOptions::default()
    };
    let store = Arc::new(SqliteStore::open_with(&db, &options).unwrap());
    let runs: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let mut executor = BuiltinExecutor::new();
    for target in world.targets() {
        if world.tool(&target).is_none() {
            continue;
        }
        let runs = runs.clone();
        let name = target.qualified();
        executor.register(
            &target.qualified(),
            Arc::new(move |_args: &Value, ctx| {
                runs.lock().unwrap().push((name.clone(), ctx.session_id.clone()));
                Ok(json!({"ok": true}))
            }),
        );
    }
    let person = Arc::new(Person::default());
    let approvers = ApproverSet {
        person: Some(person.clone()),
        console: None,
        reviewer: None,
    };
    let runtime = Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        approvers,
        RuntimeConfig::default(),
    );
    let runner = Arc::new(Runner {
        world: world.clone(),
        tasks: Mutex::default(),
        children: Mutex::default(),
    });
    runtime.set_agent_runner(runner.clone());
    Harness {
        store,
        _dir: dir,
        runtime,
        person,
        runner,
        runs,
    }
}

/// Runs `ops` as `caller` over `world` through the runtime API and checks every invariant
/// after every step.
pub fn run_case(world: &World, caller: Caller, ops: &[Op]) -> Run {
    let h = harness(world);
    let profile = if caller.unattended { Profile::Schedule } else { Profile::Interactive };
    let session = h
        .runtime
        .create_session(&SessionRequest {
            origin: origin(&caller),
            agent: "chat".into(),
            principal: principal(&caller),
            profile,
        })
        .unwrap();
    let mut c = Checker {
        world,
        h: &h,
        session: session.clone(),
        model: Session::new(caller, Turns::Marked),
        violations: Vec::new(),
        step: 0,
        seen_runs: 0,
        seen_tasks: 0,
        seen_cards: 0,
    };
    let mut turn = h.runtime.begin_turn(&session, principal(&caller), "hello").unwrap();
    c.check_prompt(&turn);
    for (step, op) in ops.iter().enumerate() {
        c.step = step;
        match op {
            Op::NewTurn => {
                drop(turn);
                turn = h.runtime.begin_turn(&session, principal(&caller), "again").unwrap();
                c.model.new_turn();
                c.check_prompt(&turn);
            }
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
            Op::ReadSkill(id) => c.read_skill(&mut turn, id),
            Op::LoadTool(target, form) => {
                let name = target.named(*form);
                let out = turn.call("load_tool", json!({"name": name})).unwrap();
                c.check_audit(&out, None, &json!({"name": name}), "load_tool");
                let loaded = c.model.load_tool(world, target);
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
                        format!("load_tool({name}): model loads {loaded}, runtime {:?}", out.status),
                    );
                }
            }
            Op::Search(word) => c.search(&mut turn, word),
            Op::Call(target, form) => c.call(&mut turn, target, &target.named(*form)),
        }
        c.check_runs();
        c.check_offer(&turn);
    }
    drop(turn);
    Run {
        violations: c.violations,
    }
}

/// Checks each step of one case.
struct Checker<'a> {
    world: &'a World,
    h: &'a Harness,
    session: String,
    model: Session,
    violations: Vec<Violation>,
    step: usize,
    seen_runs: usize,
    seen_tasks: usize,
    seen_cards: usize,
}

impl Checker<'_> {
    fn report(&mut self, invariant: Invariant, tag: &str, detail: String) {
        self.violations.push(Violation {
            invariant,
            tag: tag.to_owned(),
            detail: format!("step {}: {detail}", self.step),
        });
    }

    /// The cards asked in the main session since the last look.
    fn new_cards(&mut self) -> Vec<Card> {
        let cards = self.h.person.cards.lock().unwrap();
        let fresh = cards[self.seen_cards..]
            .iter()
            .filter(|c| c.session == self.session)
            .cloned()
            .collect();
        self.seen_cards = cards.len();
        fresh
    }

    fn target_of_wire(&self, wire: &str) -> Option<Target> {
        self.world.targets().into_iter().find(|t| t.wire() == wire)
    }

    /// Whether the rules let the conversation call `target` now, locks aside.
    fn may_call(&self, target: &Target) -> bool {
        self.model.reaches(self.world, target)
            && !Session::private(self.world, target)
            && !self.model.disallowed(self.world, target)
    }

    /// The class of an uncallable item that was offered.
    fn offered_tag(&self, target: &Target) -> &'static str {
        match target {
            Target::Scoped(..) => "scoped-tool-offered",
            _ if Session::private(self.world, target) => "private-item-offered",
            _ => "uncallable-item-offered",
        }
    }

    fn check_prompt(&mut self, turn: &Turn<'_>) {
        let Ok((text, _)) = turn.system_prompt() else {
            return; // the front fails: allowed
        };
        let unattended = self.model.caller.unattended;
        for (p, package) in self.world.packages.iter().enumerate() {
            for (r, prompt) in package.prompts.iter().enumerate() {
                let profile_ok = match prompt.profile {
                    None => true,
                    Some(PromptProfile::Interactive) => !unattended,
                    Some(PromptProfile::Schedule) => unattended,
                };
                if prompt.required && profile_ok && !text.contains(&section_marker(p, r)) {
                    self.report(
                        Invariant::RequiredSectionPresent,
                        "required-section-missing",
                        format!("p{p}/r{r} is required and absent from the system prompt"),
                    );
                }
            }
        }
    }

    fn check_offer(&mut self, turn: &Turn<'_>) {
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

    fn consented(&self, session: &str, package: usize) -> bool {
        self.h
            .store
            .consents(session)
            .unwrap()
            .iter()
            .any(|c| c.granted && c.package == format!("p{package}"))
    }

    /// The package a session acts for: `None` for the conversation, `Some(p)` for a child
    /// session of one of `p`'s agents.
    fn acting(&self, session: &str) -> Option<usize> {
        self.h.runner.children.lock().unwrap().get(session).copied()
    }

    /// Every tool run and agent run since the last look: nothing private outside its package,
    /// consent for every exposed item run on another's behalf, nothing under the stop.
    fn check_runs(&mut self) {
        let runs: Vec<(String, String)> = self.h.runs.lock().unwrap()[self.seen_runs..].to_vec();
        self.seen_runs += runs.len();
        for (qualified, session) in runs {
            let Some(target) = self.world.resolve(&qualified) else {
                continue;
            };
            let acting = self.acting(&session);
            self.check_one_run(&target, acting, &session, None);
        }
        let tasks: Vec<Task> = self.h.runner.tasks.lock().unwrap()[self.seen_tasks..].to_vec();
        self.seen_tasks += tasks.len();
        for task in tasks {
            let Some(agent) = task.agent.as_deref().and_then(|a| self.world.resolve(a)) else {
                continue;
            };
            let by_skill = task.skill.as_deref().and_then(|s| self.world.skill(s)).map(|(p, _, _)| p);
            let acting = by_skill.or_else(|| self.acting(&task.parent));
            self.check_one_run(&agent, acting, &task.parent, task.skill.as_deref());
        }
    }

    fn check_one_run(&mut self, target: &Target, acting: Option<usize>, session: &str, fork: Option<&str>) {
        let what = match fork {
            Some(skill) => format!("fork of {skill} into {}", target.qualified()),
            None => format!("{} in {}", target.qualified(), if acting.is_some() { "a sub-agent" } else { "the conversation" }),
        };
        if self.model.stopped {
            self.report(Invariant::NothingUnderStop, "ran-under-stop", format!("{what} ran under the emergency stop"));
        }
        let home = acting == Some(target.package());
        if home {
            return;
        }
        if Session::private(self.world, target) {
            let tag = match (fork, target) {
                (Some(_), _) => "fork-into-private-agent",
                (None, Target::Agent(..)) => "private-agent-ran-outside",
                _ => "private-tool-ran-outside",
            };
            self.report(Invariant::PrivateStaysHome, tag, format!("{what}: private to p{}", target.package()));
        } else if !self.consented(session, target.package()) {
            let tag = match (fork, acting) {
                (Some(_), _) => "fork-without-consent",
                (None, Some(_)) => "sub-agent-call-without-consent",
                (None, None) => "exposed-ran-without-consent",
            };
            self.report(
                Invariant::ConsentBeforeExposed,
                tag,
                format!("{what}: no consent for p{}", target.package()),
            );
        }
    }

    /// Exactly one call record for the outcome, without the secret in it.
    fn check_audit(&mut self, out: &CallOutcome, target: Option<&Target>, args: &Value, name: &str) {
        let records: Vec<_> = self
            .h
            .store
            .query_audit(&AuditQuery {
                session: Some(self.session.clone()),
                kind: Some(AuditKind::Call),
                ..AuditQuery::default()
            })
            .unwrap()
            .into_iter()
            .filter(|r| r.entry.call_id.as_deref() == Some(out.call_id.as_str()))
            .collect();
        if records.len() != 1 {
            self.report(
                Invariant::OneAuditRecord,
                "audit-record-count",
                format!("call {} has {} records", out.call_id, records.len()),
            );
        }
        let secret = target.and_then(|t| self.world.tool(t)).is_some_and(|t| t.secret);
        for record in records {
            let text = serde_json::to_string(&record.entry).unwrap();
            let digest_without = quiver_store::argument_digest(args, &["token"]);
            let leaked_digest = secret && record.entry.argument_digest.as_deref() != Some(digest_without.as_str());
            if text.contains(SECRET) || leaked_digest {
                let by_qualified = name.contains('.');
                self.report(
                    Invariant::OneAuditRecord,
                    if by_qualified { "secret-in-audit-qualified-name" } else { "secret-in-audit" },
                    format!("the record of {:?} holds the secret argument", record.entry.tool),
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
        let runtime_says = match (&out.status, out.content.get("status").and_then(Value::as_str)) {
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
            Read::Activated { .. } => {
                for key in ["tools", "unlocked_tools"] {
                    let listed: Vec<String> = out.content[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.get("name").or(Some(v)).and_then(Value::as_str).map(str::to_owned))
                        .collect();
                    for name in listed {
                        let Some(target) = self.target_of_wire(&name) else { continue };
                        if !self.may_call(&target) {
                            let tag = match target {
                                Target::Scoped(..) => "read-skill-lists-scoped-tool",
                                _ if self.model.disallowed(self.world, &target) => {
                                    "read-skill-lists-disallowed"
                                }
                                _ => "read-skill-lists-uncallable",
                            };
                            self.report(
                                Invariant::OfferedIsCallable,
                                tag,
                                format!("read_skill({id}) lists {name} in `{key}`, which may not be called"),
                            );
                        }
                    }
                }
            }
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
                        format!("read_skill({id}) forks: model {verdict:?}, runtime {runtime_says} {}", out.content),
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
            if !self.model.searchable(self.world, target) {
                self.report(
                    Invariant::OfferedIsCallable,
                    "search-finds-unsearchable",
                    format!("tool_search({word}) found {}", target.wire()),
                );
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
        let consent_card = cards.iter().any(|c| c.question == Question::Consent);
        let approval_card = cards.iter().any(|c| c.question == Question::Approval);
        let status = out.status;
        let ran = status == CallStatus::Ok;
        if status != CallStatus::Unknown && !reaches {
            let tag = match target {
                Target::Scoped(..) => "scoped-tool-reachable",
                _ => "unreachable-item-answered",
            };
            self.report(
                Invariant::CallableIsReachable,
                tag,
                format!("{name} answered {status:?} ({}), the rules say unknown", error_text(&out)),
            );
            return;
        }
        if status == CallStatus::Unknown && verdict != Verdict::Unknown {
            let (inv, tag) = if offered_before {
                (Invariant::OfferedIsCallable, "offered-then-unknown")
            } else {
                (Invariant::VerdictIsModels, "reachable-but-unknown")
            };
            self.report(inv, tag, format!("{name}: runtime unknown, model {verdict:?}"));
            return;
        }
        let asked = verdict.asked();
        if ran && asked.approval && !approval_card {
            let outlived = before.active.iter().any(|id| {
                let mut probe = before.clone();
                probe.read_this_turn = vec![id.clone()];
                probe.calls_since_read = 0;
                probe.preapproved(self.world, target)
            });
            let tag = if outlived { "preapproval-outlived-turn" } else { "approval-skipped" };
            self.report(Invariant::GrantWithinTurn, tag, format!("{name} ran without the approval the rules require"));
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
            _ => "error",
        };
        if class(&verdict) != runtime_class {
            let anonymous = self.model.caller.role == Role::Anonymous;
            let tag = match verdict {
                Verdict::Refused(Why::NoPerson, _) if anonymous => "anonymous-answers-person-card",
                Verdict::Refused(Why::NoPerson, _) if ran => "ran-without-a-person",
                Verdict::Refused(Why::Private, _) if ran => "private-ran",
                _ => "verdict-differs",
            };
            self.report(
                Invariant::VerdictIsModels,
                tag,
                format!("{name}: model {verdict:?}, runtime {status:?} {}", out.content),
            );
        } else if asked.consent.is_some() != consent_card || (asked.approval != approval_card && !(ran && asked.approval)) {
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

fn error_text(out: &CallOutcome) -> String {
    out.content
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
