//! Issue 26's wake-ups across processes on one PostgreSQL database, through real `quiver
//! serve` processes (the harness is `instances/`):
//! - an event stored by another process (`quiver events emit`) starts its workflow's run on a
//!   serving instance far sooner than the scheduler's 1 s poll: its `NOTIFY` wakes the
//!   instance's scheduler;
//! - a card created on instance A, and its answer, reach the console of instance B as a hint on
//!   its event stream (`GET /events`, read here with a raw HTTP client) within about 100 ms,
//!   while B's own look at the database runs once a second.
//!
//! Each prints its wake-up latencies (p50, p99; `--nocapture`). Skipped, saying why, without
//! `QUIVER_TEST_POSTGRES` (a failure with `QUIVER_REQUIRE_POSTGRES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

mod instances;
mod support;

use instances::mcp::{Client, text};
use instances::{Env, Instance, psql, write};
use support::Server;

/// Rounds measured per test.
const ROUNDS: usize = 15;

/// The package `clock`: the tool `slow` notes its tag in a ledger; the workflow `pong` runs it
/// on each event `ping`.
fn package(root: &Path) {
    write(
        root,
        "clock/quiver.yaml",
        "id: clock\ndescription: Tools and workflows of the wake-up test\nconfig:\n  type: object\n  properties:\n    hook_secret: {type: string, secret: true}\n",
    );
    write(
        root,
        "clock/tools/slow/tool.yaml",
        "description: Notes its tag in a ledger\ncategory: perception\napproval: never\nexpose: true\ninput: {type: object, properties: {tag: {type: string}}}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "clock/tools/slow/main.py",
        "import json, os, sys\nrequest = json.load(sys.stdin)\nwith open(os.path.join(os.environ['QUIVER_DATA_DIR'], 'ledger'), 'a') as f:\n    f.write(str(request['arguments'].get('tag')) + '\\n')\nprint(json.dumps({'ok': True}))\n",
    );
    write(
        root,
        "clock/workflows/pong.yaml",
        "description: Answers a ping\ntrigger:\n  - event: ping\nsteps:\n  - id: m\n    tool: slow\n    with: {tag: pong}\n",
    );
}

/// Now, Unix ms.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The p50 and p99 of `samples` (ms).
fn percentiles(mut samples: Vec<i64>) -> (i64, i64) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// `quiver serve --http` with its console on a port of its own, once it listens; the instance,
/// the console's port and its sign-in token.
fn serve_with_console(env: &Env) -> (Instance, u16, String) {
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (port, console) = (free(), free());
    let mut child = env
        .quiver()
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(["--console", &format!("127.0.0.1:{console}")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let log = Arc::new(Mutex::new(String::new()));
    let mut token = None;
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited: {}",
            log.lock().unwrap()
        );
        log.lock().unwrap().push_str(&line);
        if let Some((_, t)) = line.split_once("/login?token=") {
            token = Some(t.trim().to_owned());
        }
        if line.contains("/hooks/") {
            break;
        }
    }
    let kept = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).is_ok_and(|n| n > 0) {
            kept.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    let instance = Instance {
        server: Server(child),
        port,
        log,
    };
    (instance, console, token.expect("no console login link"))
}

/// Opens the console's event stream (`GET /events`, the owner's bearer token) with a raw
/// HTTP client; each hint's name and when it arrived (Unix ms).
fn hints(console: u16, token: &str) -> Receiver<(String, i64)> {
    let mut stream = TcpStream::connect(("127.0.0.1", console)).unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1:{console}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let (send, receive) = channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            let at = now_ms();
            if let Some(hint) = line.trim().strip_prefix("event:")
                && send.send((hint.trim().to_owned(), at)).is_err()
            {
                return;
            }
            line.clear();
        }
    });
    receive
}

/// The first `approvals` hint within `limit` (other hints skipped): when it arrived.
fn next_approvals_hint(hints: &Receiver<(String, i64)>, limit: Duration) -> i64 {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let (hint, at) = hints
            .recv_timeout(left)
            .expect("no `approvals` hint on the other instance's console");
        if hint == "approvals" {
            return at;
        }
    }
}

/// Drains the hints already sent.
fn drain(hints: &Receiver<(String, i64)>) {
    while hints.recv_timeout(Duration::from_millis(300)).is_ok() {}
}

#[test]
fn an_event_stored_by_another_process_starts_its_run_on_an_instance_at_once() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "wakeups_event", package);
    let instance = env.serve();
    let emit = || {
        let out = env
            .quiver()
            .args(["events", "emit", "ping"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let runs = || {
        psql(
            &env.url,
            "SELECT count(*) FROM wf_runs WHERE workflow = 'clock.pong'",
        )
        .parse::<usize>()
        .unwrap()
    };
    for round in 1..=ROUNDS {
        // Rounds start at varied points of the scheduler's poll.
        std::thread::sleep(Duration::from_millis((round as u64 * 137) % 400));
        emit();
        env.wait("the event's run", Duration::from_secs(10), || {
            runs() >= round
        });
    }
    // The run's creation after the event's, both stamped by the database's clock.
    let latencies: Vec<i64> = psql(
        &env.url,
        "SELECT r.created_at - e.created_at FROM wf_runs r \
         JOIN wf_events e ON r.idempotency_key = 'event:' || e.id WHERE r.workflow = 'clock.pong'",
    )
    .lines()
    .map(|l| l.parse().unwrap())
    .collect();
    assert_eq!(latencies.len(), ROUNDS, "{latencies:?}");
    let (p50, p99) = percentiles(latencies.clone());
    eprintln!(
        "event stored by another process -> its run started on the instance: p50 {p50} ms, p99 {p99} ms over {ROUNDS} events"
    );
    // The scheduler's poll alone would take about 500 ms at the median.
    assert!(p50 < 200, "p50 {p50} ms: {latencies:?}");
    assert!(p99 < 700, "p99 {p99} ms: {latencies:?}");
    env.wait("every run's step", Duration::from_secs(20), || {
        env.ledger().len() >= ROUNDS
    });
    assert!(instance.serves());
}

#[test]
fn a_card_created_and_answered_on_one_instance_is_hinted_on_anothers_console_at_once() {
    let Some(server) = instances::postgres() else {
        return;
    };
    let env = Env::new(&server, "wakeups_console", package);
    let (a, _, _) = serve_with_console(&env);
    let (_b, console, token) = serve_with_console(&env);
    let hints = hints(console, &token);
    drain(&hints);
    let mut created = Vec::new();
    let mut answered = Vec::new();
    for round in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis((round as u64 * 137) % 400));
        // A new conversation on A asks for consent: a card.
        let mut client = Client::connect(a.port, env.home.path());
        let asked = client
            .call("clock__slow", json!({"tag": format!("c{round}")}), None)
            .unwrap();
        assert!(text(&asked).contains("consent"), "{asked}");
        let hinted = next_approvals_hint(&hints, Duration::from_secs(5));
        let card = psql(
            &env.url,
            "SELECT id, created_at FROM approvals WHERE status = 'pending'",
        );
        let (card, at) = card.split_once('|').unwrap_or_else(|| panic!("{card}"));
        created.push(hinted - at.parse::<i64>().unwrap());
        drain_quick(&hints);
        // Answered from another process; B hears it too.
        let out = env
            .quiver()
            .args(["approvals", "approve", card])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hinted = next_approvals_hint(&hints, Duration::from_secs(5));
        let at: i64 = psql(
            &env.url,
            &format!("SELECT answered_at FROM approvals WHERE id = '{card}'"),
        )
        .parse()
        .unwrap();
        answered.push(hinted - at);
        drain_quick(&hints);
    }
    let (c50, c99) = percentiles(created.clone());
    let (a50, a99) = percentiles(answered.clone());
    eprintln!(
        "card created on A -> hint on B's console: p50 {c50} ms, p99 {c99} ms; \
         answered -> hint: p50 {a50} ms, p99 {a99} ms ({ROUNDS} cards)"
    );
    // B's own look runs once a second: about 500 ms at the median without the notification.
    for (what, samples) in [("created", &created), ("answered", &answered)] {
        let (p50, p99) = percentiles(samples.clone());
        assert!(p50 <= 100, "{what}: p50 {p50} ms: {samples:?}");
        assert!(p99 <= 400, "{what}: p99 {p99} ms: {samples:?}");
    }
}

/// Drops the hints that follow one at once (the look's own hint for the same change).
fn drain_quick(hints: &Receiver<(String, i64)>) {
    while hints.recv_timeout(Duration::from_millis(150)).is_ok() {}
}
