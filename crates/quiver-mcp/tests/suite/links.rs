//! Issue 23 item 1, URL mode: a client that declared URL-mode elicitation is shown the card's
//! page in the real console, the call waits for the person's answer there (bounded), and
//! `notifications/elicitation/complete` closes the question; forms and the immediate answer
//! stay for the clients that declared those.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_console::{Admin, Console, ConsoleConfig};
use quiver_mcp::McpConfig;
use quiver_store::{ApprovalStatus, AuditQuery, AuditStatus, SqliteStore, Store};
use rmcp::model::{ElicitationCapability, FormElicitationCapability, UrlElicitationCapability};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::harness::{Scripted, body, call, connect, front_with};

pub(super) const TOKEN: &str = "qc_test-console-token";
pub(super) const TOOL: &str = "travel-advice.packing_advice";

fn packing(city: &str) -> Value {
    json!({"name": "travel-advice__packing_advice", "arguments": {"destination": city}})
}

/// The console over the state in `dir`, served on a loopback port; its address.
pub(super) async fn console(dir: &std::path::Path) -> String {
    let store: Arc<SqliteStore> = Arc::new(SqliteStore::open(dir.join("state.db")).unwrap());
    let admin = Admin::new(store.clone(), store);
    let config = ConsoleConfig::new(TOKEN.into(), Duration::from_secs(15 * 60));
    let console = Arc::new(Console::new(admin, None, config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(quiver_console::serve(
        console,
        listener,
        CancellationToken::new(),
    ));
    base
}

/// Answers a card on its console page as a script signed in with the console's token: the
/// page's own form fields over a real socket. The HTTP status.
pub(super) async fn answer_on_page(page: &str, arguments: &Value, decision: &str) -> u16 {
    answer_on_page_confirmed(page, arguments, decision, false).await
}

/// [`answer_on_page`], with the second step a dangerous card asks (`confirm=yes`) when
/// `confirm`.
pub(super) async fn answer_on_page_confirmed(
    page: &str,
    arguments: &Value,
    decision: &str,
    confirm: bool,
) -> u16 {
    let rest = page.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let digest = quiver_store::argument_digest(arguments, &[]);
    let confirm = if confirm { "&confirm=yes" } else { "" };
    let form = format!("decision={decision}&digest={digest}&reason={confirm}");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    );
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    reply.split(' ').nth(1).unwrap().parse().unwrap()
}

fn url_only() -> ElicitationCapability {
    ElicitationCapability::new().with_url(UrlElicitationCapability::new())
}

fn config(console: &str, wait: Duration) -> McpConfig {
    McpConfig {
        approval_wait: wait,
        console_url: Some(console.to_owned()),
        ..McpConfig::default()
    }
}

/// The links the client was shown, once there are `n` (or after 10 s).
async fn links(script: &Scripted, n: usize) -> Vec<(String, String)> {
    let started = Instant::now();
    loop {
        let links = script.links.lock().unwrap().clone();
        if links.len() >= n || started.elapsed() > Duration::from_secs(10) {
            return links;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) fn audited(store: &Arc<dyn Store>) -> Vec<AuditStatus> {
    store
        .query_audit(&AuditQuery {
            tool: Some(TOOL.to_owned()),
            ..AuditQuery::default()
        })
        .unwrap()
        .iter()
        .map(|r| r.entry.status.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_url_client_is_shown_the_card_page_and_the_call_runs_once_answered_there() {
    let dir = tempfile::tempdir().unwrap();
    let base = console(dir.path()).await;
    let front = front_with(dir.path(), config(&base, Duration::from_secs(30)));
    let store = super::harness::state(dir.path());
    let script = Scripted {
        modes: Some(url_only()),
        ..Scripted::default()
    };
    script.answer("accept", None);
    let client = Arc::new(connect(front, script.clone()).await);
    let calling = {
        let client = client.clone();
        tokio::spawn(async move { call(&client, "call_tool", packing("Tokyo")).await })
    };
    let shown = links(&script, 1).await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    let (id, page) = shown[0].clone();
    assert_eq!(page, format!("{base}/approvals/{id}"));
    let card = store.approval(&id).unwrap().unwrap();
    assert_eq!(card.status, ApprovalStatus::Pending);
    // The call waits for the person: nothing has run yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!calling.is_finished());
    assert_eq!(audited(&store), []);
    let status = answer_on_page(&page, &card.card.arguments, "approve").await;
    assert_eq!(status, 303);
    let ran = tokio::time::timeout(Duration::from_secs(10), calling)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body(&ran)["advice"], "pack for Tokyo", "{:?}", body(&ran));
    assert_eq!(audited(&store), [AuditStatus::Ok]);
    assert_eq!(*script.completed.lock().unwrap(), std::slice::from_ref(&id));
    // Consent holds for the conversation: the next call asks nothing.
    let again = call(&client, "call_tool", packing("Paris")).await;
    assert_eq!(body(&again)["advice"], "pack for Paris");
    assert_eq!(links(&script, 1).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_link_is_answered_as_for_a_client_that_cannot_ask() {
    let dir = tempfile::tempdir().unwrap();
    let base = console(dir.path()).await;
    let front = front_with(dir.path(), config(&base, Duration::from_secs(30)));
    let store = super::harness::state(dir.path());
    let script = Scripted {
        modes: Some(url_only()),
        ..Scripted::default()
    };
    script.answer("decline", None);
    let client = connect(front, script.clone()).await;
    let started = Instant::now();
    let declined = call(&client, "call_tool", packing("Tokyo")).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let said = body(&declined);
    let (id, page) = links(&script, 1).await[0].clone();
    assert_eq!(said["waiting_for"]["approval"], id.as_str(), "{said:?}");
    assert_eq!(said["waiting_for"]["answer_at"], page.as_str());
    assert!(said["error"].as_str().unwrap().contains(&page), "{said:?}");
    assert!(script.completed.lock().unwrap().is_empty());
    // Recorded as waiting for a person (as for a client that cannot ask), not as run.
    assert_eq!(audited(&store), [AuditStatus::Pending]);
    // The card stays open: answered in the console, the retry runs without asking again.
    let card = store.approval(&id).unwrap().unwrap();
    assert_eq!(
        answer_on_page(&page, &card.card.arguments, "approve").await,
        303
    );
    let ran = call(&client, "call_tool", packing("Tokyo")).await;
    assert_eq!(body(&ran)["advice"], "pack for Tokyo", "{:?}", body(&ran));
    assert_eq!(links(&script, 1).await.len(), 1);
    assert_eq!(
        audited(&store)
            .iter()
            .filter(|s| **s == AuditStatus::Ok)
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_accepted_link_nobody_answers_expires_and_the_call_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = console(dir.path()).await;
    let front = front_with(dir.path(), config(&base, Duration::from_secs(1)));
    let store = super::harness::state(dir.path());
    let script = Scripted {
        modes: Some(url_only()),
        ..Scripted::default()
    };
    script.answer("accept", None);
    let client = connect(front, script.clone()).await;
    let started = Instant::now();
    let refused = call(&client, "call_tool", packing("Tokyo")).await;
    let error = body(&refused)["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("nobody answered in time"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        body(&refused).get("advice").is_none(),
        "{:?}",
        body(&refused)
    );
    let (id, page) = links(&script, 1).await[0].clone();
    let card = store.approval(&id).unwrap().unwrap();
    assert_eq!(card.status, ApprovalStatus::Expired);
    assert_eq!(*script.completed.lock().unwrap(), [id]);
    // A late answer in the console runs nothing.
    assert_ne!(
        answer_on_page(&page, &card.card.arguments, "approve").await,
        303
    );
    assert!(!audited(&store).contains(&AuditStatus::Ok));
}

/// The way each client is asked, with the console running: forms where declared (also with
/// URL mode), the link where only URL mode is, the immediate answer where nothing is.
#[tokio::test(flavor = "multi_thread")]
async fn forms_stay_forms_and_a_client_that_declared_nothing_is_answered_at_once() {
    let form_and_url = ElicitationCapability::new()
        .with_form(FormElicitationCapability::new())
        .with_url(UrlElicitationCapability::new());
    let cases = [
        (None, false, "form"),
        (Some(form_and_url), false, "form"),
        (None, true, "answer at"),
    ];
    for (modes, nothing, way) in cases {
        let dir = tempfile::tempdir().unwrap();
        let base = console(dir.path()).await;
        let front = front_with(dir.path(), config(&base, Duration::from_secs(30)));
        let script = Scripted {
            modes,
            no_elicitation: nothing,
            ..Scripted::default()
        };
        script.answer("accept", Some("allow_once"));
        let client = connect(front, script.clone()).await;
        let result = body(&call(&client, "call_tool", packing("Tokyo")).await);
        assert!(script.links.lock().unwrap().is_empty(), "{way}");
        match way {
            "form" => {
                assert_eq!(result["advice"], "pack for Tokyo", "{result:?}");
                assert_eq!(script.asked().len(), 1);
            }
            _ => {
                assert!(script.asked().is_empty());
                let id = result["waiting_for"]["approval"].as_str().unwrap();
                assert_eq!(
                    result["waiting_for"]["answer_at"],
                    format!("{base}/approvals/{id}")
                );
            }
        }
    }
}
