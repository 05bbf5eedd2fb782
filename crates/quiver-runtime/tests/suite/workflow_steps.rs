//! Workflow steps through the one call pipeline: a real Runtime, a real SQLite file and the
//! workflow Engine, with `WorkflowSteps` as its step runner (seed 000's rules for SOPs), and
//! `RunOps` answering a parked run.

use std::path::Path;
use std::sync::{Arc, Mutex};

use quiver_catalog::Catalog;
use quiver_package::rules::Role;
use quiver_policy::ControlPlane;
use quiver_policy::Principal;
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::{
    Answerer, ApproverSet, RunError, RunOps, Runtime, RuntimeConfig, WorkflowSteps,
};
use quiver_store::SqliteStore;
use quiver_store::WorkflowStore;
use quiver_store::workflow::{Run, RunStatus, WaitKind, WaitStatus};
use quiver_workflow::{Definition, Engine, Question, Start, SystemClock};
use serde_json::{Value, json};

use quiver_runtime::approver::Answer;
use quiver_runtime::{CallStatus, Profile, SessionRequest};

use super::common::{Scripted, owner, write};

/// Each tool call: the tool, its arguments and the idempotency key of its call context.
type Calls = Arc<Mutex<Vec<(String, Value, String)>>>;

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    store: SqliteStore,
    calls: Calls,
    person: Arc<Scripted>,
    db: std::path::PathBuf,
}

fn packages(root: &Path) {
    write(
        root,
        "ledger/quiver.yaml",
        "id: ledger\ndescription: A ledger\n",
    );
    write(
        root,
        "ledger/tools/record/tool.yaml",
        "description: Record an amount (private)\ncategory: action\napproval: never\ninput: {type: object, properties: {amount: {type: integer}}, required: [amount]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "ledger/tools/wipe/tool.yaml",
        "description: Wipe the ledger\ncategory: action\nexpose: true\nrisk: dangerous\nrisk_category: member\napproval: human\nrun: {command: [a]}\n",
    );
    write(
        root,
        "ledger/workflows/book.yaml",
        "description: Book an amount\nsteps:\n  - id: rec\n    tool: record\n    with: {amount: '{{ input.amount }}'}\noutput: '{{ steps.rec.output }}'\n",
    );
    write(
        root,
        "ledger/workflows/clear.yaml",
        "description: Clear the ledger\nsteps:\n  - id: wipe\n    tool: wipe\n",
    );
    write(
        root,
        "ledger/workflows/pay.yaml",
        "description: Pay an amount\nexpose: true\ninput: {type: object, properties: {amount: {type: integer}}, required: [amount]}\nsteps:\n  - id: rec\n    tool: record\n    with: {amount: '{{ input.amount }}'}\noutput: {paid: '{{ steps.rec.output.booked.amount }}'}\n",
    );
    write(
        root,
        "ledger/workflows/review.yaml",
        "description: Book after a review\nexpose: true\nsteps:\n  - id: ok\n    approval: Book it?\n  - id: rec\n    tool: record\n    with: {amount: 1}\n",
    );
    write(
        root,
        "ledger/workflows/purge.yaml",
        "description: Wipe the ledger\nexpose: true\nsteps:\n  - id: wipe\n    tool: wipe\n",
    );
    write(
        root,
        "other/quiver.yaml",
        "id: other\ndescription: Another package\nrequires:\n  packages: [ledger]\n",
    );
    write(
        root,
        "other/workflows/steal.yaml",
        "description: Calls another package's private tool\nsteps:\n  - id: rec\n    tool: ledger.record\n    with: {amount: 5}\n",
    );
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    packages(&root);
    let catalog = Catalog::load_dirs(&[&root]);
    assert!(
        catalog.diagnostics().iter().all(|d| !d.is_error()),
        "{:#?}",
        catalog.diagnostics()
    );
    let db = dir.path().join("state.db");
    let calls: Calls = Arc::default();
    let mut executor = BuiltinExecutor::new();
    for tool in ["ledger.record", "ledger.wipe"] {
        let calls = calls.clone();
        executor.register(
            tool,
            Arc::new(move |args: &Value, ctx| {
                calls.lock().unwrap().push((
                    tool.to_owned(),
                    args.clone(),
                    ctx.idempotency_key.clone(),
                ));
                Ok(json!({"booked": args}))
            }),
        );
    }
    // The person of the runtime is there, yet an unattended run must not ask anyone.
    let person = Arc::new(Scripted::default());
    let approvers = ApproverSet {
        person: Some(person.clone()),
        console: None,
        reviewer: None,
    };
    let runtime = Runtime::new(
        catalog,
        Arc::new(SqliteStore::open(&db).unwrap()),
        Arc::new(executor),
        approvers,
        RuntimeConfig::default(),
    );
    Fixture {
        _dir: dir,
        runtime,
        store: SqliteStore::open(&db).unwrap(),
        calls,
        person,
        db,
    }
}

impl Fixture {
    /// Pins `pkg.workflow`, starts an unattended run of it with `input` and drives it.
    fn run(&self, package: &str, workflow: &str, input: Value) -> Run {
        let catalog = self.runtime.catalog();
        let pkg = &catalog
            .packages()
            .iter()
            .find(|p| p.package.id.as_str() == package)
            .unwrap()
            .package;
        let wf = pkg
            .workflows
            .iter()
            .find(|w| w.name.as_str() == workflow)
            .unwrap();
        let steps = WorkflowSteps::new(&self.runtime);
        let engine = Engine::new(&self.store, &steps, &SystemClock);
        let digest = engine.pin(&Definition::new(pkg, wf, &|_| None)).unwrap();
        let start = Start {
            input,
            trigger: json!({"kind": "schedule"}),
            principal: json!({"user_id": "owner", "role": "master"}),
            started_by: "scheduler".into(),
            attended: false,
            settings: json!({}),
            key: None,
        };
        let (run, _) = engine.start(&digest, &start).unwrap();
        engine.drive(&run.id).unwrap()
    }

    fn calls(&self) -> Vec<(String, Value, String)> {
        self.calls.lock().unwrap().clone()
    }
}

#[test]
fn a_workflow_runs_its_own_packages_private_tool_without_a_consent_question() {
    let f = fixture();
    let run = f.run("ledger", "book", json!({"amount": 3}));
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    assert_eq!(run.output, Some(json!({"booked": {"amount": 3}})));
    let calls = f.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "ledger.record");
}

#[test]
fn another_packages_workflow_calling_a_private_tool_is_refused() {
    let f = fixture();
    let run = f.run("other", "steal", json!({}));
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert!(
        run.error.as_deref().unwrap_or_default().contains("refused"),
        "{run:?}"
    );
    assert!(f.calls().is_empty(), "nothing ran");
}

#[test]
fn the_emergency_stop_refuses_a_step() {
    let f = fixture();
    f.runtime
        .set_control(
            ControlPlane {
                emergency_stop: true,
                ..ControlPlane::default()
            },
            "operator",
        )
        .unwrap();
    let run = f.run("ledger", "book", json!({"amount": 1}));
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert!(f.calls().is_empty(), "nothing ran");
}

#[test]
fn a_dangerous_tool_parks_the_unattended_run_with_the_exact_arguments() {
    let f = fixture();
    let run = f.run("ledger", "clear", json!({}));
    assert_eq!(run.status, RunStatus::Waiting, "{run:?}");
    assert!(f.calls().is_empty(), "nothing ran before a person answers");
    let waits = f.store.waits(&run.id).unwrap();
    let wait = waits
        .iter()
        .find(|w| w.kind == WaitKind::Approval && w.status == WaitStatus::Pending)
        .expect("an approval wait");
    let card = &wait.detail["card"];
    assert_eq!(card["tool"], "ledger.wipe");
    assert_eq!(card["arguments"], json!({}));
    assert_eq!(card["dangerous"], true);
    // A person's yes runs the call as the next attempt, with that answer.
    let steps = WorkflowSteps::new(&f.runtime);
    let engine = Engine::new(&f.store, &steps, &SystemClock);
    let run = engine.answer(&run.id, true, "alice", None).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn the_steps_idempotency_key_reaches_the_tool() {
    let f = fixture();
    let run = f.run("ledger", "book", json!({"amount": 2}));
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    let calls = f.calls();
    assert_eq!(calls[0].2, format!("{}:rec", run.id), "{calls:?}");
}

impl Fixture {
    /// A turn of a new interactive session whose runtime runs workflows on the same file.
    fn call_workflow(&self, name: &str, arguments: Value) -> quiver_runtime::CallOutcome {
        self.runtime
            .set_workflow_store(Arc::new(SqliteStore::open(&self.db).unwrap()));
        let session = self
            .runtime
            .create_session(&SessionRequest {
                origin: quiver_policy::Origin::default(),
                agent: "chat".into(),
                principal: owner(),
                profile: Profile::Interactive,
            })
            .unwrap();
        // Consent to package `ledger` for the model's call of its workflow.
        self.person.answer(&[Answer::AllowForSession]);
        let mut turn = self.runtime.begin_turn(&session, owner(), "").unwrap();
        turn.call(name, arguments).unwrap()
    }
}

#[test]
fn calling_an_exposed_workflow_returns_its_output_when_the_run_ends() {
    let f = fixture();
    let out = f.call_workflow("ledger__pay", json!({"amount": 4}));
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(out.content, json!({"paid": 4}));
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn calling_a_workflow_that_waits_returns_its_run_id_and_status() {
    let f = fixture();
    let out = f.call_workflow("ledger__review", json!({}));
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(out.content["status"], "waiting", "{out:?}");
    let run_id = out.content["run_id"].as_str().unwrap();
    let run = f.store.run(run_id).unwrap().unwrap();
    assert_eq!(run.workflow, "ledger.review");
    assert!(f.calls().is_empty(), "nothing booked before the approval");
}

#[test]
fn a_workflow_input_that_does_not_fit_its_schema_starts_nothing() {
    let f = fixture();
    let out = f.call_workflow("ledger__pay", json!({"amount": "four"}));
    assert_eq!(out.status, CallStatus::Invalid, "{out:?}");
    assert!(f.calls().is_empty());
}

#[test]
fn run_ops_need_a_workflow_store() {
    let f = fixture();
    assert!(matches!(RunOps::new(&f.runtime), Err(RunError::NoEngine)));
}

#[test]
fn a_parked_dangerous_call_is_answered_by_a_named_person() {
    let f = fixture();
    f.runtime
        .set_workflow_store(Arc::new(SqliteStore::open(&f.db).unwrap()));
    let run = f.run("ledger", "clear", json!({}));
    assert_eq!(run.status, RunStatus::Waiting, "{run:?}");
    let ops = RunOps::new(&f.runtime).unwrap();
    let parked = ops.parked().unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].question, Question::Call);
    let card = parked[0].card.clone().unwrap();
    assert_eq!(
        (&card["dangerous"], &card["human"]),
        (&json!(true), &json!(true))
    );
    assert!(parked[0].needs_a_named_person());
    fn answerer(principal: &Principal) -> Answerer<'_> {
        Answerer {
            principal,
            authenticated: true,
        }
    }
    let refused = |who: Principal, want: &str| {
        let err = ops
            .answer(&run.id, true, &answerer(&who), None)
            .unwrap_err();
        assert!(matches!(err, RunError::Refused(_)), "{err:?}");
        assert!(err.to_string().contains(want), "{err}");
    };
    refused(Principal::anonymous(), "anonymous");
    assert!(f.calls().is_empty(), "nothing ran on a refused answer");
    let alice = Principal::user("alice", Role::User);
    let done = ops.answer(&run.id, true, &answerer(&alice), None).unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(f.calls().len(), 1);
    refused(
        Principal::user("bob", Role::User),
        "already answered by alice",
    );
    assert!(ops.parked().unwrap().is_empty());
}

/// Issue 22 item 5: the person waiting on an attended run does not answer its dangerous step
/// (no terminal, a timeout): the run parks for a person instead of failing the step.
#[test]
fn an_attended_runs_unanswered_question_parks_the_run() {
    let f = fixture();
    f.person
        .answer(&[Answer::AllowForSession, Answer::TimedOut]);
    let out = f.call_workflow("ledger__purge", json!({}));
    assert_eq!(out.status, CallStatus::Ok, "{out:?}");
    assert_eq!(out.content["status"], "waiting", "{out:?}");
    assert!(f.calls().is_empty(), "nothing ran");
    let ops = RunOps::new(&f.runtime).unwrap();
    let parked = ops.parked().unwrap();
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].question, Question::Call);
}

/// An attended run driven by a front whose runtime has a person of its own (`quiver run` at a
/// terminal) asks that person, as before: only a run nobody waits on parks.
#[test]
fn an_attended_run_asks_the_runtimes_own_person() {
    let f = fixture();
    f.runtime
        .set_workflow_store(Arc::new(SqliteStore::open(&f.db).unwrap()));
    let ops = RunOps::new(&f.runtime).unwrap();
    let (run, _) = ops
        .start(
            "ledger.clear",
            &owner(),
            json!({}),
            json!({"kind": "manual"}),
            true,
            None,
        )
        .unwrap();
    f.person.answer(&[Answer::Allow]);
    let run = ops.drive(&run.id).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.person.cards().len(), 1, "the dangerous call was asked");
}
