//! Runs in doubt over a real socket: retried or resolved from the console exactly once,
//! through the same run operations as `quiver runs retry|resolve`, audited with the operator.

use std::sync::atomic::Ordering;

use quiver_runtime::RunOps;
use quiver_store::workflow::RunFilter;
use quiver_store::{AuditKind, AuditQuery};
use serde_json::{Value, json};

use super::harness::{Served, TOKEN, serve};

/// Runs the workflow `notes.save` (one step, `save_note`: an action, never re-run by itself)
/// from a turn, and lets the process "die" while the tool runs; then recovers the run as a
/// restart would: it is in doubt.
fn in_doubt(s: &Served) -> String {
    let session = s.session(&["notes"]);
    let before = s.calls.lock().unwrap().len();
    s.crash.store(true, Ordering::SeqCst);
    let _ = s.call(&session, "notes__save", json!({})).join();
    assert_eq!(s.calls.lock().unwrap().len(), before + 1, "the step ran");
    let run = s
        .admin
        .runs(&RunFilter::default())
        .unwrap()
        .into_iter()
        .find(|r| r.workflow == "notes.save" && r.status.to_string() == "running")
        .expect("a run left running");
    let recovered = RunOps::new(&s.runtime).unwrap().drive(&run.id).unwrap();
    assert_eq!(recovered.status.to_string(), "in_doubt");
    run.id
}

/// An owner id for this process's workflow engines naming a process that is gone, so that
/// an attempt left started is recovered at once (as after `kill -9`) instead of after its
/// lease.
fn gone_owner() -> String {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let gone = quiver_store::waiter::of(child.id()).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    format!("{gone}/0")
}

async fn post(s: &Served, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let response = s
        .client()
        .post(format!("{}{path}", s.base))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .form(form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_run_in_doubt_is_retried_or_resolved_once_from_the_console() {
    let s = serve().await;
    assert!(s.runtime.set_workflow_owner(gone_owner()));
    let retried = in_doubt(&s);
    assert_eq!(s.calls.lock().unwrap().len(), 1);
    let shown: Value = s
        .client()
        .get(format!("{}/runs/{retried}", s.base))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["run"]["status"], "in_doubt", "{shown:#}");
    assert_eq!(shown["in_doubt"], true);

    // Retry: the step runs again, once; a second retry is 409 and runs nothing.
    let (status, run) = post(&s, &format!("/runs/{retried}/retry"), &[]).await;
    assert_eq!(
        (status, &run["status"]),
        (200, &json!("completed")),
        "{run:#}"
    );
    assert_eq!(s.calls.lock().unwrap().len(), 2);
    let (status, _) = post(&s, &format!("/runs/{retried}/retry"), &[]).await;
    assert_eq!(status, 409);
    assert_eq!(s.calls.lock().unwrap().len(), 2);

    // Done with an output: nothing runs again; once.
    let done = in_doubt(&s);
    let form = [("verdict", "done"), ("output", r#"{"saved": true}"#)];
    let (status, run) = post(&s, &format!("/runs/{done}/resolve"), &form).await;
    assert_eq!(
        (status, &run["status"]),
        (200, &json!("completed")),
        "{run:#}"
    );
    assert_eq!(
        post(&s, &format!("/runs/{done}/resolve"), &form).await.0,
        409
    );
    assert_eq!(s.calls.lock().unwrap().len(), 3);

    // Fail, with a reason; a bad verdict or output is 400 and changes nothing.
    let failed = in_doubt(&s);
    let bad = post(
        &s,
        &format!("/runs/{failed}/resolve"),
        &[("verdict", "maybe")],
    )
    .await;
    assert_eq!(bad.0, 400);
    let bad = post(
        &s,
        &format!("/runs/{failed}/resolve"),
        &[("verdict", "done"), ("output", "{")],
    )
    .await;
    assert_eq!(bad.0, 400);
    let form = [("verdict", "fail"), ("reason", "never saved")];
    let (status, run) = post(&s, &format!("/runs/{failed}/resolve"), &form).await;
    assert_eq!((status, &run["status"]), (200, &json!("failed")), "{run:#}");
    assert_eq!(s.calls.lock().unwrap().len(), 4);
    assert_eq!(post(&s, "/runs/run-nope/retry", &[]).await.0, 404);

    // Each is audited once, naming the operator.
    let records = s
        .admin
        .audit(&AuditQuery {
            kind: Some(AuditKind::Operator),
            ..AuditQuery::default()
        })
        .unwrap();
    let by_word = |word: &str, run: &str| {
        records
            .iter()
            .filter(|r| {
                r.entry.decisions[0].decision == word
                    && r.entry.principal["user_id"] == "console:owner"
                    && r.entry.detail.as_ref().unwrap()["run"] == run
            })
            .count()
    };
    assert_eq!(by_word("retry", &retried), 1, "{records:#?}");
    assert_eq!(by_word("resolve-done", &done), 1);
    assert_eq!(by_word("resolve-fail", &failed), 1);
}
