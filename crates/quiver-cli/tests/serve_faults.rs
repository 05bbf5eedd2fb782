//! The rest of issue 26's multi-instance fault test: three `quiver serve` on one PostgreSQL
//! database (the harness is `instances/`, shared with serve_failover.rs), one fault per test,
//! and the invariants read from the rows afterwards:
//! - `kill -9` of an instance mid-call (a slow tool over MCP HTTP): the call is ended
//!   `interrupted` by the reaper, the other instances keep serving;
//! - `kill -9` after a call asked for an approval on it: the card is answered with
//!   `quiver approvals approve` against the database, the client's retry on another instance
//!   runs the call once, and a second retry asks again (the approval is used once);
//! - `kill -9` of the instance holding a call at its approval form (a client that shows
//!   forms): the call is ended `interrupted` at `approval`, and the client's retry on another
//!   instance is asked again, then runs once;
//! - the `LISTEN` connections killed (`pg_terminate_backend`): the listeners reconnect, and a
//!   workflow run's approval answered meanwhile still resumes the run;
//! - PostgreSQL restarted under load (`scripts/pg-cluster.sh restart` of a cluster the test
//!   starts for itself, so that no other test on the shared server is disturbed): the same
//!   processes serve again, later calls succeed, and no call is left half-written (every
//!   started call has its end, every call that ended `ok` ran its tool once);
//! - a per-second schedule on three instances: each fire once, none missed.
//!
//! Concurrent loads of tools into one conversation from two instances are the conformance
//! case `race_cases::concurrent_loads_into_one_session_never_pass_the_cap`
//! (crates/quiver-store/tests/conformance, run on PostgreSQL with two stores): not repeated.
//!
//! Skipped, saying why, without `QUIVER_TEST_POSTGRES` (a failure with
//! `QUIVER_REQUIRE_POSTGRES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod instances;
mod support;

use instances::mcp::{Client, Next, handle, text};
use instances::{Env, psql, write};

/// The package `clock`: `slow` (exposed, never asks) and `gate` (exposed, asks a person every
/// call) note `<tool>:<tag>` in a ledger and sleep `sleep` s; the workflow `review` (webhook)
/// waits for an approval, then runs `slow`; with `tick`, the workflow `tick` runs `slow`
/// every second.
fn package(tick: bool) -> impl FnOnce(&Path) {
    move |root: &Path| {
        write(
            root,
            "clock/quiver.yaml",
            "id: clock\ndescription: Tools and workflows of the fault test\nconfig:\n  type: object\n  properties:\n    hook_secret: {type: string, secret: true}\n",
        );
        let main = "import json, os, sys, time\nrequest = json.load(sys.stdin)\nargs = request['arguments']\nwith open(os.path.join(os.environ['QUIVER_DATA_DIR'], 'ledger'), 'a') as f:\n    f.write(sys.argv[1] + ':' + str(args.get('tag')) + '\\n')\ntime.sleep(args.get('sleep', 0))\nprint(json.dumps({'tag': args.get('tag')}))\n";
        for (tool, approval) in [("slow", "never"), ("gate", "always")] {
            write(
                root,
                &format!("clock/tools/{tool}/tool.yaml"),
                &format!(
                    "description: Notes its tag in a ledger and sleeps\ncategory: perception\napproval: {approval}\nexpose: true\ntimeout: 2m\ninput: {{type: object, properties: {{tag: {{type: string}}, sleep: {{type: number}}}}}}\nrun: {{command: [python3, main.py, {tool}]}}\n"
                ),
            );
            write(root, &format!("clock/tools/{tool}/main.py"), main);
        }
        write(
            root,
            "clock/workflows/review.yaml",
            "description: Runs slow after a person said yes\ntrigger: {webhook: {name: review, secret: hook_secret}}\ninput: {type: object, properties: {tag: {type: string}}, required: [tag]}\nsteps:\n  - id: ok\n    approval: Go?\n  - id: m\n    tool: slow\n    with: {tag: '{{ input.tag }}'}\n",
        );
        if tick {
            write(
                root,
                "clock/workflows/tick.yaml",
                "description: Every second\ntrigger: {schedule: {cron: '* * * * * *', overlap: allow}}\nsteps:\n  - id: m\n    tool: slow\n    with: {tag: 'tick-{{ trigger.fire_at }}'}\n",
            );
        }
    }
}

/// How many ledger lines read `line`.
fn ran(env: &Env, line: &str) -> usize {
    env.ledger().iter().filter(|l| *l == line).count()
}

/// The newest audit record's id (0 for none).
fn mark(env: &Env) -> i64 {
    psql(&env.url, "SELECT coalesce(max(id), 0) FROM audit")
        .parse()
        .unwrap()
}

/// The statuses of the audit's `call` records after `since`, oldest first (the `pending`
/// answers, which end nothing, left out).
fn call_ends(env: &Env, since: i64) -> Vec<String> {
    psql(
        &env.url,
        &format!(
            "SELECT status FROM audit WHERE kind = 'call' AND status <> 'pending' AND id > {since} ORDER BY id"
        ),
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// Answers the only pending card with `quiver approvals approve`; its id.
fn approve_pending(env: &Env) -> String {
    let card = pending_card(env);
    let out = env
        .quiver()
        .args(["approvals", "approve", &card])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    card
}

/// A session on the instance at `port` and a conversation consented to the package `clock`
/// (the client cannot elicit: the consent card is answered with `quiver approvals approve`,
/// then the call retried); the conversation's handle.
fn consented(env: &Env, port: u16) -> (Client, String) {
    let mut client = Client::connect(port, env.home.path());
    let asked = client
        .call("clock__slow", json!({"tag": "consent"}), None)
        .unwrap();
    assert!(text(&asked).contains("consent"), "{asked}");
    let conversation = handle(&asked);
    approve_pending(env);
    let done = client
        .call(
            "clock__slow",
            json!({"tag": "consent"}),
            Some(&conversation),
        )
        .unwrap();
    assert!(!is_error(&done), "{done}");
    (client, conversation)
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

#[test]
fn kill_9_mid_call_ends_the_call_interrupted_and_the_others_serve() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "faults_call", package(false));
    let instances = env.three();
    let (mut client, conversation) = consented(&env, instances[0].port);
    let since = mark(&env);
    let in_call = conversation.clone();
    let call = std::thread::spawn(move || {
        client.call(
            "clock__slow",
            json!({"tag": "k", "sleep": 20}),
            Some(&in_call),
        )
    });
    env.wait("the slow call's start", Duration::from_secs(30), || {
        ran(&env, "slow:k") == 1
    });
    instances[0].signal("KILL");
    assert!(
        call.join().unwrap().is_err(),
        "the killed instance answered"
    );
    // The reaper (another instance, a lease after the last heartbeat) ends the call.
    let reaped = env.wait("the dead call's end", Duration::from_secs(20), || {
        call_ends(&env, since) == ["interrupted"]
    });
    eprintln!(
        "call interrupted by the reaper {} ms after kill -9",
        reaped.as_millis()
    );
    env.assert_audit_complete(Duration::from_secs(5));
    // The others keep serving, from sessions of their own, in the same conversation.
    for (i, instance) in instances[1..].iter().enumerate() {
        let mut client = Client::connect(instance.port, env.home.path());
        let tag = format!("after{i}");
        let result = client
            .call("clock__slow", json!({"tag": tag}), Some(&conversation))
            .unwrap();
        assert!(!is_error(&result), "{result}");
        assert_eq!(ran(&env, &format!("slow:{tag}")), 1);
    }
    assert_eq!(call_ends(&env, since), ["interrupted", "ok", "ok"]);
    env.assert_audit_complete(Duration::from_secs(5));
}

/// The id of the only pending card.
fn pending_card(env: &Env) -> String {
    let ids = psql(
        &env.url,
        "SELECT id FROM approvals WHERE status = 'pending' ORDER BY created_at",
    );
    assert_eq!(ids.lines().count(), 1, "{ids}");
    ids
}

#[test]
fn kill_9_mid_approval_loses_nothing_and_the_retry_elsewhere_runs_once() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "faults_approval", package(false));
    let instances = env.three();
    let (mut on_a, conversation) = consented(&env, instances[0].port);
    let since = mark(&env);
    let args = json!({"tag": "a"});
    // A client that cannot elicit: the question is left as a card and the call answered
    // `pending` at once (docs/mcp.md).
    let mut asked = on_a
        .call("clock__gate", args.clone(), Some(&conversation))
        .unwrap();
    let mut on_b = Client::connect(instances[1].port, env.home.path());
    instances[0].signal("KILL");
    let mut answered = Vec::new();
    for _ in 0..3 {
        if !is_error(&asked) {
            break;
        }
        assert!(text(&asked).contains("has not run"), "{asked}");
        answered.push(approve_pending(&env));
        // The retry, on another instance, in the same conversation.
        asked = on_b
            .call("clock__gate", args.clone(), Some(&conversation))
            .unwrap();
    }
    assert!(!is_error(&asked), "{asked}");
    assert_eq!(ran(&env, "gate:a"), 1, "the approved call ran once");
    // The approval was used by that one run: a second retry asks again and runs nothing.
    let mut on_c = Client::connect(instances[2].port, env.home.path());
    let again = on_c.call("clock__gate", args, Some(&conversation)).unwrap();
    assert!(
        is_error(&again) && text(&again).contains("has not run"),
        "{again}"
    );
    assert_eq!(ran(&env, "gate:a"), 1);
    let used = psql(
        &env.url,
        "SELECT count(*) FROM approvals WHERE used_at IS NOT NULL AND question = 'approval'",
    );
    assert_eq!(used, "1", "cards answered: {answered:?}");
    env.assert_approvals_sound();
    env.assert_audit_complete(Duration::from_secs(20));
    // The audit has the one run's end, and nothing else ran (the `pending` answers left out).
    assert_eq!(call_ends(&env, since), ["ok"]);
}

/// The next thing on the streams of `client`'s call `id` is a question; its request id.
fn question(client: &Client, id: u64) -> Value {
    match client.next(id) {
        Next::Question(id, _) => id,
        other => panic!("no question: {other:?}"),
    }
}

#[test]
fn kill_9_of_the_instance_holding_a_call_at_its_question_ends_it_interrupted_and_the_retry_asks_again()
 {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "faults_held", package(false));
    let instances = env.three();
    let forms = json!({"elicitation": {"form": {}}});
    // A client that shows forms: consent for the conversation, given in a form.
    let mut on_a = Client::connect_with(instances[0].port, env.home.path(), forms.clone());
    let first = on_a.start("clock__slow", json!({"tag": "c"}), None);
    on_a.answer(&question(&on_a, first), "allow_conversation");
    let Next::Result(result) = on_a.next(first) else {
        panic!("no result")
    };
    assert!(!is_error(&result), "{result}");
    let conversation = handle(&result);
    let since = mark(&env);
    // The call waits on A for the person's answer to its approval form; A is killed.
    let held = on_a.start("clock__gate", json!({"tag": "h"}), Some(&conversation));
    question(&on_a, held);
    env.wait("the held call's start", Duration::from_secs(10), || {
        psql(&env.url, "SELECT count(*) FROM calls_in_flight") == "1"
    });
    instances[0].signal("KILL");
    assert!(matches!(on_a.next(held), Next::Gone));
    env.wait("the held call's end", Duration::from_secs(20), || {
        call_ends(&env, since) == ["interrupted"]
    });
    let decisions = psql(
        &env.url,
        &format!("SELECT decisions FROM audit WHERE status = 'interrupted' AND id > {since}"),
    );
    assert!(decisions.contains("approval"), "{decisions}");
    assert_eq!(ran(&env, "gate:h"), 0);
    // The client's retry on B, in the same conversation: asked again (nothing was answered),
    // then run once.
    let mut on_b = Client::connect_with(instances[1].port, env.home.path(), forms);
    let retry = on_b.start("clock__gate", json!({"tag": "h"}), Some(&conversation));
    on_b.answer(&question(&on_b, retry), "allow_once");
    let Next::Result(result) = on_b.next(retry) else {
        panic!("no result")
    };
    assert!(!is_error(&result), "{result}");
    assert_eq!(ran(&env, "gate:h"), 1);
    assert_eq!(call_ends(&env, since), ["interrupted", "ok"]);
    env.assert_approvals_sound();
    env.assert_audit_complete(Duration::from_secs(5));
}

/// The backend pids of the `LISTEN` connections on the test's database.
fn listeners(env: &Env) -> Vec<String> {
    psql(
        &env.server,
        &format!(
            "SELECT pid FROM pg_stat_activity WHERE datname = '{}' AND query LIKE 'LISTEN%'",
            env.name
        ),
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
fn a_killed_listener_reconnects_and_an_approval_answered_meanwhile_resumes_its_run() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "faults_listen", package(false));
    let instances = env.three();
    env.wait("three listeners", Duration::from_secs(10), || {
        listeners(&env).len() == 3
    });
    let run = env.hook(&instances[0], "review", r#"{"tag": "l"}"#)["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    env.wait("the run's approval", Duration::from_secs(20), || {
        env.run_field(&run, "status") == "waiting"
    });
    // A call waiting for a person in the queue (`quiver call --console`: the store's
    // `wait_approval`, woken by the listener of its own process, else by its poll).
    let mut waiting = env
        .quiver()
        .args([
            "call",
            "clock.gate",
            "--args",
            r#"{"tag": "w"}"#,
            "--console",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    env.wait("the consent card", Duration::from_secs(20), || {
        psql(
            &env.url,
            "SELECT count(*) FROM approvals WHERE status = 'pending'",
        ) == "1"
    });
    approve_pending(&env);
    env.wait("the approval card", Duration::from_secs(20), || {
        psql(
            &env.url,
            "SELECT count(*) FROM approvals WHERE status = 'pending' AND question = 'approval'",
        ) == "1"
    });
    let killed = listeners(&env);
    psql(
        &env.server,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND query LIKE 'LISTEN%'",
            env.name
        ),
    );
    // Both answered while nobody listens.
    approve_pending(&env);
    let woke = env.wait("the waiting call's end", Duration::from_secs(20), || {
        waiting.try_wait().unwrap().is_some()
    });
    let out = env
        .quiver()
        .args(["approvals", "approve", &run])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "a call waiting in the queue ended {} ms after its approval, the listeners killed",
        woke.as_millis()
    );
    assert!(waiting.wait().unwrap().success(), "the waiting call failed");
    assert_eq!(ran(&env, "gate:w"), 1);
    let resumed = env.wait("the run's end", Duration::from_secs(20), || {
        env.run_field(&run, "status") == "completed"
    });
    eprintln!(
        "run resumed {} ms after the approval with the listeners killed",
        resumed.as_millis()
    );
    assert_eq!(ran(&env, "slow:l"), 1);
    let back = env.wait(
        "the listeners' reconnection",
        Duration::from_secs(10),
        || {
            let now = listeners(&env);
            now.len() == 3 && now.iter().all(|p| !killed.contains(p))
        },
    );
    eprintln!("listeners back {} ms later", back.as_millis());
    for instance in &instances {
        assert!(instance.serves(), "{}", instance.logged());
    }
    env.assert_audit_complete(Duration::from_secs(10));
}

/// A PostgreSQL cluster of this test's own (`scripts/pg-cluster.sh`), so that restarting it
/// disturbs no other test running meanwhile on the server of `QUIVER_TEST_POSTGRES`; stopped
/// and removed on drop.
struct Cluster {
    dir: PathBuf,
    url: String,
}

impl Cluster {
    fn script(command: &str, dir: &Path) -> std::process::Output {
        let out = Command::new(support::repo_root().join("scripts/pg-cluster.sh"))
            .arg(command)
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg-cluster.sh {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn start() -> Cluster {
        let dir = std::env::temp_dir().join(format!("quiver-faults-pg-{}", std::process::id()));
        let out = Cluster::script("start", &dir);
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Cluster { dir, url }
    }

    fn restart(&self) {
        Cluster::script("restart", &self.dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(support::repo_root().join("scripts/pg-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

#[test]
fn postgres_restarted_under_load_the_instances_recover_and_nothing_is_half_written() {
    if instances::postgres().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let env = Env::new(&cluster.url, "faults_restart", package(false));
    let instances = env.three();
    let pids: Vec<u32> = instances.iter().map(|i| i.pid()).collect();
    let (_, conversation) = consented(&env, instances[0].port);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = instances
        .iter()
        .enumerate()
        .map(|(n, instance)| {
            let (port, home, stop) = (instance.port, env.home.path().to_owned(), stop.clone());
            let conversation = conversation.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(port, &home);
                let (mut ok, mut failed) = (Vec::new(), 0);
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let tag = format!("r{n}-{i}");
                    i += 1;
                    match client.call(
                        "clock__slow",
                        json!({"tag": tag, "sleep": 0.2}),
                        Some(&conversation),
                    ) {
                        Ok(result) if !is_error(&result) => ok.push(tag),
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let restarted = Instant::now();
    cluster.restart();
    eprintln!(
        "PostgreSQL restarted in {} ms",
        restarted.elapsed().as_millis()
    );
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut during = Vec::new();
    for thread in load {
        let (ok, failed) = thread.join().unwrap();
        during.push((ok.len(), failed));
        for tag in ok {
            assert_eq!(ran(&env, &format!("slow:{tag}")), 1, "{tag}");
        }
    }
    eprintln!("calls during the restart (ok, failed) per instance: {during:?}");
    // The same processes serve: fresh sessions and calls succeed on each.
    for (n, instance) in instances.iter().enumerate() {
        assert_eq!(instance.pid(), pids[n]);
        let mut client = Client::connect(instance.port, env.home.path());
        let tag = format!("after{n}");
        let result = client
            .call("clock__slow", json!({"tag": tag}), Some(&conversation))
            .unwrap();
        assert!(!is_error(&result), "{result}\n{}", instance.logged());
        assert_eq!(ran(&env, &format!("slow:{tag}")), 1);
    }
    // Nothing half-written: every started call has its end, and every call that ended ok
    // ran its tool.
    env.assert_audit_complete(Duration::from_secs(10));
    let ok = call_ends(&env, 0).iter().filter(|s| *s == "ok").count();
    assert!(
        ok <= env.ledger().len(),
        "{ok} ok ends for {} runs",
        env.ledger().len()
    );
}

#[test]
fn a_per_second_schedule_fires_once_per_second_across_three_instances() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "faults_cron", package(true));
    let instances = env.three();
    std::thread::sleep(Duration::from_secs(6));
    drop(instances);
    let fires: Vec<i64> = psql(
        &env.url,
        "SELECT fire_at FROM wf_schedule_fires WHERE workflow = 'clock.tick' ORDER BY fire_at",
    )
    .lines()
    .map(|l| l.parse().unwrap())
    .collect();
    assert!(fires.len() >= 4, "{fires:?}");
    // None missed between the first and the last, each a whole second.
    for pair in fires.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "{fires:?}");
    }
    // Each fire made one run, and each run's step ran its tool at most once.
    let runs = psql(
        &env.url,
        "SELECT count(*) FROM wf_runs WHERE workflow = 'clock.tick'",
    );
    assert_eq!(runs, fires.len().to_string());
    let ledger = env.ledger();
    let mut ticks: Vec<&String> = ledger
        .iter()
        .filter(|l| l.starts_with("slow:tick-"))
        .collect();
    let all = ticks.len();
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), all, "a fire ran twice: {ledger:?}");
    assert!(all + 3 >= fires.len(), "{all} ran of {} fires", fires.len());
}
