//! Issue 23 item 1, URL mode for 2026-07-28 clients: a stateless client that declared only
//! `elicitation.url` is returned, in `input_required`, a URL-mode request for the card's page
//! in the real console, with the sealed `requestState`; its retry looks at the card: answered,
//! the call goes on (or is refused) at once; not yet, the same card is returned again; a
//! declined or dismissed link is answered at once as for a client that cannot ask. Raw
//! JSON-RPC over a loopback socket, as such a client sends it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use quiver_mcp::McpConfig;
use quiver_mcp::config::BearerToken;
use quiver_package::rules::Role;
use quiver_policy::Principal;
use quiver_runtime::RuntimeConfig;
use quiver_store::{ApprovalStatus, AuditQuery, AuditStatus, CardQuestion, Store};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::harness::{examples, executor, front_with_executor, state};
use super::http::post;
use super::links::{answer_on_page_confirmed, audited, console};

const BEARER: &str = "Bearer alice-token";

/// `quiver serve --http` over the examples with the console running, both on loopback ports;
/// `kicks` counts the runs of `group-admin.kick_member`.
struct Served {
    port: u16,
    console: String,
    store: Arc<dyn Store>,
    kicks: Arc<AtomicUsize>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn serve() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let console = console(dir.path()).await;
    let kicks = Arc::new(AtomicUsize::new(0));
    let (port, shutdown) = serve_front(dir.path(), &console, &kicks).await;
    Served {
        port,
        console,
        store: state(dir.path()),
        kicks,
        shutdown,
        _dir: dir,
    }
}

/// A `quiver serve --http` process over the state in `dir` (another instance, when one
/// already serves it: same secret, same database), its console at `console`; its port.
async fn serve_front(
    dir: &std::path::Path,
    console: &str,
    kicks: &Arc<AtomicUsize>,
) -> (u16, CancellationToken) {
    let config = McpConfig {
        tokens: vec![BearerToken {
            token: "alice-token".into(),
            principal: Principal::user("alice", Role::Trusted),
            origin: Default::default(),
        }],
        allow_anonymous: false,
        console_url: Some(console.to_owned()),
        ..McpConfig::default()
    };
    let mut executor = executor();
    let counted = kicks.clone();
    executor.register(
        "group-admin.kick_member",
        Arc::new(move |args, _ctx| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"kicked": args["user_id"]}))
        }),
    );
    let front = front_with_executor(
        &[examples()],
        dir,
        config,
        RuntimeConfig::default(),
        executor,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    tokio::spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));
    (port, shutdown)
}

fn packing(city: &str) -> Value {
    json!({"name": "travel-advice__packing_advice", "arguments": {"destination": city}})
}

fn kick(user: &str) -> Value {
    json!({"name": "group-admin__kick_member", "arguments": {"user_id": user}})
}

/// One stateless `tools/call` of `call_tool` with `call` (`name`, `arguments`), by a client
/// that declared URL-mode elicitation only; with `reply` (`action`, `requestState`), the
/// retry of a question. The JSON-RPC response.
async fn call(port: u16, call: &Value, reply: Option<(&str, &str)>) -> Value {
    let mut params = json!({
        "name": "call_tool",
        "arguments": call,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "url-only", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
        },
    });
    if let Some((action, state)) = reply {
        params["inputResponses"] = json!({"quiver_decision": {"action": action}});
        params["requestState"] = json!(state);
    }
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let (status, response) = tokio::task::spawn_blocking(move || {
        post(
            port,
            &[
                ("Authorization", BEARER),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "call_tool"),
            ],
            &request,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{response}");
    serde_json::from_str(&response[response.find("\r\n\r\n").unwrap() + 4..]).unwrap()
}

/// A URL-mode question returned in `input_required`.
#[derive(Debug)]
struct Asked {
    id: String,
    url: String,
    message: String,
    state: String,
}

fn asked(response: &Value) -> Asked {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{response}");
    let request = &requests["quiver_decision"];
    assert_eq!(request["method"], "elicitation/create", "{response}");
    let params = &request["params"];
    assert_eq!(params["mode"], "url", "{response}");
    assert!(params.get("requestedSchema").is_none(), "{response}");
    Asked {
        id: params["elicitationId"].as_str().unwrap().to_owned(),
        url: params["url"].as_str().unwrap().to_owned(),
        message: params["message"].as_str().unwrap().to_owned(),
        state: result["requestState"].as_str().unwrap().to_owned(),
    }
}

/// The JSON the model reads from a finished call, and whether it is an error result.
fn done(response: &Value) -> (Value, bool) {
    let result = &response["result"];
    assert!(
        result.get("resultType").is_none_or(|t| t == "complete"),
        "{response}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    let error = result["isError"].as_bool().unwrap_or(false);
    (serde_json::from_str(text).unwrap(), error)
}

/// The JSON-RPC error's message.
fn error(response: &Value) -> String {
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {response}"))
        .to_owned()
}

/// Answers card `id` on its console page (confirming, as a dangerous card asks).
async fn answer(served: &Served, id: &str, decision: &str) {
    let card = served.store.approval(id).unwrap().unwrap();
    let page = format!("{}/approvals/{id}", served.console);
    let status = answer_on_page_confirmed(&page, &card.card.arguments, decision, true).await;
    assert_eq!(status, 303);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_card_page_comes_in_input_required_and_the_retry_runs_once_approved_there() {
    let served = serve().await;
    let started = Instant::now();
    let first = asked(&call(served.port, &packing("Tokyo"), None).await);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        first.url,
        format!("{}/approvals/{}", served.console, first.id)
    );
    assert!(
        first.message.contains("`travel-advice`") && first.message.contains(&first.url),
        "{}",
        first.message
    );
    let card = served.store.approval(&first.id).unwrap().unwrap();
    assert_eq!(card.status, ApprovalStatus::Pending);
    assert_eq!(card.card.question, CardQuestion::Consent);
    // Nothing ran, nothing was refused: the call waits for the answer.
    assert_eq!(audited(&served.store), []);
    answer(&served, &first.id, "approve").await;
    let ran = call(
        served.port,
        &packing("Tokyo"),
        Some(("accept", &first.state)),
    )
    .await;
    let (body, is_error) = done(&ran);
    assert_eq!(body["advice"], "pack for Tokyo", "{ran}");
    assert!(!is_error);
    assert_eq!(audited(&served.store), [AuditStatus::Ok]);
    // The state is spent; the conversation has the package's consent.
    let replayed = call(
        served.port,
        &packing("Tokyo"),
        Some(("accept", &first.state)),
    )
    .await;
    // Sent again, the spent state gets the same answer replayed; nothing runs again.
    assert_eq!(done(&replayed).0["advice"], "pack for Tokyo", "{replayed}");
    assert_eq!(replayed["result"]["_meta"]["io.quiver/replayed"], true);
    assert_eq!(audited(&served.store), [AuditStatus::Ok]);
    let next = call(served.port, &packing("Paris"), None).await;
    assert_eq!(done(&next).0["advice"], "pack for Paris", "{next}");
    assert_eq!(audited(&served.store), [AuditStatus::Ok, AuditStatus::Ok]);
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_before_anyone_answered_is_returned_the_same_card_again() {
    let served = serve().await;
    let first = asked(&call(served.port, &packing("Oslo"), None).await);
    let started = Instant::now();
    let again = call(
        served.port,
        &packing("Oslo"),
        Some(("accept", &first.state)),
    )
    .await;
    let waited = started.elapsed();
    let again = asked(&again);
    // It looked at the card for a few seconds, never longer.
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
    assert_eq!((&again.id, &again.url), (&first.id, &first.url));
    assert_ne!(again.state, first.state);
    assert!(
        again.message.starts_with("Not answered yet"),
        "{}",
        again.message
    );
    assert_eq!(served.store.pending_approvals(None).unwrap().len(), 1);
    assert_eq!(audited(&served.store), []);
    let replayed = call(
        served.port,
        &packing("Oslo"),
        Some(("accept", &first.state)),
    )
    .await;
    // The spent first state gets its answer replayed: the same card, the same next state.
    let replayed = asked(&replayed);
    assert_eq!((&replayed.id, &replayed.state), (&again.id, &again.state));
    assert_eq!(served.store.pending_approvals(None).unwrap().len(), 1);
    answer(&served, &first.id, "approve").await;
    let ran = call(
        served.port,
        &packing("Oslo"),
        Some(("accept", &again.state)),
    )
    .await;
    assert_eq!(done(&ran).0["advice"], "pack for Oslo", "{ran}");
    assert_eq!(audited(&served.store), [AuditStatus::Ok]);
    served.shutdown.cancel();
}

/// The package's consent to `kick` asked and approved on its page; the approval question
/// the call asks next.
async fn kick_approval(served: &Served, user: &str) -> Asked {
    let consent = asked(&call(served.port, &kick(user), None).await);
    let card = served.store.approval(&consent.id).unwrap().unwrap();
    assert_eq!(card.card.question, CardQuestion::Consent);
    answer(served, &consent.id, "approve").await;
    // The dangerous gate asks its own card, a person's for this one call.
    let approval = call(served.port, &kick(user), Some(("accept", &consent.state))).await;
    let approval = asked(&approval);
    assert_ne!(approval.id, consent.id);
    let card = served.store.approval(&approval.id).unwrap().unwrap();
    assert_eq!(card.card.question, CardQuestion::Approval);
    approval
}

#[tokio::test(flavor = "multi_thread")]
async fn a_card_denied_on_its_page_refuses_the_call_once() {
    let served = serve().await;
    let approval = kick_approval(&served, "42").await;
    answer(&served, &approval.id, "deny").await;
    let refused = call(served.port, &kick("42"), Some(("accept", &approval.state))).await;
    let (body, is_error) = done(&refused);
    assert!(is_error, "{refused}");
    assert!(
        body["error"].as_str().unwrap().contains("refused"),
        "{refused}"
    );
    assert_eq!(served.kicks.load(Ordering::SeqCst), 0);
    // The denial was used by that retry: the next call (a new turn) asks anew, with a card
    // of its own, and runs nothing.
    let anew = asked(&call(served.port, &kick("42"), None).await);
    assert_ne!(anew.id, approval.id);
    assert_eq!(served.kicks.load(Ordering::SeqCst), 0);
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_or_dismissed_link_is_answered_at_once_and_the_card_stays_open() {
    for action in ["decline", "cancel"] {
        let served = serve().await;
        let first = asked(&call(served.port, &packing("Rome"), None).await);
        let started = Instant::now();
        let answered = call(served.port, &packing("Rome"), Some((action, &first.state))).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{action}");
        let (said, is_error) = done(&answered);
        assert!(is_error, "{action}: {answered}");
        assert_eq!(said["waiting_for"]["approval"], first.id.as_str(), "{said}");
        assert_eq!(
            said["waiting_for"]["answer_at"],
            first.url.as_str(),
            "{said}"
        );
        let text = said["error"].as_str().unwrap();
        assert!(
            text.contains(&first.url)
                && text.contains("call `travel-advice__packing_advice` again"),
            "{text}"
        );
        // Not a "no": nothing refused, the card still open, the call recorded as waiting.
        assert_eq!(audited(&served.store), [AuditStatus::Pending], "{action}");
        let card = served.store.approval(&first.id).unwrap().unwrap();
        assert_eq!(card.status, ApprovalStatus::Pending);
        // Answered in the console, the plain retry of the call runs.
        answer(&served, &first.id, "approve").await;
        let ran = call(served.port, &packing("Rome"), None).await;
        assert_eq!(done(&ran).0["advice"], "pack for Rome", "{action}: {ran}");
        assert_eq!(
            audited(&served.store),
            [AuditStatus::Ok, AuditStatus::Pending],
            "{action} (newest first)"
        );
        served.shutdown.cancel();
    }
}

/// The state is sealed to the call: altered, for other arguments or replayed it is refused,
/// and an approval given on the page runs its call exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_runs_its_own_call_exactly_once_and_a_tampered_state_nothing() {
    let served = serve().await;
    let approval = kick_approval(&served, "42").await;
    assert!(
        approval.message.contains("risk: member") && approval.message.contains(&approval.url),
        "{}",
        approval.message
    );
    answer(&served, &approval.id, "approve").await;
    let mut altered = approval.state.clone().into_bytes();
    let middle = altered.len() / 2;
    altered[middle] = if altered[middle] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let forged = call(served.port, &kick("42"), Some(("accept", &altered))).await;
    assert!(error(&forged).contains("requestState"), "{forged}");
    let other = call(served.port, &kick("43"), Some(("accept", &approval.state))).await;
    assert!(error(&other).contains("another call"), "{other}");
    assert_eq!(served.kicks.load(Ordering::SeqCst), 0);
    let ran = call(served.port, &kick("42"), Some(("accept", &approval.state))).await;
    assert_eq!(done(&ran).0["kicked"], "42", "{ran}");
    assert_eq!(served.kicks.load(Ordering::SeqCst), 1);
    let replayed = call(served.port, &kick("42"), Some(("accept", &approval.state))).await;
    // Sent again, the spent state replays the result: it never runs twice.
    assert_eq!(done(&replayed).0["kicked"], "42", "{replayed}");
    assert_eq!(replayed["result"]["_meta"]["io.quiver/replayed"], true);
    assert_eq!(served.kicks.load(Ordering::SeqCst), 1);
    // The same call again needs a fresh answer: a new card, nothing run.
    let again = asked(&call(served.port, &kick("42"), None).await);
    assert_ne!(again.id, approval.id);
    assert_eq!(served.kicks.load(Ordering::SeqCst), 1);
    let kicked = served
        .store
        .query_audit(&AuditQuery {
            tool: Some("group-admin.kick_member".to_owned()),
            ..AuditQuery::default()
        })
        .unwrap()
        .iter()
        .filter(|r| r.entry.status == AuditStatus::Ok)
        .count();
    assert_eq!(kicked, 1);
    served.shutdown.cancel();
}

/// A retry that reaches another instance (a restart, a second process behind the same secret
/// and database) finds no call held there: the call runs again from the start and looks at
/// the same card, asking nothing new.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_in_another_process_looks_at_the_same_card() {
    let served = serve().await;
    let first = asked(&call(served.port, &packing("Kyiv"), None).await);
    let (elsewhere, stop) = serve_front(served._dir.path(), &served.console, &served.kicks).await;
    // Not answered yet: the same card again, from there.
    let again = asked(&call(elsewhere, &packing("Kyiv"), Some(("accept", &first.state))).await);
    assert_eq!(again.id, first.id);
    assert_eq!(served.store.pending_approvals(None).unwrap().len(), 1);
    answer(&served, &first.id, "approve").await;
    let ran = call(elsewhere, &packing("Kyiv"), Some(("accept", &again.state))).await;
    assert_eq!(done(&ran).0["advice"], "pack for Kyiv", "{ran}");
    assert_eq!(audited(&served.store), [AuditStatus::Ok]);
    stop.cancel();
    served.shutdown.cancel();
}
