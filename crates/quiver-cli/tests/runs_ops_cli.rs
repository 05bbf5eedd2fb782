//! `quiver runs wait|cancel|retry|resolve`, `quiver approvals` on parked runs, `quiver events
//! emit` and `quiver schedules list` through the built binary, a real SQLite file and the
//! sandbox, with a package of the test's own: a slow payment tool (an action that is not
//! idempotent) run in another `quiver run` process, cancelled mid-run or killed with SIGKILL to
//! leave its run in doubt; approval steps answered by their starter (the local owner), with
//! separation of duties (never by the starter, never by a name given with `--as`) and twice; a call parked on an `always` approval; an event wait; schedules in their zones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// The tool `pay`: appends to a file named by its call's idempotency key in its data folder;
/// the first call of a key with `slow` sleeps a minute before it answers.
const PAY: &str = r#"import json, os, sys, time
request = json.load(sys.stdin)
key = request["context"]["idempotency_key"].replace(":", "_")
mark = os.path.join(os.environ["QUIVER_DATA_DIR"], "paid-" + key)
first = not os.path.exists(mark)
with open(mark, "a") as f:
    f.write("x")
if first and request["arguments"].get("slow"):
    time.sleep(60)
print(json.dumps({"paid": request["arguments"]["amount"], "calls": open(mark).read().count("x")}))
"#;

/// The package `ops`.
fn ops(root: &Path) {
    write(
        root,
        "ops/quiver.yaml",
        "id: ops\ndescription: Workflows of the operator CLI test\n",
    );
    write(
        root,
        "ops/tools/pay/tool.yaml",
        "description: Pays an amount (slowly, the first time, when asked to)\ncategory: action\napproval: never\ntimeout: 2m\ninput: {type: object, properties: {amount: {type: integer}, slow: {type: boolean}}, required: [amount]}\nrun: {command: [python3, main.py]}\n",
    );
    write(root, "ops/tools/pay/main.py", PAY);
    write(
        root,
        "ops/tools/ask/tool.yaml",
        "description: Says what it was asked, after a person approves each call\ncategory: perception\napproval: always\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "ops/tools/ask/main.py",
        "import json, sys\nprint(json.dumps({\"said\": json.load(sys.stdin)[\"arguments\"][\"text\"]}))\n",
    );
    let workflows = [
        (
            "payment",
            "description: Pays\ninput: {type: object, properties: {amount: {type: integer}, slow: {type: boolean}}, required: [amount]}\nsteps:\n  - id: pay\n    tool: pay\n    with: {amount: '{{ input.amount }}', slow: '{{ input.slow }}'}\noutput: '{{ steps.pay.output }}'\n",
        ),
        (
            "review",
            "description: Pays after a review\nsteps:\n  - id: ok\n    approval: {title: 'Pay {{ input.amount }}?', show: '{{ input }}'}\n  - id: pay\n    tool: pay\n    with: {amount: '{{ input.amount }}'}\noutput: {paid: '{{ steps.pay.output.paid }}', by: '{{ steps.ok.approved }}'}\n",
        ),
        (
            "guarded",
            "description: Needs a trusted approver\nsteps:\n  - id: ok\n    approval: {title: Go?, approvers: ['role(trusted)']}\n",
        ),
        (
            "approved_payment",
            "description: Pays slowly after an approval\nsteps:\n  - id: ok\n    approval: Pay?\n  - id: pay\n    tool: pay\n    with: {amount: 4, slow: true}\noutput: '{{ steps.pay.output }}'\n",
        ),
        (
            "separated",
            "description: Someone other than the starter approves\nsteps:\n  - id: ok\n    approval: {title: Go?, separation_of_duties: true}\n",
        ),
        (
            "asking",
            "description: Calls a tool that asks a person each time\nsteps:\n  - id: a\n    tool: ask\n    with: {text: hello}\noutput: '{{ steps.a.output }}'\n",
        ),
        (
            "paid",
            "description: Waits for the payment of its order\ninput: {type: object, properties: {order: {type: integer}}, required: [order]}\nsteps:\n  - id: got\n    wait: {event: paid, match: 'event.order == input.order', timeout: 1h}\noutput: '{{ steps.got.output }}'\n",
        ),
        (
            "nap",
            "description: Sleeps a second\nsteps:\n  - id: z\n    wait: 1s\noutput: woke\n",
        ),
        (
            "daily",
            "description: Every morning in Berlin and Shanghai\ntrigger:\n  - schedule: {cron: '0 8 * * *', timezone: Europe/Berlin}\n  - schedule: {cron: '30 9 * * *', timezone: Asia/Shanghai, catchup: latest}\nsteps:\n  - id: z\n    wait: 1s\n",
        ),
    ];
    for (name, yaml) in workflows {
        write(root, &format!("ops/workflows/{name}.yaml"), yaml);
    }
}

struct Env {
    home: tempfile::TempDir,
    packages: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let packages = tempfile::tempdir().unwrap();
        ops(packages.path());
        Env {
            home: tempfile::tempdir().unwrap(),
            packages,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", self.packages.path().to_str().unwrap()])
            .args(args)
            .env("QUIVER_HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env_remove("QUIVER_CONFIG")
            .stdin(Stdio::null());
        command
    }

    fn quiver(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        parse(&self.quiver(args))
    }

    /// Starts `quiver run` in a process of its own.
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The only run, once its current attempt runs a tool in a process of its own.
    fn running_step(&self) -> String {
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < Duration::from_secs(60), "no step ran");
            let runs = self.json(&["runs", "list", "--json"]);
            if let Some(run) = runs.as_array().unwrap().first() {
                let id = run["id"].as_str().unwrap().to_owned();
                let shown = self.json(&["runs", "show", &id, "--json"]);
                let running = shown["attempts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["status"] == "started" && a["process"].is_string());
                if running {
                    return id;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many times `pay` ran for the step of run `id`.
    fn payments(&self, id: &str) -> usize {
        let data = find_data_dir(self.home.path()).join(format!("paid-{id}_pay"));
        fs::read_to_string(data).map_or(0, |s| s.len())
    }
}

/// The `ops` package's data folder under the state folder.
fn find_data_dir(home: &Path) -> PathBuf {
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.ends_with("data/ops") {
                    return path;
                }
                stack.push(path);
            }
        }
    }
    panic!("no data folder of `ops` under {}", home.display());
}

fn parse(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Waits at most `limit` for `child` to exit.
fn exits_within(child: &mut Child, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn an_approval_step_is_answered_once_by_its_starter_by_default() {
    let env = Env::new();
    let run = env.json(&["run", "ops.review", "--input", r#"{"amount": 7}"#, "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let id = run["id"].as_str().unwrap();
    // The queue lists the run beside the console's cards, with the rendered title.
    let pending = env.json(&["approvals", "list", "--json"]);
    let entry = &pending[0];
    assert_eq!(
        (&entry["kind"], &entry["id"], &entry["question"]),
        (&json!("run"), &json!(id), &json!("step"))
    );
    assert_eq!(entry["title"], "Pay 7?");
    assert_eq!(entry["show"], json!({"amount": 7}));
    let text = String::from_utf8_lossy(&env.quiver(&["approvals", "list"]).stdout).into_owned();
    assert!(text.contains("Pay 7?") && text.contains(id), "{text}");

    // The one who started it (the local owner, on a one-person install) approves it; the run
    // goes on and runs its tool in this process.
    let approved = env.json(&["approvals", "approve", id, "--json"]);
    assert_eq!(approved["status"], "completed", "{approved}");
    assert_eq!(approved["output"], json!({"paid": 7, "by": true}));
    // Answered twice: the second answer is refused and changes nothing.
    let again = env.quiver(&["approvals", "deny", id, "--as", "carol:user"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already answered by local"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        env.json(&["runs", "show", id, "--json"])["run"]["status"],
        "completed"
    );
    assert_eq!(env.json(&["approvals", "list", "--json"]), json!([]));

    // Denied: the run fails, with the note kept.
    let run = env.json(&["run", "ops.review", "--input", r#"{"amount": 8}"#, "--json"]);
    let id = run["id"].as_str().unwrap();
    let out = env.quiver(&[
        "approvals",
        "deny",
        id,
        "--as",
        "bob:user",
        "--note",
        "too much",
    ]);
    assert!(out.status.success(), "{out:?}");
    let shown = env.json(&["runs", "show", id, "--json"]);
    assert_eq!(shown["run"]["status"], "failed");
    assert!(
        shown["run"]["error"]
            .as_str()
            .unwrap()
            .contains("rejected by bob"),
        "{shown}"
    );
    assert_eq!(shown["waits"][0]["resolution"]["note"], "too much");
    assert_eq!(env.payments(id), 0);
}

#[test]
fn approvers_rules_and_a_parked_call_answered_with_its_exact_arguments() {
    let env = Env::new();
    let run = env.json(&["run", "ops.guarded", "--json"]);
    let id = run["id"].as_str().unwrap();
    // `approvers` take authenticated identities only: a name given with `--as` is refused,
    // whatever role it claims.
    for claimed in ["eve:user", "tom:trusted"] {
        let out = env.quiver(&["approvals", "approve", id, "--as", claimed]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("not an authenticated identity"),
            "{}",
            stderr(&out)
        );
    }
    // The local owner (master, so trusted) is.
    let done = env.json(&["approvals", "approve", id, "--json"]);
    assert_eq!(done["status"], "completed", "{done}");

    // Separation of duties: the starter (the local owner) cannot approve, nor a name given.
    let run = env.json(&["run", "ops.separated", "--json"]);
    let id = run["id"].as_str().unwrap();
    let own = env.quiver(&["approvals", "approve", id]);
    assert_eq!(own.status.code(), Some(1));
    assert!(
        stderr(&own).contains("separation of duties") && stderr(&own).contains("cannot approve"),
        "{}",
        stderr(&own)
    );
    let claimed = env.quiver(&["approvals", "approve", id, "--as", "bob:trusted"]);
    assert_eq!(claimed.status.code(), Some(1));
    assert!(
        stderr(&claimed).contains("not an authenticated identity"),
        "{}",
        stderr(&claimed)
    );
    assert_eq!(
        env.json(&["runs", "show", id, "--json"])["run"]["status"],
        "waiting"
    );
    assert!(env.quiver(&["runs", "cancel", id]).status.success());

    // An unattended run parks on a tool that asks a person every time.
    let run = env.json(&["run", "ops.asking", "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let id = run["id"].as_str().unwrap();
    let pending = env.json(&["approvals", "list", "--json"]);
    assert_eq!(pending[0]["question"], "call");
    assert_eq!(pending[0]["card"]["tool"], "ops.ask");
    assert_eq!(pending[0]["card"]["arguments"], json!({"text": "hello"}));
    let done = env.json(&["approvals", "approve", id, "--as", "bob:user", "--json"]);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output"], json!({"said": "hello"}));
    let shown = env.json(&["runs", "show", id, "--json"]);
    let statuses: Vec<_> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["approved", "ok"], "{shown}");
}

#[test]
fn cancel_while_a_run_waits_on_an_approval_withdraws_it() {
    let env = Env::new();
    let run = env.json(&["run", "ops.review", "--input", r#"{"amount": 3}"#, "--json"]);
    let id = run["id"].as_str().unwrap();
    let cancelled = env.json(&["runs", "cancel", id, "--json"]);
    assert_eq!(cancelled["run"]["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["killed"], Value::Null);
    assert_eq!(env.json(&["approvals", "list", "--json"]), json!([]));
    let shown = env.json(&["runs", "show", id, "--json"]);
    assert_eq!(shown["waits"][0]["status"], "withdrawn");
    let late = env.quiver(&["approvals", "approve", id, "--as", "bob:user"]);
    assert_eq!(late.status.code(), Some(1));
    assert!(stderr(&late).contains("withdrawn"), "{}", stderr(&late));
    // A run that ended cannot be cancelled; an unknown one neither.
    assert_eq!(env.quiver(&["runs", "cancel", id]).status.code(), Some(1));
    assert_eq!(
        env.quiver(&["runs", "cancel", "run-nothing"]).status.code(),
        Some(1)
    );
    // Waiting on a cancelled run ends at once with exit 1.
    assert_eq!(env.quiver(&["runs", "wait", id]).status.code(), Some(1));
}

#[test]
fn cancel_during_a_tool_in_another_process_kills_it_and_discards_its_result() {
    let env = Env::new();
    let mut run = env.spawn(&[
        "run",
        "ops.payment",
        "--input",
        r#"{"amount": 5, "slow": true}"#,
        "--json",
    ]);
    let id = env.running_step();
    let started = Instant::now();
    let cancelled = env.json(&["runs", "cancel", &id, "--json"]);
    assert_eq!(cancelled["run"]["status"], "cancelled", "{cancelled}");
    assert!(cancelled["killed"].is_u64(), "{cancelled}");
    // The other process's tool was killed: it ends long before the tool's minute of sleep,
    // and finds its run cancelled.
    assert!(
        exits_within(&mut run, Duration::from_secs(20)),
        "the step kept running after the cancel"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(parse(&out)["status"], "cancelled");
    let shown = env.json(&["runs", "show", &id, "--json"]);
    assert_eq!(shown["run"]["status"], "cancelled");
    assert_eq!(shown["run"]["output"], Value::Null);
    let attempts = shown["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{shown}");
    assert_eq!(
        attempts[0]["status"], "started",
        "the late result is discarded"
    );
    assert_eq!(env.payments(&id), 1);
}

/// Starts a slow payment in another process and kills that process with SIGKILL while the
/// tool runs, after it paid: the run is left started without a result.
fn interrupted_payment(env: &Env) -> String {
    // One run at a time in the listing: the earlier ones ended.
    let mut run = env.spawn(&[
        "run",
        "ops.payment",
        "--input",
        r#"{"amount": 9, "slow": true}"#,
        "--json",
    ]);
    let id = env.running_step();
    // Killed once the payment happened (the tool records it, then sleeps), so what a
    // retry or a `done` does afterwards is counted against one payment.
    let started = Instant::now();
    while env.payments(&id) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the payment never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    id
}

#[test]
fn a_run_in_doubt_after_kill_9_is_retried_marked_done_or_failed() {
    // Retry: the step runs again with the same idempotency key.
    let env = Env::new();
    let id = interrupted_payment(&env);
    assert_eq!(
        env.json(&["runs", "show", &id, "--json"])["run"]["status"],
        "running"
    );
    // Waiting on it stops at once: only an operator moves a run in doubt on.
    let started = Instant::now();
    let out = env.quiver(&["runs", "wait", &id, "--json"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(parse(&out)["status"], "in_doubt");
    assert!(stderr(&out).contains("runs retry"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
    let run = env.json(&["runs", "retry", &id, "--json", "--as", "ops:master"]);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], json!({"paid": 9, "calls": 2}));
    let shown = env.json(&["runs", "show", &id, "--json"]);
    let statuses: Vec<_> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["crashed", "ok"], "{shown}");
    assert_eq!(env.payments(&id), 2);
    // A run that is not in doubt takes no retry.
    let out = env.quiver(&["runs", "retry", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not in_doubt"), "{}", stderr(&out));

    // Done, with the output the operator saw happen: the tool does not run again.
    let env = Env::new();
    let id = interrupted_payment(&env);
    let run = env.json(&[
        "runs",
        "resolve",
        &id,
        "--done",
        "--output",
        r#"{"paid": 9, "by": "hand"}"#,
        "--json",
    ]);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], json!({"paid": 9, "by": "hand"}));
    assert_eq!(env.payments(&id), 1);

    // Failed, with the reason.
    let env = Env::new();
    let id = interrupted_payment(&env);
    let run = env.json(&[
        "runs",
        "resolve",
        &id,
        "--fail",
        "--reason",
        "the bank says no",
        "--json",
    ]);
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        run["error"].as_str().unwrap().contains("the bank says no"),
        "{run}"
    );
    assert_eq!(env.payments(&id), 1);
    // `--done` needs `--output`.
    assert_eq!(
        env.quiver(&["runs", "resolve", &id, "--done"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn an_event_wakes_the_run_waiting_for_it_and_wait_drives_a_timer() {
    let env = Env::new();
    let run = env.json(&["run", "ops.paid", "--input", r#"{"order": 1}"#, "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let id = run["id"].as_str().unwrap();
    // Another order's payment wakes nothing.
    let other = env.json(&[
        "events",
        "emit",
        "paid",
        "--payload",
        r#"{"order": 2}"#,
        "--json",
    ]);
    assert_eq!(other["woke"], json!([]), "{other}");
    let emitted = env.json(&[
        "events",
        "emit",
        "paid",
        "--payload",
        r#"{"order": 1, "sum": 30}"#,
        "--source",
        "bank",
        "--json",
    ]);
    assert!(emitted["event_id"].as_i64().unwrap() > other["event_id"].as_i64().unwrap());
    assert_eq!(emitted["woke"][0]["id"], id, "{emitted}");
    assert_eq!(emitted["woke"][0]["status"], "completed");
    assert_eq!(emitted["woke"][0]["output"], json!({"order": 1, "sum": 30}));

    // `runs wait`: 2 while the timer has not fired at the timeout, then 0 once it ends.
    let run = env.json(&["run", "ops.nap", "--json"]);
    assert_eq!(run["status"], "waiting");
    let id = run["id"].as_str().unwrap();
    let early = env.quiver(&["runs", "wait", id, "--timeout", "0.1"]);
    assert_eq!(early.status.code(), Some(2), "{early:?}");
    let done = env.quiver(&["runs", "wait", id, "--timeout", "30", "--json"]);
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(parse(&done)["output"], "woke");
}

#[test]
fn schedules_list_the_next_fire_in_each_zone() {
    let env = Env::new();
    let listed = env.json(&["schedules", "list", "--json"]);
    let entries = listed.as_array().unwrap();
    assert_eq!(entries.len(), 2, "{listed}");
    for e in entries {
        assert_eq!(e["workflow"], "ops.daily");
    }
    let berlin = &entries[0];
    assert_eq!(berlin["timezone"], "Europe/Berlin");
    let next = berlin["next"].as_str().unwrap();
    // 08:00 in Berlin, whatever the season: +01:00 in winter, +02:00 in summer.
    assert!(
        next.contains("T08:00:00+01:00") || next.contains("T08:00:00+02:00"),
        "{next}"
    );
    let shanghai = &entries[1];
    assert_eq!(shanghai["catchup"], "latest");
    assert!(
        shanghai["next"]
            .as_str()
            .unwrap()
            .ends_with("T09:30:00+08:00"),
        "{shanghai}"
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for e in entries {
        let at = e["next_ms"].as_i64().unwrap();
        assert!(at > now_ms && at <= now_ms + 86_400_000, "{e}");
    }
    let text = String::from_utf8_lossy(&env.quiver(&["schedules", "list"]).stdout).into_owned();
    assert!(
        text.contains("ops.daily") && text.contains("Asia/Shanghai"),
        "{text}"
    );
}

/// Issue 22 item 21: `quiver approvals approve` killed while the step it drove on runs leaves
/// the run `running`; answering it again recovers the run at once (here the interrupted
/// payment, an action, stands in doubt) instead of leaving it to the next `quiver serve`.
#[test]
fn a_run_left_running_by_a_killed_approver_is_recovered_by_the_next_answer() {
    let env = Env::new();
    let run = env.json(&["run", "ops.approved_payment", "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let mut approver = env.spawn(&["approvals", "approve", &id]);
    assert_eq!(env.running_step(), id);
    let started = Instant::now();
    while env.payments(&id) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the payment never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    approver.kill().unwrap();
    approver.wait().unwrap();
    assert_eq!(
        env.json(&["runs", "show", &id, "--json"])["run"]["status"],
        "running"
    );
    let again = env.quiver(&["approvals", "approve", &id]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(
        stderr(&again).contains("already answered") && stderr(&again).contains("in_doubt"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        env.json(&["runs", "show", &id, "--json"])["run"]["status"],
        "in_doubt"
    );
    assert_eq!(env.payments(&id), 1);
}
