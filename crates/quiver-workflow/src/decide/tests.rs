//! The state machine on whole values: a stored state in, the next commit out.

use std::path::Path;

use serde_json::{Value, json};

use quiver_package::workflow::{WorkflowScope, parse_workflow};
use quiver_store::workflow::{Attempt, AttemptStatus, Run, RunStatus};

use super::*;
use crate::definition::StepMeta;

const FLOW: &str = "description: d
timeout: 1h
steps:
  - id: read
    tool: x.read
    with: {q: '{{ input.q }}'}
  - id: gate
    if: input.go
    approval: {title: 'ok {{ steps.read.output }}?', timeout: 10m}
  - id: write
    tool: x.write
  - id: pause
    wait: 5m
output: '{{ steps.write.output }}'
";

fn def() -> Definition {
    let (w, d) = parse_workflow(
        FLOW,
        Path::new("w.yaml"),
        "w".parse().unwrap(),
        &WorkflowScope::default(),
    );
    let w = w.unwrap_or_else(|| panic!("{d:?}"));
    let meta = |target: Option<&str>, safe| StepMeta {
        target: target.map(str::to_owned),
        rerun_safe: safe,
    };
    Definition {
        package: "p".into(),
        steps: vec![
            meta(Some("x.read"), true),
            meta(None, true),
            meta(Some("x.write"), false),
            meta(None, true),
        ],
        workflow: w,
        packages: Default::default(),
    }
}

fn run(status: RunStatus, step: i64, attempt: i64, crashes: i64) -> Run {
    Run {
        id: "r".into(),
        workflow: "p.w".into(),
        digest: "d".into(),
        idempotency_key: None,
        status,
        step,
        attempt,
        crashes,
        input: json!({"q": "hi", "go": true}),
        trigger: json!({}),
        principal: json!({}),
        started_by: "alice".into(),
        attended: false,
        settings: json!({}),
        concurrency_key: None,
        output: None,
        error: None,
        created_at: 0,
        updated_at: 0,
        deadline: Some(3_600_000),
        lease: None,
        epoch: 0,
    }
}

fn attempt(step: i64, attempt: i64, id: &str, status: AttemptStatus, output: Value) -> Attempt {
    Attempt {
        run_id: "r".into(),
        step,
        attempt,
        step_id: id.into(),
        idempotency_key: format!("r:{id}"),
        status,
        output: (!output.is_null()).then_some(output),
        error: None,
        started_at: 0,
        finished_at: None,
        process: None,
    }
}

/// The decision in a few words: `idle`, `call <step> #<attempt> <arguments>` or
/// `commit <status> <step>/<attempt> [<attempt writes>] (+wait)`.
fn describe(next: &Next) -> String {
    let writes = |a: &Advance| {
        a.attempts
            .iter()
            .map(|w| format!("{}#{}={}", w.step_id, w.attempt, w.status))
            .collect::<Vec<_>>()
            .join(",")
    };
    match next {
        Next::Idle => "idle".into(),
        Next::Call { start, call } => format!(
            "call {}#{} {} [{}]",
            call.step_id,
            call.attempt,
            call.arguments,
            writes(start)
        ),
        Next::Commit(a) => format!(
            "commit {} {}/{} [{}]{}{}",
            a.to.status,
            a.to.step,
            a.to.attempt,
            writes(a),
            a.wait.as_ref().map_or(String::new(), |w| format!(
                " +{}@{}",
                w.kind,
                w.wake_at.unwrap_or(-1)
            )),
            a.to.output
                .as_ref()
                .map_or(String::new(), |o| format!(" ={o}")),
        ),
    }
}

#[test]
fn decisions() {
    use AttemptStatus as A;
    use RunStatus as R;
    let def = def();
    let read_ok = attempt(0, 1, "read", A::Ok, json!("notes"));
    let cases: Vec<(&str, Run, Vec<Attempt>, i64, &str)> = vec![
        (
            "fresh",
            run(R::Running, 0, 0, 0),
            vec![],
            0,
            r#"call read#1 {"q":"hi"} [read#1=started]"#,
        ),
        ("waiting", run(R::Waiting, 1, 1, 0), vec![], 0, "idle"),
        ("in doubt", run(R::InDoubt, 2, 1, 1), vec![], 0, "idle"),
        ("ended", run(R::Completed, 4, 0, 0), vec![], 0, "idle"),
        (
            "approval parks with its timeout",
            run(R::Running, 1, 0, 0),
            vec![read_ok.clone()],
            1000,
            "commit waiting 1/1 [gate#1=waiting] +approval@601000",
        ),
        (
            "crash of a safe step re-runs it",
            run(R::Running, 0, 1, 0),
            vec![attempt(0, 1, "read", A::Started, Value::Null)],
            0,
            r#"call read#2 {"q":"hi"} [read#1=crashed,read#2=started]"#,
        ),
        (
            "crash of an action goes in doubt",
            run(R::Running, 2, 1, 0),
            vec![
                read_ok.clone(),
                attempt(2, 1, "write", A::Started, Value::Null),
            ],
            0,
            "commit in_doubt 2/1 [write#1=crashed]",
        ),
        (
            "crash of an action while its call asked a person: asked again, never in doubt",
            run(R::Running, 2, 1, 0),
            vec![read_ok.clone(), {
                let mut asking = attempt(2, 1, "write", A::Started, Value::Null);
                asking.process = Some(quiver_store::workflow::ASKING.into());
                asking
            }],
            0,
            "call write#2 {} [write#1=crashed,write#2=started]",
        ),
        (
            "the fifth crash parks the run as failed",
            run(R::Running, 0, 5, 4),
            vec![attempt(0, 5, "read", A::Started, Value::Null)],
            0,
            "commit failed 0/5 [read#5=crashed]",
        ),
        (
            "after a retry pause: the next attempt",
            run(R::Running, 2, 1, 0),
            vec![
                read_ok.clone(),
                attempt(2, 1, "write", A::Failed, Value::Null),
            ],
            0,
            "call write#2 {} [write#2=started]",
        ),
        (
            "operator retry after a crash",
            run(R::Running, 2, 1, 1),
            vec![
                read_ok.clone(),
                attempt(2, 1, "write", A::Crashed, Value::Null),
            ],
            0,
            "call write#2 {} [write#2=started]",
        ),
        (
            "a timer parks at an absolute time",
            run(R::Running, 3, 0, 0),
            vec![read_ok.clone()],
            7,
            "commit waiting 3/1 [pause#1=waiting] +timer@300007",
        ),
        (
            "all steps done: the output",
            run(R::Running, 4, 0, 0),
            vec![
                read_ok.clone(),
                attempt(2, 1, "write", A::Ok, json!({"url": "u"})),
            ],
            0,
            r#"commit completed 4/0 [] ={"url":"u"}"#,
        ),
        (
            "past the deadline",
            run(R::Running, 2, 0, 0),
            vec![read_ok.clone()],
            3_600_000,
            "commit failed 2/0 []",
        ),
        (
            "a missing attempt row is an error, not a guess",
            run(R::Running, 2, 3, 0),
            vec![read_ok.clone()],
            0,
            "commit failed 2/3 []",
        ),
    ];
    for (name, run, attempts, now, want) in cases {
        let view = View {
            def: &def,
            run: &run,
            attempts: &attempts,
            waits: &[],
            last_event: 0,
            now,
            owner: "me",
            lease_now: 0,
            lease_ms: LEASE_MS,
        };
        assert_eq!(describe(&decide(&view)), want, "{name}");
    }
    // `if: input.go` false skips the approval.
    let mut skip = run(R::Running, 1, 0, 0);
    skip.input = json!({"q": "hi", "go": false});
    let attempts = [read_ok];
    let view = View {
        def: &def,
        run: &skip,
        attempts: &attempts,
        waits: &[],
        last_event: 0,
        now: 0,
        owner: "me",
        lease_now: 0,
        lease_ms: LEASE_MS,
    };
    assert_eq!(
        describe(&decide(&view)),
        "commit running 2/0 [gate#1=skipped]"
    );
}

#[test]
fn outcomes_of_a_call() {
    let def = def();
    let before = run(RunStatus::Running, 2, 0, 0);
    let attempts = [attempt(0, 1, "read", AttemptStatus::Ok, json!("n"))];
    let view = View {
        def: &def,
        run: &before,
        attempts: &attempts,
        waits: &[],
        last_event: 3,
        now: 50,
        owner: "me",
        lease_now: 0,
        lease_ms: LEASE_MS,
    };
    let Next::Call { call, .. } = decide(&view) else {
        panic!("expected a call");
    };
    let cases = [
        (
            StepOutcome::Output(json!(1)),
            "running 3/0 [write#1=ok] audit ok",
        ),
        (
            StepOutcome::Failed("x".into()),
            "failed 2/1 [write#1=failed] audit error",
        ),
        (
            StepOutcome::Refused("no".into()),
            "failed 2/1 [write#1=failed] audit refused",
        ),
        (
            StepOutcome::NeedsPerson(json!({})),
            "waiting 2/1 [write#1=waiting] +approval audit pending",
        ),
    ];
    for (outcome, want) in cases {
        let a = after_call(&view, &call, &outcome);
        assert_eq!(
            (a.expect.status, a.expect.step, a.expect.attempt),
            (RunStatus::Running, 2, 1),
            "{outcome:?}: the result is conditional on the attempt still running"
        );
        let got = format!(
            "{} {}/{} [{}]{} audit {}",
            a.to.status,
            a.to.step,
            a.to.attempt,
            a.attempts
                .iter()
                .map(|w| format!("{}#{}={}", w.step_id, w.attempt, w.status))
                .collect::<Vec<_>>()
                .join(","),
            a.wait
                .as_ref()
                .map_or(String::new(), |w| format!(" +{}", w.kind)),
            a.audit.as_ref().map_or("none", |e| e.status.as_str()),
        );
        assert_eq!(got, want, "{outcome:?}");
    }
}

#[test]
fn the_last_steps_result_ends_the_run_in_the_same_commit() {
    let (w, d) = parse_workflow(
        "description: d\nsteps:\n  - id: read\n    tool: x.read\n  - id: write\n    tool: x.write\noutput: '{{ steps.read.output }}-{{ steps.write.output }}'\n",
        Path::new("w.yaml"),
        "w".parse().unwrap(),
        &WorkflowScope::default(),
    );
    let def = Definition {
        package: "p".into(),
        steps: ["x.read", "x.write"]
            .map(|t| StepMeta {
                target: Some(t.into()),
                rerun_safe: true,
            })
            .to_vec(),
        workflow: w.unwrap_or_else(|| panic!("{d:?}")),
        packages: Default::default(),
    };
    let attempts = [attempt(0, 1, "read", AttemptStatus::Ok, json!("n"))];
    let at_write = run(RunStatus::Running, 1, 0, 0);
    // (now, outcome of `write`, the commit of its result); the run's deadline is 3,600,000.
    let cases = [
        (
            50,
            StepOutcome::Output(json!("w")),
            "commit completed 2/0 [write#1=ok] =\"n-w\"",
        ),
        (
            3_600_000,
            StepOutcome::Output(json!("w")),
            "commit failed 2/1 [write#1=ok] the run timed out",
        ),
        (
            50,
            StepOutcome::Failed("x".into()),
            "commit failed 1/1 [write#1=failed] step `write` failed: x",
        ),
    ];
    for (now, outcome, want) in cases {
        let view = View {
            def: &def,
            run: &at_write,
            attempts: &attempts,
            waits: &[],
            last_event: 0,
            now,
            owner: "me",
            lease_now: 0,
            lease_ms: LEASE_MS,
        };
        let Next::Call { call, .. } = decide(&View { now: 50, ..view }) else {
            panic!("expected the call of `write`");
        };
        let a = after_call(&view, &call, &outcome);
        assert_eq!(
            (a.expect.status, a.expect.step, a.expect.attempt),
            (RunStatus::Running, 1, 1),
            "{want}: conditional on the attempt still running"
        );
        let error =
            a.to.error
                .clone()
                .map_or(String::new(), |e| format!(" {e}"));
        let got = format!("{}{error}", describe(&Next::Commit(Box::new(a))));
        assert_eq!(got, want);
    }
}

#[test]
fn a_started_attempt_under_another_live_lease_is_left_alone_and_taken_over_once_it_ran_out() {
    let def = def();
    let mut held = run(RunStatus::Running, 0, 1, 0);
    held.epoch = 4;
    held.lease = Some(quiver_store::workflow::Lease {
        owner: "them".into(),
        until: 1_000,
    });
    let attempts = [attempt(0, 1, "read", AttemptStatus::Started, Value::Null)];
    // (whose lease, the store's clock, what the engine `me` does)
    let cases = [
        ("them", 999, "idle"),
        ("them", 1_000, "call read#2 epoch 5 lease me/250"),
        ("me", 0, "call read#2 epoch 5 lease me/250"),
    ];
    for (owner, lease_now, want) in cases {
        held.lease.as_mut().unwrap().owner = owner.into();
        let view = View {
            def: &def,
            run: &held,
            attempts: &attempts,
            waits: &[],
            last_event: 0,
            now: 0,
            owner: "me",
            lease_now,
            lease_ms: 250,
        };
        let got = match decide(&view) {
            Next::Idle => "idle".to_owned(),
            Next::Call { start, call } => {
                let lease = start.to.lease.clone().unwrap();
                assert_eq!(
                    start.expect.epoch, 4,
                    "the claim is conditional on the epoch seen"
                );
                format!(
                    "call {}#{} epoch {} lease {}/{}",
                    call.step_id, call.attempt, call.epoch, lease.owner, lease.ms
                )
            }
            other => format!("{other:?}"),
        };
        assert_eq!(got, want, "{owner} at {lease_now}");
    }
}
