//! The MCP front in process, driven by an rmcp client (`mcp_client`) speaking as the local
//! owner, whose consent and approvals are answered by elicitation. Two kinds of client: one
//! of the 2025-11-25 era that marks its turns with `_meta["io.quiver/turn"]`, and a generic
//! one of the 2026-07-28 era that sends no turn id (then a widening may last at most until
//! the next call). This module plays a conversation through any connected client
//! ([`run_with`]) and connects one over stdio (an in-memory pipe, as
//! `crates/quiver-mcp/tests/suite/harness.rs` connects it); `mcp_http_driver` connects one
//! over Streamable HTTP.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use quiver_mcp::{Front, McpConfig};
use quiver_model::grants::Turns;
use quiver_model::rules::Session;
use quiver_model::world::{Caller, Op, Role, SCRIPT_TOOL, Target, World};
use quiver_policy::ControlPlane;
use quiver_store::{AuditKind, AuditQuery, AuditStatus, SessionFilter, Store};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::check::Invariant;
use super::harness::{Checker, Harness, Run, arguments, harness};
use super::mcp_client::{Client, Connected, serve};
use super::scripts::{ScriptCall, script_arguments};

/// The local owner of stdio (and the owner's bearer token over HTTP).
pub const OWNER: Caller = Caller {
    role: Role::Master,
    in_qq_group: false,
    unattended: false,
};

/// Runs `ops` over `world` through the MCP front over stdio; `turn_ids`: whether the client
/// marks turns.
pub fn run_case(world: &World, ops: &[Op], turn_ids: bool) -> Run {
    run_with(world, ops, turn_ids, async |h, person| {
        connect_stdio(h, person).await
    })
}

/// Connects `person` to a new front over stdio.
async fn connect_stdio(h: &Harness, person: Client) -> Connected {
    let front = Arc::new(Front::new(
        h.runtime.clone(),
        McpConfig::default(),
        vec![0x42; 32],
    ));
    let (server_side, client_side) = tokio::io::duplex(1 << 20);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let server = tokio::spawn(async move {
        let _ = quiver_mcp::serve_stdio(front, tokio::io::split(server_side), stop).await;
    });
    Connected {
        client: serve(person, client_side).await,
        passes_handle: false,
        handle: None,
        shutdown,
        server,
    }
}

/// Runs `ops` over `world` through the MCP front that `connect` starts and connects the
/// person's client to; `turn_ids`: whether the client marks turns (a 2025-11-25 client, else
/// a generic 2026-07-28 one).
pub fn run_with(
    world: &World,
    ops: &[Op],
    turn_ids: bool,
    connect: impl AsyncFnOnce(&Harness, Client) -> Connected,
) -> Run {
    let h = harness(world, false);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let turns = if turn_ids {
        Turns::Marked
    } else {
        Turns::Unmarked
    };
    let mut c = Checker::new(world, &h, String::new(), Session::new(OWNER, turns));
    // The generic client speaks the 2026-07-28 era, the marking one the 2025-11-25 era.
    let person = Client {
        era: (!turn_ids).then_some(ProtocolVersion::V_2026_07_28),
        ..Client::default()
    };
    runtime.block_on(async {
        let mut connected = connect(&h, person.clone()).await;
        drive(&mut c, ops, turn_ids, &mut connected, &person).await;
        connected.close().await;
    });
    let ran = h.ran();
    Run {
        violations: c.violations,
        ran,
    }
}

/// Plays `ops` through the connected client and checks every invariant after every step.
async fn drive(
    c: &mut Checker<'_>,
    ops: &[Op],
    turn_ids: bool,
    connected: &mut Connected,
    person: &Client,
) {
    let instructions = connected
        .client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    c.check_sections(&instructions, "the MCP server's instructions");
    let mut turn = 0u32;
    for (step, op) in ops.iter().enumerate() {
        c.step = step;
        c.model.next_request();
        let meta = turn_ids.then(|| format!("turn-{turn}"));
        let asked_before = person.asked.lock().unwrap().len();
        match op {
            Op::NewTurn => {
                turn += 1;
                c.model.new_turn();
            }
            Op::EmergencyStop(on) => {
                let control = ControlPlane {
                    emergency_stop: *on,
                    ..ControlPlane::default()
                };
                c.h.runtime.set_control(control, "operator").unwrap();
                c.model.stopped = *on;
            }
            Op::ConsentAnswer(yes) => {
                person.consent_no.store(!yes, Ordering::SeqCst);
                c.model.consent_yes = *yes;
            }
            Op::ApprovalAnswer(yes) => {
                person.approval_no.store(!yes, Ordering::SeqCst);
                c.model.approval_yes = *yes;
            }
            // `load_tool` is not on the MCP front's fixed list.
            Op::LoadTool(..) => {}
            Op::TriggerRun(i) => c.trigger_run(*i),
            Op::AnswerRun(yes) => c.answer_run(*yes),
            Op::RunScript(id, script) => {
                let before = c.model.clone();
                let runs_before = c.h.runs.lock().unwrap().len();
                let arguments = script_arguments(id, *script);
                let call = json!({"name": SCRIPT_TOOL, "arguments": arguments});
                let body = connected.call("call_tool", call, meta).await;
                c.find_session();
                let verdict = c.model.run_script(c.world, id, *script);
                c.sync_consents();
                let ran = c.h.runs.lock().unwrap()[runs_before..]
                    .iter()
                    .any(|(q, s)| q.ends_with(SCRIPT_TOOL) && *s == c.session);
                let approval_asked = person.asked.lock().unwrap()[asked_before..]
                    .iter()
                    .any(|m| m.starts_with("Run `"));
                let seen = ScriptCall {
                    ran,
                    class: None,
                    cards: None,
                    approval_asked,
                    said: &body,
                };
                c.compare_script(&before, (id, *script), verdict, &seen);
            }
            Op::ReadSkill(id) => {
                let body = connected.call("read_skill", json!({"id": id}), meta).await;
                c.find_session();
                c.model.read_skill(c.world, id);
                c.check_listed(&body, &format!("read_skill({id})"));
            }
            Op::Search(word) => {
                let body = connected
                    .call("tool_search", json!({"query": word}), meta)
                    .await;
                c.find_session();
                let found: Vec<Target> = body["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r.get("loaded").and_then(Value::as_bool) == Some(true))
                    .filter_map(|r| r["name"].as_str().and_then(|n| c.target_of_wire(n)))
                    .collect();
                for target in &found {
                    if !c.may_call(target) {
                        let tag = c.search_tag(target);
                        c.report(
                            Invariant::OfferedIsCallable,
                            tag,
                            format!("tool_search({word}) found {}", target.wire()),
                        );
                        c.excused.insert(target.clone(), tag.into());
                    }
                }
                c.model.found(c.world, &found);
            }
            Op::Call(target, form) => {
                let name = target.named(*form);
                let args = arguments(c.world, Some(target));
                let before = c.model.clone();
                let runs_before = c.h.runs.lock().unwrap().len();
                let tasks_before = c.h.runner.tasks.lock().unwrap().len();
                let body = connected
                    .call("call_tool", json!({"name": name, "arguments": args}), meta)
                    .await;
                c.find_session();
                let verdict = c.model.call(c.world, target);
                c.sync_consents();
                c.call_starts_run(target, &verdict);
                let ran = c.h.runs.lock().unwrap()[runs_before..]
                    .iter()
                    .any(|(q, s)| *q == target.qualified() && *s == c.session)
                    || c.h.runner.tasks.lock().unwrap()[tasks_before..]
                        .iter()
                        .any(|t| {
                            t.agent.as_deref() == Some(target.qualified().as_str())
                                && t.parent == c.session
                        });
                let unknown = body["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("unknown tool"));
                let reaches = c.world.exists(target) && before.reaches(c.world, target);
                if !unknown && !reaches {
                    let tag = c.excused.get(target).cloned().or_else(|| {
                        matches!(target, Target::Scoped(..))
                            .then(|| c.offered_tag(target).to_owned())
                    });
                    c.report(
                        Invariant::CallableIsReachable,
                        tag.as_deref().unwrap_or("unreachable-item-answered"),
                        format!("{name} answered {body}, the rules say unknown"),
                    );
                }
                let asked_approval = person.asked.lock().unwrap()[asked_before..]
                    .iter()
                    .any(|m| m.starts_with("Run `"));
                if ran && verdict.asked().approval && !asked_approval {
                    let tag = c.skipped_approval_tag(&before, target);
                    c.report(
                        Invariant::GrantWithinTurn,
                        tag,
                        format!("{name} ran without the approval the rules require"),
                    );
                }
                let runs_here = !matches!(target, Target::Workflow(..));
                if runs_here && verdict.runs() && !ran {
                    let tag = if !verdict.asked().approval && asked_approval {
                        "preapproval-not-renewed"
                    } else {
                        "call-not-run"
                    };
                    c.report(
                        Invariant::VerdictIsModels,
                        tag,
                        format!("{name}: model {verdict:?}, runtime did not run it: {body}"),
                    );
                }
            }
        }
        if matches!(
            op,
            Op::ReadSkill(_) | Op::Search(_) | Op::Call(..) | Op::RunScript(..)
        ) {
            c.check_one_record_per_request();
        }
        c.check_runs();
        c.check_run_states();
    }
}

impl Checker<'_> {
    /// One more call record in the conversation for the request just made.
    fn check_one_record_per_request(&mut self) {
        let records = self
            .h
            .store
            .query_audit(&AuditQuery {
                session: Some(self.session.clone()),
                kind: Some(AuditKind::Call),
                ..AuditQuery::default()
            })
            .unwrap();
        let before = self.seen_records;
        self.seen_records = records.len();
        if records.len() != before + 1 {
            // Newest first: the records this request left.
            let left = &records[..records.len().saturating_sub(before)];
            let statuses: Vec<String> = left
                .iter()
                .map(|r| format!("{:?} {:?}", r.entry.tool, r.entry.status))
                .collect();
            let pending = left.iter().any(|r| r.entry.status == AuditStatus::Pending);
            let rerun = left.len() >= 2 && left.iter().all(|r| r.entry.tool == left[0].entry.tool);
            let tag = match (pending, rerun) {
                (true, _) => "pending-round-recorded-apart",
                (false, true) => "rerun-after-input-required",
                _ => "audit-record-count",
            };
            self.report(
                Invariant::OneAuditRecord,
                tag,
                format!("one request left {} call records: {statuses:?}", left.len()),
            );
        }
    }

    /// The conversation the front opened. Every request continues it (over stateless HTTP,
    /// by the handle the client passes back): a second conversation would ask the person
    /// again what the first one was told.
    fn find_session(&mut self) {
        let sessions = self
            .h
            .store
            .list_sessions(&SessionFilter::default())
            .unwrap();
        // Not a workflow run's session (agent `workflow`), which has no parent either.
        let conversations: Vec<&str> = sessions
            .iter()
            .filter(|s| s.parent.is_none() && s.agent == quiver_mcp::front::MCP_AGENT)
            .map(|s| s.id.as_str())
            .collect();
        if self.session.is_empty()
            && let Some(first) = conversations.first()
        {
            self.session = (*first).to_owned();
        }
        let reported = self
            .violations
            .iter()
            .any(|v| v.tag == "conversation-split");
        if conversations.len() > 1 && !reported {
            self.report(
                Invariant::VerdictIsModels,
                "conversation-split",
                format!("the requests went to {} conversations", conversations.len()),
            );
        }
    }
}
