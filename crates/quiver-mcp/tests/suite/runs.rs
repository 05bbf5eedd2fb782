//! `get_run` through a real rmcp client: calling an exposed workflow that parks on an approval
//! returns `{run_id, status}`; `get_run` then reads the waiting run and, once a person
//! approved, its output. Only the user who started it and the owner read it.

use std::path::Path;
use std::sync::Arc;

use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_mcp::{Front, McpConfig};
use quiver_package::rules::Role;
use quiver_policy::Principal;
use quiver_runtime::{ApproverSet, Runtime, RuntimeConfig, WorkflowSteps};
use quiver_store::SqliteStore;
use quiver_workflow::{Engine, SystemClock};
use serde_json::{Value, json};

use quiver_runtime::executor::BuiltinExecutor;

use super::harness::{Scripted, body, call, connect};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A runtime over the package `flows`, whose exposed workflow `review` drafts a text with the
/// package's own tool and then waits for a person's approval; runs live in its SQLite file.
fn runtime(dir: &Path) -> Arc<Runtime> {
    let root = dir.join("packages");
    write(
        &root,
        "flows/quiver.yaml",
        "id: flows\ndescription: Reviews\n",
    );
    write(
        &root,
        "flows/tools/draft/tool.yaml",
        "description: Drafts a text\ncategory: perception\ninput: {type: object, properties: {text: {type: string}}}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        &root,
        "flows/workflows/review.yaml",
        "description: Drafts a text, then waits for a reviewer\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: draft\n    tool: draft\n    with: {text: '{{ input.text }}'}\n  - id: ok\n    approval: 'Publish {{ input.text }}?'\noutput: {published: '{{ steps.draft.output.drafted }}'}\n",
    );
    write(
        &root,
        "flows/tools/send/tool.yaml",
        "description: Sends a text\ncategory: action\napproval: always\ninput: {type: object, properties: {text: {type: string}}}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        &root,
        "flows/workflows/notify.yaml",
        "description: Sends a text once someone says yes\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: send\n    tool: send\n    with: {text: '{{ input.text }}'}\noutput: {sent: '{{ steps.send.output.sent }}'}\n",
    );
    let roots = [Root {
        path: root,
        scope: Scope::Project,
    }];
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let store = Arc::new(SqliteStore::open(dir.join("state.db")).unwrap());
    let mut executor = BuiltinExecutor::new();
    executor.register(
        "flows.draft",
        Arc::new(|args, _ctx| Ok(json!({"drafted": args["text"]}))),
    );
    executor.register(
        "flows.send",
        Arc::new(|args, _ctx| Ok(json!({"sent": args["text"]}))),
    );
    let runtime = Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        ApproverSet::default(),
        RuntimeConfig::default(),
    );
    runtime.set_workflow_store(store);
    Arc::new(runtime)
}

fn front_for(runtime: &Arc<Runtime>, principal: Principal) -> Arc<Front> {
    let config = McpConfig {
        stdio_principal: principal,
        ..McpConfig::default()
    };
    Arc::new(Front::new(runtime.clone(), config, vec![0x42; 32]))
}

#[tokio::test(flavor = "multi_thread")]
async fn get_run_reads_a_parked_run_and_later_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let alice = Scripted::default();
    let client = connect(
        front_for(&runtime, Principal::user("alice", Role::Trusted)),
        alice.clone(),
    )
    .await;
    let tools = client.list_all_tools().await.unwrap();
    let listed: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(listed.contains(&"get_run"), "{listed:?}");
    // The package's consent (the workflow's own tool step needs none of its own).
    alice.answer("accept", Some("allow_conversation"));
    let started = call(
        &client,
        "call_tool",
        json!({"name": "flows__review", "arguments": {"text": "hello"}}),
    )
    .await;
    let started = body(&started);
    assert_eq!(started["status"], "waiting", "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();

    // Read directly, and through `call_tool`.
    let read = call(&client, "get_run", json!({"run_id": run_id})).await;
    assert_ne!(read.is_error, Some(true), "{read:?}");
    let read = body(&read);
    assert_eq!(read["status"], "waiting");
    assert_eq!(read["workflow"], "flows.review");
    assert_eq!(read["waiting_for"][0]["kind"], "approval");
    assert_eq!(read["waiting_for"][0]["what"]["title"], "Publish hello?");
    assert!(read.get("output").is_none());
    let through = call(
        &client,
        "call_tool",
        json!({"name": "get_run", "arguments": {"run_id": run_id}}),
    )
    .await;
    assert_eq!(body(&through)["status"], "waiting");

    // Another user, and an anonymous one, do not see it; the owner does.
    let others = [
        Principal::user("bob", Role::Trusted),
        Principal::anonymous(),
    ];
    for principal in others {
        let other = connect(front_for(&runtime, principal), Scripted::default()).await;
        let refused = call(&other, "get_run", json!({"run_id": run_id})).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(
            body(&refused)["error"].as_str().unwrap().contains("no run"),
            "{:?}",
            body(&refused)
        );
    }
    let owner = connect(
        front_for(&runtime, Principal::user("root", Role::Master)),
        Scripted::default(),
    )
    .await;
    assert_eq!(
        body(&call(&owner, "get_run", json!({"run_id": run_id})).await)["status"],
        "waiting"
    );

    // A reviewer approves (as the console or the CLI would); the run completes.
    let done = tokio::task::spawn_blocking({
        let (runtime, run_id) = (runtime.clone(), run_id.clone());
        move || {
            let steps = WorkflowSteps::new(&runtime);
            let store = runtime.workflow_store().unwrap();
            Engine::new(store.as_ref(), &steps, &SystemClock)
                .answer(&run_id, true, "carol", None)
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(done.status.as_str(), "completed");
    let read = body(&call(&client, "get_run", json!({"run_id": run_id})).await);
    assert_eq!(read["status"], "completed");
    assert_eq!(read["output"], json!({"published": "hello"}));
    assert!(read.get("waiting_for").is_none());

    let missing = call(&client, "get_run", json!({"run_id": "run-nothing"})).await;
    assert_eq!(missing.is_error, Some(true));
    let no_id = call(&client, "get_run", json!({})).await;
    assert_eq!(no_id.is_error, Some(true));
    assert_eq!(
        body(&no_id)["error"],
        Value::String("`get_run` needs `run_id`: the `run_id` a call returned".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_attended_runs_question_reaches_the_client_that_called_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let alice = Scripted::default();
    let client = connect(
        front_for(&runtime, Principal::user("alice", Role::Trusted)),
        alice.clone(),
    )
    .await;
    let notify = json!({"name": "flows__notify", "arguments": {"text": "hi"}});
    // The package's consent, then the `always` tool's approval inside the run: both asked of
    // the client whose call waits on the run.
    alice.answer("accept", Some("allow_conversation"));
    alice.answer("accept", Some("allow_once"));
    let done = body(&call(&client, "call_tool", notify.clone()).await);
    assert_eq!(done, json!({"sent": "hi"}), "{done}");
    let asked = alice.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].contains("flows.send"), "{}", asked[1]);

    // A no ends the run's step without running the tool.
    alice.answer("decline", None);
    let refused = call(&client, "call_tool", notify).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert_eq!(alice.asked().len(), 3);
}

/// Issue 22 item 16: two exposed workflows of two packages that call each other, called once
/// over MCP, started runs without bound (1,349 in 30 s). Now the chain stops at the nesting
/// bound: the ninth nested call is refused, each run of the chain fails, and the call reads
/// that error.
#[tokio::test(flavor = "multi_thread")]
async fn workflows_that_call_each_other_stop_at_the_nesting_bound() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    for (me, other) in [("ping", "pong"), ("pong", "ping")] {
        write(
            &root,
            &format!("{me}/quiver.yaml"),
            &format!("id: {me}\ndescription: Calls {other}\nrequires:\n  packages: [{other}]\n"),
        );
        write(
            &root,
            &format!("{me}/workflows/go.yaml"),
            &format!(
                "description: Calls {other}.go\nexpose: true\nsteps:\n  - id: call\n    tool: {other}.go\n"
            ),
        );
    }
    let catalog = Catalog::load(
        &[Root {
            path: root,
            scope: Scope::Project,
        }],
        &CatalogOptions::default(),
    );
    let store = Arc::new(SqliteStore::open(dir.path().join("state.db")).unwrap());
    let runtime = Runtime::new(
        catalog,
        store.clone(),
        Arc::new(BuiltinExecutor::new()),
        ApproverSet::default(),
        RuntimeConfig::default(),
    );
    runtime.set_workflow_store(store.clone());
    let runtime = Arc::new(runtime);
    let alice = Scripted::default();
    let client = connect(
        front_for(&runtime, Principal::user("alice", Role::Trusted)),
        alice.clone(),
    )
    .await;
    // The consent of each package in each run's session: asked of the client that waits.
    for _ in 0..12 {
        alice.answer("accept", Some("allow_conversation"));
    }
    let called = call(
        &client,
        "call_tool",
        json!({"name": "ping__go", "arguments": {}}),
    )
    .await;
    assert_eq!(called.is_error, Some(true), "{called:?}");
    let error = body(&called)["error"].as_str().unwrap().to_owned();
    assert!(error.contains("nest at most 8 deep"), "{error}");
    let runs = quiver_store::WorkflowStore::runs(store.as_ref(), &Default::default()).unwrap();
    assert_eq!(runs.len(), 9, "{runs:?}");
    assert!(
        runs.iter().all(|r| r.status.as_str() == "failed"),
        "{runs:?}"
    );
}
