//! The workflow side of `quiver serve` through the built binary, real sockets, the sandbox and
//! a real SQLite file: a schedule fires while it serves (and two servers on one database fire
//! each fire once, each step running once), and webhooks beside MCP: a signed delivery is
//! `202 {run_id}` and a run, the same `Idempotency-Key` is the same run, and a bad signature,
//! an unknown hook, a body too large and a body that does not fit the input are refused; and
//! `get_run` through the pinned Python MCP SDK reads a run a call started, once it waits and
//! once the scheduler woke it to its end, and a call whose step runs longer than
//! `workflow_call_wait` returns `{run_id, status: running}` while the run goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

mod support;

use support::{Server, python_with};

const SECRET: &str = "s3cret-for-hooks";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The package `clock`: a tool (perception, so re-run safe) that appends its step's idempotency
/// key to a ledger in its data folder, sleeps `sleep` seconds and returns its arguments; an
/// exposed workflow that naps a second, one whose step takes 3 s, two started by webhooks and,
/// with `tick`, one fired every second.
fn package(root: &Path, tick: bool) {
    write(
        root,
        "clock/quiver.yaml",
        "id: clock\ndescription: Workflows of the serve test\nconfig:\n  type: object\n  properties:\n    hook_secret: {type: string, secret: true}\n",
    );
    write(
        root,
        "clock/tools/mark/tool.yaml",
        "description: Notes the call in a ledger and returns its arguments\ncategory: perception\ninput: {type: object}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "clock/tools/mark/main.py",
        "import json, os, sys, time\nrequest = json.load(sys.stdin)\nkey = request['context']['idempotency_key']\nwith open(os.path.join(os.environ['QUIVER_DATA_DIR'], 'ledger'), 'a') as f:\n    f.write(key + '\\n')\ntime.sleep(request['arguments'].get('sleep', 0))\nprint(json.dumps({'args': request['arguments'], 'key': key}))\n",
    );
    if tick {
        write(
            root,
            "clock/workflows/tick.yaml",
            "description: Every second\ntrigger: {schedule: {cron: '* * * * * *', overlap: allow}}\nsteps:\n  - id: m\n    tool: mark\n    with: {at: '{{ trigger.fire_at }}'}\n",
        );
    }
    write(
        root,
        "clock/workflows/nap.yaml",
        "description: Naps a second, then marks the text\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: nap\n    wait: 1s\n  - id: m\n    tool: mark\n    with: {t: '{{ input.text }}'}\noutput: {said: '{{ steps.m.output.args.t }}'}\n",
    );
    write(
        root,
        "clock/workflows/lag.yaml",
        "description: Marks the text slowly\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: m\n    tool: mark\n    with: {t: '{{ input.text }}', sleep: 3}\noutput: {said: '{{ steps.m.output.args.t }}'}\n",
    );
    write(
        root,
        "clock/workflows/slow.yaml",
        "description: A slow delivery\ntrigger: {webhook: {name: slow, secret: hook_secret}}\ninput: {type: object, properties: {sleep: {type: number}}, required: [sleep]}\nsteps:\n  - id: m\n    tool: mark\n    with: {sleep: '{{ input.sleep }}'}\n",
    );
    write(
        root,
        "clock/workflows/push.yaml",
        "description: A push arrives\ntrigger: {webhook: {name: push, secret: hook_secret}}\ninput: {type: object, properties: {ref: {type: string}}, required: [ref]}\nsteps:\n  - id: m\n    tool: mark\n    with: {ref: '{{ input.ref }}'}\noutput: '{{ steps.m.output.args }}'\n",
    );
}

struct Env {
    home: tempfile::TempDir,
    packages: tempfile::TempDir,
    // A PostgreSQL database of its own, dropped with the test: (server URL, name).
    database: Option<(String, String)>,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.database {
            psql(
                server,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
        }
    }
}

/// Runs one statement with `psql` against the server at `url`.
fn psql(url: &str, sql: &str) {
    let status = Command::new("psql")
        .args([url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "psql {sql}");
}

/// The test server's URL (`QUIVER_TEST_POSTGRES`), or `None` after saying why the test skips;
/// a failure instead when `QUIVER_REQUIRE_POSTGRES=1` (scripts/test.sh starts a cluster).
#[allow(clippy::print_stderr)]
fn postgres() -> Option<String> {
    match std::env::var("QUIVER_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("QUIVER_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "QUIVER_REQUIRE_POSTGRES=1 but QUIVER_TEST_POSTGRES is not set"
            );
            eprintln!("skipped: QUIVER_TEST_POSTGRES is not set (scripts/pg-cluster.sh start DIR)");
            None
        }
    }
}

impl Env {
    /// A state folder and the `clock` package (`tick`: with the workflow fired every second;
    /// without it nothing wakes the scheduler but what the test does).
    fn new(tick: bool) -> Env {
        Env::with_state(tick, None)
    }

    /// The same with the state in a fresh database of the PostgreSQL server at `server`
    /// (the config's `database:`), or in the state folder's SQLite file.
    fn with_state(tick: bool, server: Option<&str>) -> Env {
        let database = server.map(|server| {
            let name = format!("serve_{}_{}", std::process::id(), now_secs());
            psql(server, &format!("CREATE DATABASE {name}"));
            (server.to_owned(), name)
        });
        let env = Env {
            home: tempfile::tempdir().unwrap(),
            packages: tempfile::tempdir().unwrap(),
            database,
        };
        package(env.packages.path(), tick);
        let database = match &env.database {
            Some((server, name)) => {
                let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
                format!("database: {base}/{name}\n")
            }
            None => String::new(),
        };
        write(
            env.home.path(),
            "config.yaml",
            &format!(
                "{database}runtime:\n  workflow_call_wait: 0.5\n  settings:\n    clock:\n      hook_secret: {SECRET}\nmcp:\n  tokens:\n    - {{token: alice-token, user: alice, role: trusted}}\n    - {{token: bob-token, user: bob, role: user}}\n"
            ),
        );
        env
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", self.packages.path().to_str().unwrap()])
            .env("QUIVER_HOME", self.home.path())
            .env("QUIVER_CONFIG", self.home.path().join("config.yaml"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        command
    }

    /// `quiver serve --http` on a free port; its port once it listens.
    fn serve(&self) -> (Server, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = self
            .command()
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server exited: {seen}"
            );
            seen.push_str(&line);
            if line.contains("/hooks/") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        (Server(child), port)
    }

    fn runs(&self) -> Vec<Value> {
        let out = self
            .command()
            .args(["runs", "list", "--json"])
            .output()
            .unwrap();
        support::json(&out).as_array().unwrap().clone()
    }

    /// Waits until `done` holds for the stored runs (at most 30 s).
    fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let runs = self.runs();
            if done(&runs) {
                return runs;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{what}: {runs:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every idempotency key the tool was called with, and how often.
    fn ledger(&self) -> BTreeMap<String, usize> {
        let mut keys = BTreeMap::new();
        for file in find(self.home.path(), "ledger") {
            for line in std::fs::read_to_string(file).unwrap().lines() {
                *keys.entry(line.to_owned()).or_default() += 1;
            }
        }
        keys
    }
}

fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(find(&path, name));
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
    out
}

fn completed_schedule_runs(runs: &[Value]) -> Vec<&Value> {
    runs.iter()
        .filter(|r| r["trigger"]["kind"] == "schedule" && r["status"] == "completed")
        .collect()
}

#[test]
fn a_schedule_fires_while_serve_runs() {
    let env = Env::new(true);
    let (_server, _) = env.serve();
    let runs = env.wait_for("a fire completed", |runs| {
        !completed_schedule_runs(runs).is_empty()
    });
    let run = completed_schedule_runs(&runs)[0];
    assert_eq!(run["workflow"], "clock.tick");
    assert_eq!(run["attended"], false);
    assert_eq!(run["started_by"], "scheduler");
    // The step ran with the fire's time and the step's idempotency key.
    let shown = support::json(
        &env.command()
            .args(["runs", "show", run["id"].as_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        shown["attempts"][0]["output"]["args"]["at"],
        run["trigger"]["fire_at"]
    );
    assert_eq!(
        shown["attempts"][0]["output"]["key"],
        format!("{}:m", run["id"].as_str().unwrap())
    );
}

#[test]
fn two_servers_on_one_database_fire_each_fire_once() {
    fires_once_across_two_servers(&Env::new(true));
}

/// Two `quiver serve` processes on one PostgreSQL database (issue 26): each fire starts one
/// run, each step runs once, whichever instance claimed the fire and drove the run.
#[test]
fn two_servers_on_one_postgres_database_fire_each_fire_once() {
    if let Some(server) = postgres() {
        let env = Env::with_state(true, Some(&server));
        fires_once_across_two_servers(&env);
        // The state was in PostgreSQL: no SQLite file was made.
        assert!(
            !find(env.home.path(), "state.db")
                .iter()
                .any(|p| p.is_file())
        );
    }
}

fn fires_once_across_two_servers(env: &Env) {
    let (first, _) = env.serve();
    let (second, _) = env.serve();
    let runs = env.wait_for("five fires completed", |runs| {
        completed_schedule_runs(runs).len() >= 5
    });
    drop((first, second));
    let fires: Vec<&str> = runs
        .iter()
        .filter(|r| r["trigger"]["kind"] == "schedule")
        .map(|r| r["trigger"]["fire_at"].as_str().unwrap())
        .collect();
    let mut unique = fires.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        fires.len(),
        "a fire started two runs: {fires:?}"
    );
    // Each completed run's step ran once, whichever server drove it.
    let ledger = env.ledger();
    for run in completed_schedule_runs(&runs) {
        let key = format!("{}:m", run["id"].as_str().unwrap());
        assert_eq!(ledger.get(&key), Some(&1), "{key}: {ledger:?}");
    }
}

/// One raw HTTP/1.1 POST to `path`; the status and the JSON body.
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // A server may answer (413) before it reads a large body.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Now, in Unix seconds, as `X-Quiver-Timestamp` carries it.
fn now_secs() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string()
}

/// `X-Quiver-Signature` of a delivery signed at `at` with Idempotency-Key `key` ("" for none).
fn sign(at: &str, key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{at}.{key}.").as_bytes());
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        tag.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[test]
fn webhooks_start_runs_once_per_key_and_refuse_what_is_not_theirs() {
    let env = Env::new(false);
    let (_server, port) = env.serve();
    let hook = "/hooks/clock/push";
    let body = json!({"ref": "refs/heads/main"}).to_string().into_bytes();
    let at = now_secs();
    let signed = |key: &str| {
        let signature = sign(&at, key, &body);
        post(
            port,
            hook,
            &[
                ("X-Quiver-Signature", &signature),
                ("X-Quiver-Timestamp", &at),
                ("Idempotency-Key", key),
            ],
            &body,
        )
    };
    // No bearer token: the signature is the authentication.
    let (status, first) = signed("delivery-1");
    assert_eq!(status, 202, "{first}");
    let run_id = first["run_id"].as_str().unwrap().to_owned();
    assert_eq!(first["duplicate"], false);
    // The run row was committed before the answer.
    assert!(env.runs().iter().any(|r| r["id"] == run_id.as_str()));
    let (status, again) = signed("delivery-1");
    assert_eq!(
        (status, &again["run_id"], &again["duplicate"]),
        (202, &json!(run_id), &json!(true))
    );
    let (status, other) = signed("delivery-2");
    assert_eq!(status, 202);
    assert_ne!(other["run_id"], json!(run_id));
    // Refusals.
    let tampered = br#"{"ref": "refs/heads/evil"}"#;
    let big = vec![b' '; (1 << 20) + 1];
    let good = sign(&at, "", &body);
    // (path, headers, body, status)
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a [u8], u16);
    let cases: [Case<'_>; 8] = [
        (
            hook,
            vec![
                ("X-Quiver-Signature", good.clone()),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            tampered,
            401,
        ),
        (hook, vec![("X-Quiver-Timestamp", at.clone())], &body, 401),
        (
            hook,
            vec![
                ("X-Quiver-Signature", "sha256=00".into()),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            &body,
            401,
        ),
        (
            "/hooks/clock/nope",
            vec![
                ("X-Quiver-Signature", good.clone()),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            &body,
            404,
        ),
        (
            "/hooks/nobody/push",
            vec![
                ("X-Quiver-Signature", good.clone()),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            &body,
            404,
        ),
        (
            hook,
            vec![
                ("X-Quiver-Signature", sign(&at, "", b"{}")),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            b"{}",
            400,
        ),
        (
            hook,
            vec![
                ("X-Quiver-Signature", sign(&at, "", b"not json")),
                ("X-Quiver-Timestamp", at.clone()),
            ],
            b"not json",
            400,
        ),
        (hook, vec![], &big, 413),
    ];
    for (path, headers, body, want) in cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, answer) = post(port, path, &headers, body);
        assert_eq!(status, want, "{path} {headers:?}: {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    // The scheduler drives both runs to their end; the first delivery's key ran once.
    let runs = env.wait_for("the deliveries' runs completed", |runs| {
        runs.iter()
            .filter(|r| r["workflow"] == "clock.push" && r["status"] == "completed")
            .count()
            == 2
    });
    let run = runs.iter().find(|r| r["id"] == run_id.as_str()).unwrap();
    assert_eq!(run["output"], json!({"ref": "refs/heads/main"}));
    assert_eq!(run["started_by"], "webhook");
    assert_eq!(run["trigger"]["delivery"], "delivery-1");
    assert_eq!(env.ledger().get(&format!("{run_id}:m")), Some(&1));
    assert_eq!(
        runs.iter()
            .filter(|r| r["workflow"] == "clock.push")
            .count(),
        2
    );
}

/// Issue 22 item 21: a captured delivery cannot be replayed. Its signature covers its time and
/// key: later than the replay window it is refused, under another key it is refused, within
/// the window it is the same delivery; a second signature header is refused; and every
/// refused signature leaves an audit record.
#[test]
fn a_captured_delivery_is_not_replayed_and_a_forged_one_is_audited() {
    let env = Env::new(false);
    let (_server, port) = env.serve();
    let hook = "/hooks/clock/push";
    let body = json!({"ref": "refs/heads/main"}).to_string().into_bytes();
    let at = now_secs();
    let signature = sign(&at, "", &body);
    let deliver = |headers: &[(&str, &str)]| post(port, hook, headers, &body);
    let captured = [
        ("X-Quiver-Signature", signature.as_str()),
        ("X-Quiver-Timestamp", at.as_str()),
    ];
    let (status, first) = deliver(&captured);
    assert_eq!(status, 202, "{first}");
    // The same capture again, at once: the same delivery, no second run.
    let (status, again) = deliver(&captured);
    assert_eq!(
        (status, &again["run_id"], &again["duplicate"]),
        (202, &first["run_id"], &json!(true))
    );
    // Under a key of the replayer's choosing: not the delivery's signature.
    let (status, keyed) = deliver(&[captured[0], captured[1], ("Idempotency-Key", "fresh")]);
    assert_eq!(status, 401, "{keyed}");
    // Signed an hour ago (a delivery captured then): out of the window.
    let old = (at.parse::<u64>().unwrap() - 3600).to_string();
    let stale = sign(&old, "", &body);
    let (status, answer) = deliver(&[("X-Quiver-Signature", &stale), ("X-Quiver-Timestamp", &old)]);
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("replay"),
        "{answer}"
    );
    // A second signature header beside a good one.
    let (status, answer) = deliver(&[
        captured[0],
        ("X-Quiver-Signature", "sha256=00"),
        captured[1],
    ]);
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("more than once"),
        "{answer}"
    );
    let runs: Vec<_> = env
        .runs()
        .into_iter()
        .filter(|r| r["workflow"] == "clock.push")
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    // Each refused signature is in the audit log.
    let out = env
        .command()
        .args(["audit", "--json", "--session", "hook:clock/push"])
        .output()
        .unwrap();
    let records: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let refused: Vec<_> = records
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "webhook_refused" && r["status"] == "refused")
        .collect();
    assert_eq!(refused.len(), 3, "{records}");
}

#[test]
fn get_run_through_the_python_sdk_reads_a_run_the_scheduler_finishes() {
    let env = Env::new(false);
    let (_server, port) = env.serve();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/get_run.py");
    for mode in ["legacy", "2026-07-28"] {
        let output = Command::new(python_with("mcp, httpx2"))
            .arg(&script)
            .args([
                &format!("http://127.0.0.1:{port}/mcp"),
                mode,
                "alice-token",
                "bob-token",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("all ok"),
            "{mode}:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_run_interrupted_by_kill_9_resumes_when_serve_starts_again() {
    let env = Env::new(false);
    let (server, port) = env.serve();
    let body = br#"{"sleep": 60}"#;
    let at = now_secs();
    let (status, answer) = post(
        port,
        "/hooks/clock/slow",
        &[
            ("X-Quiver-Signature", &sign(&at, "", body)),
            ("X-Quiver-Timestamp", &at),
        ],
        body,
    );
    assert_eq!(status, 202, "{answer}");
    let key = format!("{}:m", answer["run_id"].as_str().unwrap());
    let started = Instant::now();
    while !env.ledger().contains_key(&key) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Killed in the middle of the step; the next server takes the same engine owner id and
    // runs the (re-run safe) step again at once, with the same key, instead of waiting out
    // the dead process's lease. The new attempt sleeps 60 s too: only the crash is checked.
    drop(server);
    let (_server, _) = env.serve();
    let started = Instant::now();
    while env.ledger().get(&key) != Some(&2) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run was not resumed: {:?}",
            env.ledger()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let run = env
        .runs()
        .into_iter()
        .find(|r| format!("{}:m", r["id"].as_str().unwrap()) == key)
        .unwrap();
    assert_eq!(run["status"], "running", "{run}");
    let shown = support::json(
        &env.command()
            .args(["runs", "show", run["id"].as_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    let statuses: Vec<&str> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["crashed", "started"], "{shown:#}");
}

/// Issue 22 item 21: after an outage a schedule does not start a storm of runs. The per-second
/// schedule missed about 18 fires while `quiver serve` was down; the next start starts at most
/// the newest 10 of them (then one a second), not all of them.
#[test]
fn an_outage_starts_at_most_ten_of_the_fires_it_missed() {
    let env = Env::new(true);
    let ticks = |runs: &[Value]| {
        runs.iter()
            .filter(|r| r["workflow"] == "clock.tick")
            .count()
    };
    let (server, _) = env.serve();
    env.wait_for("a first fire", |runs| ticks(runs) > 0);
    drop(server);
    let before = ticks(&env.runs());
    std::thread::sleep(Duration::from_secs(18));
    let (server, _) = env.serve();
    std::thread::sleep(Duration::from_millis(1500));
    drop(server);
    let started = ticks(&env.runs()) - before;
    assert!(
        (1..=14).contains(&started),
        "{started} runs started after an 18 s outage"
    );
}
