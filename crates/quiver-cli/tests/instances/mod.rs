//! What the multi-instance tests share (serve_failover.rs, serve_faults.rs,
//! serve_request_states.rs, serve_turns.rs, serve_digests.rs, serve_wakeups.rs,
//! postgres_figures.rs): a database of their own on the PostgreSQL
//! server of `QUIVER_TEST_POSTGRES`, `quiver serve --http` instances on it, `psql` for the
//! rows, a signed webhook, and a small MCP HTTP client ([`mcp`]). Each test binary uses a part
//! of it.
#![allow(dead_code)]

pub mod mcp;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::support::Server;

/// The lease the instances take on a step (`QUIVER_WORKFLOW_LEASE_MS`).
pub const LEASE_MS: u64 = 3_000;

/// The webhook secret of the test packages (`hook_secret` of the package `clock`).
pub const SECRET: &str = "s3cret-for-hooks";

/// Writes `text` to `root/rel`, making its folders.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Runs one statement with `psql` against `url` and returns its rows, `|`-separated.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-qtA", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The server's URL from `QUIVER_TEST_POSTGRES`; `None` (the test skips, saying why) without
/// it, a failure instead with `QUIVER_REQUIRE_POSTGRES=1`.
pub fn postgres() -> Option<String> {
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

/// One instance: the process, its port, and what it logged.
pub struct Instance {
    pub server: Server,
    pub port: u16,
    pub log: Arc<Mutex<String>>,
}

impl Instance {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.server.0.id()
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// Everything it logged so far.
    pub fn logged(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Whether it still accepts connections.
    pub fn serves(&self) -> bool {
        TcpStream::connect(("127.0.0.1", self.port)).is_ok()
    }
}

/// A state folder and a database of its own on the server (dropped with the test).
pub struct Env {
    pub home: tempfile::TempDir,
    pub packages: tempfile::TempDir,
    /// The package root the instances serve: `packages`, unless [`Env::on_root`] named
    /// another.
    pub root: PathBuf,
    pub server: String,
    pub url: String,
    pub name: String,
}

impl Drop for Env {
    fn drop(&mut self) {
        psql(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

impl Env {
    /// A fresh database `<tag>_<pid>` and the packages `package` writes into its root; the
    /// config names the database and the test packages' settings.
    pub fn new(server: &str, tag: &str, package: impl FnOnce(&Path)) -> Env {
        let settings = format!("runtime:\n  settings:\n    clock:\n      hook_secret: {SECRET}\n");
        Env::with_config(server, tag, package, &settings)
    }

    /// [`Env::new`] with `config` (YAML) after the database's line in the config file.
    pub fn with_config(server: &str, tag: &str, package: impl FnOnce(&Path), config: &str) -> Env {
        let name = format!("{tag}_{}", std::process::id());
        psql(
            server,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        );
        psql(server, &format!("CREATE DATABASE {name}"));
        let base = server.rsplit_once('/').map_or(server, |(b, _)| b);
        let packages = tempfile::tempdir().unwrap();
        let env = Env {
            home: tempfile::tempdir().unwrap(),
            root: packages.path().to_owned(),
            packages,
            server: server.to_owned(),
            url: format!("{base}/{name}"),
            name,
        };
        package(env.packages.path());
        write(
            env.home.path(),
            "config.yaml",
            &format!("database: {}\n{config}", env.url),
        );
        env
    }

    /// The same, serving the packages of `root` instead of its own.
    pub fn on_root(mut self, root: PathBuf) -> Env {
        self.root = root;
        self
    }

    /// The owner's bearer token the first instance made (`mcp-token` in the state folder).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.home.path().join("mcp-token"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// A `quiver` command on this state folder and database.
    pub fn quiver(&self) -> Command {
        self.quiver_at(&self.root)
    }

    /// [`Env::quiver`] with the packages of `root` instead of the test's own root.
    pub fn quiver_at(&self, root: &Path) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", root.to_str().unwrap()])
            .env("QUIVER_HOME", self.home.path())
            .env("QUIVER_CONFIG", self.home.path().join("config.yaml"))
            .env("QUIVER_WORKFLOW_LEASE_MS", LEASE_MS.to_string())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        command
    }

    /// `quiver serve --http` on a free port, once it listens; its log kept.
    pub fn serve(&self) -> Instance {
        self.serve_with(self.quiver())
    }

    /// [`Env::serve`] of `command` (an [`Env::quiver`] or [`Env::quiver_at`]).
    pub fn serve_with(&self, mut command: Command) -> Instance {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = command
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::new(Mutex::new(String::new()));
        loop {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server exited: {}",
                log.lock().unwrap()
            );
            log.lock().unwrap().push_str(&line);
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
        Instance {
            server: Server(child),
            port,
            log,
        }
    }

    /// Three instances.
    pub fn three(&self) -> Vec<Instance> {
        (0..3).map(|_| self.serve()).collect()
    }

    /// Delivers `body` to the webhook `clock/<hook>` through `instance`; the answer's JSON.
    pub fn hook(&self, instance: &Instance, hook: &str, body: &str) -> Value {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .to_string();
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{at}..").as_bytes());
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex(&mac.finalize().into_bytes()));
        let mut stream = TcpStream::connect(("127.0.0.1", instance.port)).unwrap();
        write!(
            stream,
            "POST /hooks/clock/{hook} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-Quiver-Signature: {signature}\r\nX-Quiver-Timestamp: {at}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (_, json) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{response}"));
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {response}"))
    }

    /// One column of the run's row.
    pub fn run_field(&self, run: &str, column: &str) -> String {
        psql(
            &self.url,
            &format!("SELECT {column} FROM wf_runs WHERE id = '{run}'"),
        )
    }

    /// The lines of every `ledger` file the tools wrote in the state folder.
    pub fn ledger(&self) -> Vec<String> {
        find(self.home.path(), "ledger")
            .iter()
            .flat_map(|f| {
                std::fs::read_to_string(f)
                    .unwrap()
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits (at most `limit`) until `done` holds; how long it took.
    pub fn wait(&self, what: &str, limit: Duration, done: impl FnMut() -> bool) -> Duration {
        wait(what, limit, done)
    }

    /// The audit is complete: no call is still in flight (every started call has its end,
    /// `interrupted` included), checked once `limit` passed at the latest.
    pub fn assert_audit_complete(&self, limit: Duration) {
        wait("every started call's end", limit, || {
            psql(&self.url, "SELECT count(*) FROM calls_in_flight") == "0"
        });
    }

    /// No approval was used twice and none is both used and unanswered.
    pub fn assert_approvals_sound(&self) {
        let bad = psql(
            &self.url,
            "SELECT id, status FROM approvals WHERE used_at IS NOT NULL AND status <> 'approved'",
        );
        assert_eq!(bad, "", "an approval used without a yes");
    }
}

/// Waits (at most `limit`) until `done` holds; how long it took.
pub fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed()
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file called `name` under `dir`.
pub fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
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
