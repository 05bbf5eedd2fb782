//! Consent and approvals through elicitation, in both eras, and the console queue for a
//! client that cannot elicit.

use std::time::Duration;

use quiver_mcp::McpConfig;
use quiver_store::{AuditQuery, AuditStep, Decision, SessionFilter, Store};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitResult, ElicitationAction, InputResponses,
    ProtocolVersion,
};
use serde_json::json;

use super::harness::{Scripted, body, call, connect, front, front_with, handle};

/// The id of the only session on `store`.
fn first_session(store: &std::sync::Arc<dyn Store>) -> String {
    let sessions = store.list_sessions(&SessionFilter::default()).unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0].id.clone()
}

/// The client's answer "allow once" to an `input_required` question.
fn allow_once() -> InputResponses {
    [(
        "quiver_decision".to_owned(),
        serde_json::to_value(
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"decision": "allow_once"})),
        )
        .unwrap(),
    )]
    .into()
}

fn packing(city: &str) -> serde_json::Value {
    json!({"name": "travel-advice__packing_advice", "arguments": {"destination": city}})
}

async fn consent_answers(version: ProtocolVersion) {
    let dir = tempfile::tempdir().unwrap();
    let client_script = Scripted::era(version.clone());
    let client = connect(front(dir.path()), client_script.clone()).await;
    assert_eq!(client.peer_info().unwrap().protocol_version, version);

    // Cancel: not run, nothing recorded, asked again next time.
    client_script.answer("cancel", None);
    let cancelled = call(&client, "call_tool", packing("Tokyo")).await;
    assert_eq!(cancelled.is_error, Some(true), "{version}");
    assert!(
        body(&cancelled)["error"]
            .as_str()
            .unwrap()
            .contains("nobody answered"),
        "{:?}",
        body(&cancelled)
    );
    assert_eq!(client_script.asked().len(), 1);
    assert!(
        client_script.asked()[0].contains("`travel-advice`")
            && client_script.asked()[0]
                .contains("the package may: nothing beyond its own package and data folders"),
        "the form says what the package may do: {:?}",
        client_script.asked()
    );

    // Accept for the conversation: runs, and no second question.
    client_script.answer("accept", Some("allow_conversation"));
    let ran = call(&client, "call_tool", packing("Tokyo")).await;
    assert_eq!(
        body(&ran)["advice"],
        "pack for Tokyo",
        "{version}: {:?}",
        body(&ran)
    );
    assert_eq!(client_script.asked().len(), 2);
    let again = call(&client, "call_tool", packing("Paris")).await;
    assert_eq!(body(&again)["advice"], "pack for Paris");
    assert_eq!(
        client_script.asked().len(),
        2,
        "consent is asked once per conversation"
    );

    // Decline: refused, and the refusal stands for the conversation.
    client_script.answer("decline", None);
    let declined = call(
        &client,
        "call_tool",
        json!({"name": "notes__add_note", "arguments": {"text": "milk"}}),
    )
    .await;
    assert_eq!(declined.is_error, Some(true));
    assert!(
        body(&declined)["error"]
            .as_str()
            .unwrap()
            .starts_with("refused"),
        "{:?}",
        body(&declined)
    );
    assert_eq!(client_script.asked().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn consent_in_the_session_era() {
    consent_answers(ProtocolVersion::V_2025_11_25).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn consent_in_the_stateless_era() {
    consent_answers(ProtocolVersion::V_2026_07_28).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dangerous_tool_needs_a_person_each_time() {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let dir = tempfile::tempdir().unwrap();
        let script = Scripted::era(version.clone());
        let client = connect(front(dir.path()), script.clone()).await;
        script.answer("accept", Some("allow_conversation"));
        script.answer("decline", None);
        let kick = json!({"name": "group-admin__kick_member", "arguments": {"user_id": "10006"}});
        let refused = call(&client, "call_tool", kick.clone()).await;
        assert!(
            body(&refused)["error"]
                .as_str()
                .unwrap()
                .contains("refused"),
            "{:?}",
            body(&refused)
        );
        let asked = script.asked();
        assert_eq!(
            asked.len(),
            2,
            "{version}: consent, then approval: {asked:?}"
        );
        assert!(
            asked[1].contains("risk: member") && asked[1].contains("this one call"),
            "{}",
            asked[1]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn request_state_cannot_be_forged_or_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let front = front(dir.path());
    let store = super::harness::state(dir.path());
    let audited = |tool: &str| {
        let records = store
            .query_audit(&AuditQuery {
                tool: Some(tool.to_owned()),
                ..AuditQuery::default()
            })
            .unwrap();
        // Oldest first: (status, the answer to the consent question).
        records
            .iter()
            .rev()
            .map(|r| {
                let consent = r
                    .entry
                    .decisions
                    .iter()
                    .rfind(|d| d.step == AuditStep::Consent);
                (
                    r.entry.status.to_string(),
                    consent.map(|d| d.decision.clone()).unwrap_or_default(),
                )
            })
            .collect::<Vec<_>>()
    };
    let client = connect(front.clone(), Scripted::era(ProtocolVersion::V_2026_07_28)).await;
    let arguments = packing("Tokyo").as_object().unwrap().clone();
    let first = client
        .call_tool_once(CallToolRequestParams::new("call_tool").with_arguments(arguments.clone()))
        .await
        .unwrap();
    let CallToolResponse::InputRequired(pending) = first.clone() else {
        panic!("expected input_required: {first:?}")
    };
    let state = pending.request_state.unwrap();
    // The first round ran nothing and refused nothing: the call waits for the answer, and
    // its one record is written when it ends.
    let tool = "travel-advice.packing_advice";
    assert_eq!(audited(tool), []);
    assert_eq!(
        store
            .consent(&first_session(&store), "travel-advice")
            .unwrap(),
        None
    );
    let yes = allow_once();
    let retry = |state: String, arguments: serde_json::Map<String, serde_json::Value>| {
        CallToolRequestParams::new("call_tool")
            .with_arguments(arguments)
            .with_input_responses(yes.clone())
            .with_request_state(state)
    };
    // Another call's arguments with this state.
    let other = packing("Paris").as_object().unwrap().clone();
    let error = client
        .call_tool_once(retry(state.clone(), other))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("another call"), "{error}");
    // A forged state.
    let mut forged = state.clone();
    forged.pop();
    let error = client
        .call_tool_once(retry(forged, arguments.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("requestState"), "{error}");
    // The real one runs once; the same request again gets its stored answer, marked as
    // replayed, and runs nothing.
    let CallToolResponse::Complete(done) = client
        .call_tool_once(retry(state.clone(), arguments.clone()))
        .await
        .unwrap()
    else {
        panic!("expected a result")
    };
    assert_eq!(body(&done)["advice"], "pack for Tokyo");
    assert_eq!(audited(tool), [("ok".to_owned(), "allow".to_owned())]);
    let CallToolResponse::Complete(again) = client
        .call_tool_once(retry(state, arguments))
        .await
        .unwrap()
    else {
        panic!("expected the replayed result")
    };
    assert_eq!(body(&again), body(&done));
    // The whole result is given back (content, `isError`, `structuredContent`, `_meta`), only
    // marked replayed.
    let mut whole = serde_json::to_value(&again).unwrap();
    whole["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.quiver/replayed");
    assert_eq!(whole, serde_json::to_value(&done).unwrap());
    let meta = |r: &rmcp::model::CallToolResult| r.meta.clone().unwrap_or_default().0;
    assert_eq!(meta(&again)["io.quiver/replayed"], true);
    assert_eq!(
        meta(&again)["io.quiver/call"],
        meta(&done)["io.quiver/call"]
    );
    assert!(!meta(&done).contains_key("io.quiver/replayed"));
    assert_eq!(audited(tool), [("ok".to_owned(), "allow".to_owned())]);
}

/// A retry that reaches another process (a restart, another instance behind the same secret
/// and database) finds no call waiting there: it runs the call again with the answers sealed
/// in its state.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_in_another_process_runs_the_call_with_its_answers() {
    let dir = tempfile::tempdir().unwrap();
    let first = connect(
        front(dir.path()),
        Scripted::era(ProtocolVersion::V_2026_07_28),
    )
    .await;
    let arguments = packing("Oslo").as_object().unwrap().clone();
    let asked = first
        .call_tool_once(CallToolRequestParams::new("call_tool").with_arguments(arguments.clone()))
        .await
        .unwrap();
    let CallToolResponse::InputRequired(pending) = asked else {
        panic!("expected input_required: {asked:?}")
    };
    let yes = allow_once();
    let elsewhere = connect(
        front(dir.path()),
        Scripted::era(ProtocolVersion::V_2026_07_28),
    )
    .await;
    let retry = CallToolRequestParams::new("call_tool")
        .with_arguments(arguments)
        .with_input_responses(yes)
        .with_request_state(pending.request_state.unwrap());
    let CallToolResponse::Complete(done) = elsewhere.call_tool_once(retry).await.unwrap() else {
        panic!("expected a result")
    };
    assert_eq!(body(&done)["advice"], "pack for Oslo");
}

/// Issue 23 item 1: a client that cannot show questions is answered at once with what is
/// needed and the command that answers it; its retry of the same call finds the same card,
/// and runs once a person has answered (consent then holds for the conversation).
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_cannot_elicit_is_answered_at_once_and_its_retry_runs() {
    let dir = tempfile::tempdir().unwrap();
    // The operator's queue wait is long; nothing here may wait on it.
    let front = front_with(
        dir.path(),
        McpConfig {
            approval_wait: Duration::from_secs(60),
            ..McpConfig::default()
        },
    );
    let store = super::harness::state(dir.path());
    let script = Scripted {
        no_elicitation: true,
        ..Scripted::default()
    };
    let client = connect(front, script).await;
    let started = std::time::Instant::now();
    let asked = call(&client, "call_tool", packing("Tokyo")).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let said = body(&asked);
    let id = said["waiting_for"]["approval"].as_str().unwrap().to_owned();
    let error = said["error"].as_str().unwrap();
    assert!(
        error.contains("cannot show questions")
            && error.contains(&format!("quiver approvals approve {id}"))
            && error.contains("call `travel-advice__packing_advice` again with the same arguments"),
        "{error}"
    );
    assert_eq!(said["waiting_for"]["question"], "consent");
    // Retried before anyone answered: the same card, not a second one.
    let again = call(&client, "call_tool", packing("Tokyo")).await;
    assert_eq!(body(&again)["waiting_for"]["approval"], id.as_str());
    assert_eq!(store.pending_approvals(None).unwrap().len(), 1);
    // A person answers; the retry runs, and the conversation has the package's consent.
    store
        .answer_approval(&id, Decision::Approve, "owner", None)
        .unwrap();
    let ran = call(&client, "call_tool", packing("Tokyo")).await;
    assert_eq!(body(&ran)["advice"], "pack for Tokyo", "{:?}", body(&ran));
    let other = call(&client, "call_tool", packing("Paris")).await;
    assert_eq!(
        body(&other)["advice"],
        "pack for Paris",
        "{:?}",
        body(&other)
    );
    assert!(store.pending_approvals(None).unwrap().is_empty());
    let _ = handle(&ran);
}
