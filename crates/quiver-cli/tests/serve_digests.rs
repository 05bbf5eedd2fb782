//! A run runs only the package content it pinned (issue 26: "an instance runs only package
//! digests it has loaded"), through real `quiver serve` processes on one PostgreSQL database:
//! instance A loads version 1 of the package `clock`, B version 2 (same id, another tool
//! output). A run started on A has its step killed with A (`kill -9`); once the lease ran out,
//! B leaves it alone (no attempt, no epoch raised, it says why in its log, and `quiver runs
//! show` on B's packages says what the run waits for); a third instance C with version 1 takes
//! it over and its step runs version 1.
//!
//! Skipped, saying why, without `QUIVER_TEST_POSTGRES` (a failure with
//! `QUIVER_REQUIRE_POSTGRES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

mod instances;
mod support;

use instances::{Env, Instance, LEASE_MS, postgres, psql, write};

/// The package `clock` at `version`: a tool (perception, so re-run safe) that notes
/// `<idempotency key> <version>` in a ledger, sleeps `sleep` s at its key's first attempt and
/// returns its version; the webhook `slow` starts a run of it.
fn package(root: &Path, version: &str) {
    write(
        root,
        "clock/quiver.yaml",
        &format!(
            "id: clock\nversion: {version}.0.0\ndescription: Workflows of the digest test\nconfig:\n  type: object\n  properties:\n    hook_secret: {{type: string, secret: true}}\n"
        ),
    );
    write(
        root,
        "clock/tools/mark/tool.yaml",
        "description: Notes the call in a ledger and returns the package's version\ncategory: perception\ninput: {type: object}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "clock/tools/mark/main.py",
        &format!(
            "import json, os, sys, time\nrequest = json.load(sys.stdin)\nkey = request['context']['idempotency_key']\nledger = os.path.join(os.environ['QUIVER_DATA_DIR'], 'ledger')\nfirst = not os.path.exists(ledger) or key not in open(ledger).read()\nwith open(ledger, 'a') as f:\n    f.write(key + ' v{version}\\n')\nif first:\n    time.sleep(request['arguments'].get('sleep', 0))\nprint(json.dumps({{'version': 'v{version}'}}))\n"
        ),
    );
    write(
        root,
        "clock/workflows/slow.yaml",
        "description: A slow delivery\ntrigger: {webhook: {name: slow, secret: hook_secret}}\ninput: {type: object, properties: {sleep: {type: number}}, required: [sleep]}\nsteps:\n  - id: m\n    tool: mark\n    with: {sleep: '{{ input.sleep }}'}\noutput: '{{ steps.m.output.version }}'\n",
    );
}

/// `(attempt, status)` of the run's step, in order.
fn attempts(env: &Env, run: &str) -> Vec<(i64, String)> {
    psql(
        &env.url,
        &format!("SELECT attempt, status FROM wf_attempts WHERE run_id = '{run}' ORDER BY attempt"),
    )
    .lines()
    .map(|l| {
        let (n, s) = l.split_once('|').unwrap();
        (n.parse().unwrap(), s.to_owned())
    })
    .collect()
}

/// The ledger's lines of `run`'s step: the version each started attempt ran.
fn ran(env: &Env, run: &str) -> Vec<String> {
    let key = format!("{run}:m ");
    env.ledger()
        .iter()
        .filter_map(|l| l.strip_prefix(&key).map(str::to_owned))
        .collect()
}

/// An instance on the packages of `root`, its workflow engine logging at `info`.
fn serve(env: &Env, root: &Path) -> Instance {
    let mut command = env.quiver_at(root);
    command.env("QUIVER_LOG", "warn,quiver_workflow=info");
    env.serve_with(command)
}

#[test]
fn an_instance_without_the_runs_package_digest_leaves_it_to_one_that_has_it() {
    let Some(server) = postgres() else { return };
    let env = Env::new(&server, "digests", |_| {});
    let (v1, v2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    package(v1.path(), "1");
    package(v2.path(), "2");
    let a = serve(&env, v1.path());
    let b = serve(&env, v2.path());
    let answer = env.hook(&a, "slow", r#"{"sleep": 30}"#);
    let run = answer["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    env.wait("the step's start on A", Duration::from_secs(30), || {
        ran(&env, run) == ["v1"]
    });
    assert!(
        env.run_field(run, "lease_owner")
            .ends_with(&format!("/{}", a.pid())),
        "A holds the step"
    );
    let epoch = env.run_field(run, "epoch");
    a.signal("KILL");

    // B is offered the run once the lease ran out, and leaves it alone, saying why.
    env.wait(
        "B's refusal",
        Duration::from_millis(LEASE_MS + 10_000),
        || {
            b.logged()
                .contains(&format!("run {run} needs clock@sha256:"))
        },
    );
    let said = b.logged();
    assert!(
        said.contains("which this instance has not loaded (it has clock@sha256:"),
        "{said}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(attempts(&env, run), [(1, "started".to_owned())]);
    assert_eq!(
        env.run_field(run, "epoch"),
        epoch,
        "no claim, no epoch raised"
    );
    assert_eq!(env.run_field(run, "status"), "running");
    assert_eq!(ran(&env, run), ["v1"], "B ran nothing");
    assert_eq!(
        said.matches(&format!("run {run} needs")).count(),
        1,
        "said once: {said}"
    );

    // What an operator sees: on B's packages the run waits for A's digest; on A's, nothing.
    let show = |root: &Path| {
        let out = env
            .quiver_at(root)
            .args(["runs", "show", run, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let note = show(v2.path())["waiting_for"].as_str().unwrap().to_owned();
    assert!(
        note.starts_with("an instance that has loaded clock@sha256:"),
        "{note}"
    );
    assert!(said.contains(note.trim_start_matches("an instance that has loaded ")));
    assert_eq!(show(v1.path())["waiting_for"], serde_json::Value::Null);

    // C, with version 1, takes the run over: its step runs version 1.
    let c = serve(&env, v1.path());
    env.wait("the run's end on C", Duration::from_secs(60), || {
        env.run_field(run, "status") == "completed"
    });
    assert_eq!(ran(&env, run), ["v1", "v1"]);
    assert_eq!(
        attempts(&env, run),
        [(1, "crashed".to_owned()), (2, "ok".to_owned())]
    );
    assert_eq!(env.run_field(run, "output"), r#""v1""#);
    assert!(b.serves() && c.serves());
}
