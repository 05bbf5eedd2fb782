//! The fixed tool list and the meta-tools through a real client.

use serde_json::json;

use super::harness::{Scripted, body, call, connect, front, handle};

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_list_is_fixed_and_annotated() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let before = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = before.iter().map(|t| t.name.as_ref()).collect();
    // The examples declare no `always_loaded` tool, so the list is the three meta-tools.
    assert_eq!(names, ["read_skill", "tool_search", "call_tool"]);
    let hints: Vec<(Option<bool>, Option<bool>)> = before
        .iter()
        .map(|t| {
            let a = t.annotations.as_ref().unwrap();
            (a.read_only_hint, a.destructive_hint)
        })
        .collect();
    assert_eq!(
        hints,
        [
            (Some(true), None),
            (Some(true), None),
            (Some(false), Some(true))
        ]
    );
    // Searching loads tools in the session, but the list a client sees does not change.
    let found = call(&client, "tool_search", json!({"query": "北京明天多少度"})).await;
    assert_eq!(body(&found)["results"][0]["name"], "weather__forecast");
    let after = client.list_all_tools().await.unwrap();
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_is_one_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let first = call(&client, "read_skill", json!({"id": "weather"})).await;
    assert_eq!(body(&first)["status"], "activated");
    let second = call(&client, "read_skill", json!({"id": "weather"})).await;
    assert!(
        body(&second)["status"]
            .as_str()
            .unwrap()
            .contains("already active")
    );
    assert_eq!(handle(&first), handle(&second));
    let missing = call(&client, "read_skill", json!({"id": "no-such-skill"})).await;
    assert_eq!(missing.is_error, Some(true));
    assert_eq!(body(&missing)["error"], "no such skill: no-such-skill");
}

/// Issue 12 defect 8: a new client on a conversation's handle has not seen an active skill's
/// instructions, so it gets them again; within its own connection it is told they are above.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_client_on_a_handle_gets_an_active_skills_instructions_again() {
    let dir = tempfile::tempdir().unwrap();
    let front = front(dir.path());
    let first_client = connect(front.clone(), Scripted::default()).await;
    let first = call(&first_client, "read_skill", json!({"id": "weather"})).await;
    assert_eq!(body(&first)["status"], "activated");
    let conversation = handle(&first);
    let second_client = connect(front, Scripted::default()).await;
    let read = |client| {
        let conversation = conversation.clone();
        async move {
            body(
                &call(
                    client,
                    "read_skill",
                    json!({"id": "weather", "conversation": conversation}),
                )
                .await,
            )
        }
    };
    let again = read(&second_client).await;
    assert_eq!(again["status"], "active", "{again}");
    assert!(
        again["instructions"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    let third = read(&second_client).await;
    assert!(
        third["status"].as_str().unwrap().contains("already active"),
        "{third}"
    );
    assert!(third.get("instructions").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_tool_is_a_protocol_error_but_inside_call_tool_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    // The client named a tool that is not there: JSON-RPC -32602, as MCP's tools chapter says.
    let error = client
        .call_tool(rmcp::model::CallToolRequestParams::new("no_such_tool"))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("not a JSON-RPC error: {error}")
    };
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert_eq!(error.message, "Unknown tool: no_such_tool");
    // The model named it through `call_tool`: a result it can read and recover from.
    let inner = call(
        &client,
        "call_tool",
        json!({"name": "no_such_tool", "arguments": {}}),
    )
    .await;
    assert_eq!(inner.is_error, Some(true));
    assert_eq!(body(&inner)["error"], "unknown tool: no_such_tool");
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let cases = [
        ("v1.e30.AAAA", "signature does not match"),
        ("garbage", "malformed token"),
    ];
    for (bad, want) in cases {
        let error = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("tool_search").with_arguments(
                    json!({"query": "x", "conversation": bad})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(want), "{bad}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handle_is_only_its_users() {
    use quiver_mcp::front::{Asker, CallRequest, CallResult, Caller, ConnectionSlot, FrontError};
    use quiver_package::rules::Role;
    use quiver_policy::Principal;

    let dir = tempfile::tempdir().unwrap();
    let front = front(dir.path());
    let alice = Caller::local(Principal::user("alice", Role::User));
    let bob = Caller::local(Principal::user("bob", Role::User));
    let search = |handle: Option<String>| CallRequest {
        name: "tool_search".into(),
        arguments: json!({"query": "weather"}),
        handle,
        resume: None,
        turn: None,
    };
    let stateless = std::sync::Arc::new(ConnectionSlot::stateless());
    let CallResult::Done { handle, .. } = front
        .call(&alice, &stateless, search(None), Asker::Deferred)
        .await
        .unwrap()
    else {
        panic!("a result")
    };
    // Alice continues her conversation; Bob cannot join it.
    let CallResult::Done { handle: again, .. } = front
        .call(
            &alice,
            &stateless,
            search(Some(handle.clone())),
            Asker::Deferred,
        )
        .await
        .unwrap()
    else {
        panic!("a result")
    };
    assert_eq!(handle, again);
    let error = front
        .call(
            &bob,
            &stateless,
            search(Some(handle.clone())),
            Asker::Deferred,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, FrontError::BadHandle(why) if why.contains("another user")),
        "{error}"
    );
    // An ended conversation's handle is refused.
    let CallResult::Done { outcome, .. } = front
        .call(
            &alice,
            &stateless,
            search(Some(handle.clone())),
            Asker::Deferred,
        )
        .await
        .unwrap()
    else {
        panic!("a result")
    };
    let session = super::harness::state(dir.path())
        .list_sessions(&Default::default())
        .unwrap();
    assert!(!session.is_empty() && outcome.call_id.starts_with("call"));
    for s in session {
        front.runtime().end_session(&s.id).unwrap();
    }
    let error = front
        .call(&alice, &stateless, search(Some(handle)), Asker::Deferred)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("has ended"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriptions_listen_is_acknowledged() {
    use rmcp::model::{ProtocolVersion, SubscriptionFilter};

    let dir = tempfile::tempdir().unwrap();
    let client = connect(
        front(dir.path()),
        Scripted::era(ProtocolVersion::V_2026_07_28),
    )
    .await;
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    // Acknowledged (not "method not found"), reduced to what the server advertises: the tool
    // list never changes, so there is nothing to subscribe to.
    let subscription = client.peer().listen(filter).await.unwrap();
    assert_eq!(subscription.acknowledged(), &SubscriptionFilter::new());
}

/// Issue 13 item 12: a stateless request that never comes back leaves no row; a conversation
/// in use is kept.
#[tokio::test(flavor = "multi_thread")]
async fn idle_conversations_are_deleted_and_ones_in_use_are_kept() {
    use quiver_mcp::config::McpConfig;
    use quiver_mcp::front::{Asker, CallRequest, CallResult, Caller, ConnectionSlot};
    use quiver_package::rules::Role;
    use quiver_policy::Principal;
    use quiver_store::SessionFilter;

    let dir = tempfile::tempdir().unwrap();
    let idle = std::time::Duration::from_millis(400);
    let front = super::harness::front_with(
        dir.path(),
        McpConfig {
            conversation_idle: idle,
            ..McpConfig::default()
        },
    );
    let alice = Caller::local(Principal::user("alice", Role::User));
    let stateless = std::sync::Arc::new(ConnectionSlot::stateless());
    let search = |handle: Option<String>| {
        let front = front.clone();
        let alice = alice.clone();
        let stateless = &stateless;
        async move {
            let request = CallRequest {
                name: "tool_search".into(),
                arguments: json!({"query": "weather"}),
                handle,
                resume: None,
                turn: None,
            };
            match front
                .call(&alice, stateless, request, Asker::Deferred)
                .await
            {
                Ok(CallResult::Done { handle, .. }) => Ok(handle),
                Ok(_) => panic!("a result"),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let rows = || {
        super::harness::state(dir.path())
            .list_sessions(&SessionFilter::default())
            .unwrap()
            .len()
    };
    let forgotten = search(None).await.unwrap();
    let kept = search(None).await.unwrap();
    assert_eq!(rows(), 2);
    // `kept` is used every 150 ms (each use past half the idle time marks it); `forgotten`
    // never again.
    for _ in 0..4 {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        assert_eq!(search(Some(kept.clone())).await.unwrap(), kept);
    }
    // The next new conversation looks for idle ones.
    search(None).await.unwrap();
    assert_eq!(rows(), 2, "the forgotten conversation's row is gone");
    let ended = search(Some(forgotten)).await.unwrap_err();
    assert!(ended.contains("has ended"), "{ended}");
    assert_eq!(search(Some(kept.clone())).await.unwrap(), kept);
}

/// Issue 22 item 21: a conversation a stateless request started without a handle is kept
/// for `provisional_idle` only, unless a request names it again; then it lasts as long as
/// any conversation.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_conversation_never_named_again_is_deleted_soon() {
    use quiver_mcp::config::McpConfig;
    use quiver_mcp::front::{Asker, CallRequest, CallResult, Caller, ConnectionSlot};
    use quiver_package::rules::Role;
    use quiver_policy::Principal;

    let dir = tempfile::tempdir().unwrap();
    let front = super::harness::front_with(
        dir.path(),
        McpConfig {
            conversation_idle: std::time::Duration::from_secs(60),
            provisional_idle: std::time::Duration::from_millis(100),
            ..McpConfig::default()
        },
    );
    let alice = Caller::local(Principal::user("alice", Role::User));
    let stateless = std::sync::Arc::new(ConnectionSlot::stateless());
    let search = |handle: Option<String>| {
        let front = front.clone();
        let alice = alice.clone();
        let stateless = &stateless;
        async move {
            let request = CallRequest {
                name: "tool_search".into(),
                arguments: json!({"query": "weather"}),
                handle,
                resume: None,
                turn: None,
            };
            match front
                .call(&alice, stateless, request, Asker::Deferred)
                .await
            {
                Ok(CallResult::Done { handle, .. }) => Ok(handle),
                Ok(_) => panic!("a result"),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let once = search(None).await.unwrap();
    let continued = search(None).await.unwrap();
    assert_eq!(search(Some(continued.clone())).await.unwrap(), continued);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // The next new conversation looks for expired ones: `once` goes, `continued` stays.
    search(None).await.unwrap();
    let rows = super::harness::state(dir.path())
        .list_sessions(&quiver_store::SessionFilter::default())
        .unwrap()
        .len();
    assert_eq!(rows, 2);
    let ended = search(Some(once)).await.unwrap_err();
    assert!(ended.contains("has ended"), "{ended}");
    assert_eq!(search(Some(continued.clone())).await.unwrap(), continued);
}

/// Issue 22 item 11: the MCP front's idle cleanup ends the skills still active in a deleted
/// conversation with a `skill_ended` record each.
#[tokio::test(flavor = "multi_thread")]
async fn idle_cleanup_ends_active_skills_on_the_record() {
    use quiver_mcp::config::McpConfig;
    use quiver_mcp::front::{Asker, CallRequest, CallResult, Caller, ConnectionSlot};
    use quiver_package::rules::Role;
    use quiver_policy::Principal;
    use quiver_store::{AuditKind, AuditQuery};

    let dir = tempfile::tempdir().unwrap();
    let front = super::harness::front_with(
        dir.path(),
        McpConfig {
            conversation_idle: std::time::Duration::from_millis(200),
            ..McpConfig::default()
        },
    );
    let alice = Caller::local(Principal::user("alice", Role::User));
    let stateless = std::sync::Arc::new(ConnectionSlot::stateless());
    let call = |name: &str, arguments: serde_json::Value| {
        let request = CallRequest {
            name: name.into(),
            arguments,
            handle: None,
            resume: None,
            turn: None,
        };
        let front = front.clone();
        let alice = alice.clone();
        let stateless = &stateless;
        async move {
            match front
                .call(&alice, stateless, request, Asker::Deferred)
                .await
            {
                Ok(CallResult::Done { .. }) => {}
                _ => panic!("a result"),
            }
        }
    };
    call("read_skill", json!({"id": "weather"})).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // A new conversation looks for idle ones.
    call("tool_search", json!({"query": "weather"})).await;
    let ended = super::harness::state(dir.path())
        .query_audit(&AuditQuery {
            kind: Some(AuditKind::SkillEnded),
            ..AuditQuery::default()
        })
        .unwrap();
    let skills: Vec<(Option<&str>, String)> = ended
        .iter()
        .map(|r| {
            let why = r.entry.detail.as_ref().unwrap()["why"].to_string();
            (r.entry.skill.as_deref(), why)
        })
        .collect();
    assert_eq!(
        skills,
        [(Some("weather"), "\"idle session deleted\"".to_owned())]
    );
}
