//! `quiver chat`'s agent loop with a scripted fake model (`quiver_agent::fake`, over real
//! HTTP) as a front: each turn of the conversation is one `ChatSession::send` whose model
//! makes the turn's calls as native tool calls, and agents and forks run in `SubAgents`, the
//! agent loop's own runner, whose child model calls every tool it is offered. Checked after
//! each turn: what ran (private items, consent, the stop), what each sub-agent was offered,
//! which agents ran in child sessions, and the system prompt's required sections.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use quiver_agent::config::{AgentConfig, ProviderConfig, ProviderKind};
use quiver_agent::fake::{Api, FakeServer, Move, offered_tools};
use quiver_agent::{ChatSession, Providers, Quiet, SubAgents};
use quiver_model::grants::Turns;
use quiver_model::rules::Session;
use quiver_model::world::{Caller, Op, SCRIPT_TOOL, Target, World};
use quiver_policy::ControlPlane;
use quiver_runtime::{Profile, SessionRequest};
use quiver_store::{AuditKind, AuditQuery, SessionFilter, Store};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

use super::check::Invariant;
use super::harness::{Checker, Run, arguments, harness_for, origin, principal};
use super::scripts::script_arguments;

/// What a sub-agent's model was first sent.
struct Child {
    /// Its system prompt.
    system: String,
    /// Its task (a fork's: the skill's instructions).
    task: String,
    /// The tools it was offered.
    tools: Vec<String>,
}

/// What the fake model saw and is to say.
#[derive(Default)]
struct Script {
    /// The main conversation's moves for this turn.
    main: VecDeque<Move>,
    /// The system prompt of the turn's first main request.
    main_system: Option<String>,
    /// Each sub-agent's system prompt, its task and the tools it was offered.
    children: Vec<Child>,
}

fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The model: scripted for the conversation; a sub-agent calls every item it is offered once,
/// then answers.
fn responder(world: World, script: Arc<Mutex<Script>>) -> quiver_agent::fake::Responder {
    Arc::new(move |body: &Value| {
        let system = system_of(body);
        let mut script = script.lock().unwrap();
        let child = system.contains("You are agent a") || system.contains("You run the skill");
        if !child {
            script.main_system.get_or_insert(system);
            return script
                .main
                .pop_front()
                .unwrap_or_else(|| Move::text("done"));
        }
        let last_role = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or_default()
            .to_owned();
        if last_role == "tool" {
            return Move::text("done");
        }
        let offered = offered_tools(body);
        let task = body["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        script.children.push(Child {
            system,
            task,
            tools: offered.clone(),
        });
        let calls: Vec<(String, Value)> = offered
            .iter()
            .filter_map(|name| {
                let target = world.targets().into_iter().find(|t| t.wire() == *name)?;
                Some((name.clone(), arguments(&world, Some(&target))))
            })
            .collect();
        if calls.is_empty() {
            return Move::text("done");
        }
        Move::Reply {
            text: String::new(),
            calls,
            usage: (100, 10),
        }
    })
}

/// The move a step makes, if it is a call.
fn move_of(world: &World, op: &Op) -> Option<Move> {
    match op {
        Op::ReadSkill(id) => Some(Move::call("read_skill", json!({"id": id}))),
        Op::Search(word) => Some(Move::call("tool_search", json!({"query": word}))),
        Op::LoadTool(t, form) => Some(Move::call("load_tool", json!({"name": t.named(*form)}))),
        Op::Call(t, form) => Some(Move::call(&t.named(*form), arguments(world, Some(t)))),
        Op::RunScript(id, s) => Some(Move::call(SCRIPT_TOOL, script_arguments(id, *s))),
        _ => None,
    }
}

/// Runs `ops` as `caller` over `world` through the chat loop, one turn per `NewTurn`.
pub fn run_case(world: &World, caller: Caller, ops: &[Op]) -> Run {
    let h = harness_for(world, true, true);
    let script = Arc::new(Mutex::new(Script::default()));
    let server =
        FakeServer::with_responder(Api::OpenAi, responder(world.clone(), script.clone())).unwrap();
    let mut provider = ProviderConfig::new(ProviderKind::Openai, server.url(), "fake-model");
    provider.retry_backoff_ms = 1;
    // The fake model answers at once; the timeout only guards a hang, and a loaded two-core
    // machine running the whole suite must not turn a slow answer into a violation.
    provider.timeout = 60.0;
    let mut config = AgentConfig::default();
    config.providers.insert("fake".into(), provider);
    config.default = Some("fake".into());
    let providers = Arc::new(Providers::new(config));
    h.runtime
        .set_agent_runner(Arc::new(SubAgents::new(providers.clone())));
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
    let (model, mut options) = providers.for_agent(None, None).unwrap();
    options.max_steps = 64;
    let mut chat = ChatSession::new(&h.runtime, model, options, &session, principal(&caller))
        .with_person(h.person.clone());
    let mut c = Checker::new(
        world,
        &h,
        session.clone(),
        Session::new(caller, Turns::Marked),
    );
    let mut children_seen = BTreeSet::new();
    let mut pending: Vec<Move> = Vec::new();
    let mut turn = |c: &mut Checker<'_>, moves: &mut Vec<Move>, chat: &mut ChatSession<'_>| {
        {
            let mut s = script.lock().unwrap();
            s.main = moves.drain(..).collect();
            s.main.push_back(Move::text("done"));
            s.main_system = None;
        }
        let _ = chat.send("go", &mut Quiet);
        let system = script
            .lock()
            .unwrap()
            .main_system
            .clone()
            .unwrap_or_default();
        c.check_sections(&system, "the chat system prompt");
        c.check_runs();
        c.check_children(&mut children_seen);
        c.check_sub_agent_offers(&script.lock().unwrap().children);
        script.lock().unwrap().children.clear();
    };
    for (step, op) in ops.iter().enumerate() {
        c.step = step;
        if let Some(m) = move_of(world, op) {
            pending.push(m);
            continue;
        }
        turn(&mut c, &mut pending, &mut chat);
        match op {
            Op::EmergencyStop(on) => {
                let control = ControlPlane {
                    emergency_stop: *on,
                    ..ControlPlane::default()
                };
                h.runtime.set_control(control, "operator").unwrap();
                c.model.stopped = *on;
            }
            Op::ConsentAnswer(yes) => h.person.consent_no.store(!yes, Ordering::SeqCst),
            Op::ApprovalAnswer(yes) => h.person.approval_no.store(!yes, Ordering::SeqCst),
            _ => {}
        }
    }
    turn(&mut c, &mut pending, &mut chat);
    drop(chat);
    let ran = h.ran();
    Run {
        violations: c.violations,
        ran,
    }
}

impl Checker<'_> {
    /// Agents that ran in child sessions of the conversation: another package's private agent
    /// never; another package's exposed agent only with that package's consent.
    fn check_children(&mut self, seen: &mut BTreeSet<String>) {
        let main = self.session.clone();
        let sessions = self
            .h
            .store
            .list_sessions(&SessionFilter::default())
            .unwrap();
        for child in sessions
            .iter()
            .filter(|s| s.parent.as_deref() == Some(main.as_str()))
        {
            if !seen.insert(child.id.clone()) {
                continue;
            }
            let Some(agent) = self.world.resolve(&child.agent) else {
                continue;
            };
            // A fork activates its skill in the child: the caller is that skill's package.
            let fork = self
                .h
                .store
                .query_audit(&AuditQuery {
                    session: Some(child.id.clone()),
                    kind: Some(AuditKind::SkillActivated),
                    ..AuditQuery::default()
                })
                .unwrap()
                .into_iter()
                .find_map(|r| r.entry.skill);
            let caller = fork
                .as_deref()
                .and_then(|s| self.world.skill(s))
                .map(|(p, _, _)| p);
            if caller == Some(agent.package()) {
                continue;
            }
            let what = match &fork {
                Some(skill) => format!("fork of {skill} into {}", child.agent),
                None => format!("{} called by the conversation", child.agent),
            };
            if Session::private(self.world, &agent) {
                let tag = if fork.is_some() {
                    "fork-into-private-agent"
                } else {
                    "private-agent-ran-outside"
                };
                self.report(Invariant::PrivateStaysHome, tag, format!("{what}: private"));
            } else if !self.consented(&main, agent.package()) {
                let tag = if fork.is_some() {
                    "fork-without-consent"
                } else {
                    "exposed-ran-without-consent"
                };
                self.report(
                    Invariant::ConsentBeforeExposed,
                    tag,
                    format!("{what}: no consent"),
                );
            }
        }
    }

    /// What a sub-agent of package `p` was offered: only items it may call (its own package's,
    /// or another package's exposed items, and in a fork's child what the forked skill, active
    /// there, unlocks).
    fn check_sub_agent_offers(&mut self, children: &[Child]) {
        for child in children {
            let Some(p) = child
                .system
                .split(" of p")
                .nth(1)
                .and_then(|rest| rest.split('.').next())
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue; // a fork without an agent
            };
            let forked = child.task.split("of skill `").nth(1);
            let unlocked = forked
                .and_then(|rest| rest.split('`').next())
                .map(|id| Session::unlocks(self.world, id))
                .unwrap_or_default();
            for name in &child.tools {
                let Some(target) = self.target_of_wire(name) else {
                    continue;
                };
                // Named in its frontmatter, so a hidden tool counts as named exactly.
                let admitted = self
                    .world
                    .tool(&target)
                    .is_none_or(|t| self.model.admits(t.restrict));
                let scoped = matches!(target, Target::Scoped(..));
                let may = (!scoped || unlocked.contains(&target))
                    && admitted
                    && (target.package() == p || !Session::private(self.world, &target));
                if may {
                    continue;
                }
                let tag = if Session::private(self.world, &target) {
                    "sub-agent-offered-private"
                } else {
                    "sub-agent-offered-uncallable"
                };
                self.report(
                    Invariant::OfferedIsCallable,
                    tag,
                    format!("an agent of p{p} was offered {name}"),
                );
            }
        }
    }
}
