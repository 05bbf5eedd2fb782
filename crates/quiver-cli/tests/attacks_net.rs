//! Attacks on the network proxy and the output channel through real sandboxed tools (the
//! built `quiver-sandbox-exec` launcher, Python tools, canary servers on 127.0.0.1): the
//! runtime's own listener, patterns against IP literals, ambiguous requests, a Host smuggled
//! into a tunnel, and a 1 GiB stderr flood. Each attack has a random canary that must never
//! reach the tool; a normal call still runs afterwards. Skips where the sandbox cannot run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quiver_sandbox::proxy::{denial_message, register_own_listener};
use quiver_sandbox::{Access, Job, Output, Sandbox, SandboxConfig, SandboxError};

fn canary() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    format!("CANARY-{:016x}", h.finish())
}

/// A server on 127.0.0.1 answering every request with `body`.
fn server(body: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

struct Lab {
    _state: tempfile::TempDir,
    packages: tempfile::TempDir,
    sandbox: Sandbox,
}

fn lab() -> Option<Lab> {
    if let Err(why) = quiver_sandbox::support() {
        eprintln!("SKIPPED: the sandbox cannot run here: {why}");
        return None;
    }
    let state = tempfile::tempdir().unwrap();
    let config = SandboxConfig::new(
        vec![env!("CARGO_BIN_EXE_quiver-sandbox-exec").into()],
        state.path().to_owned(),
    );
    let sandbox = Sandbox::new(config).unwrap();
    Some(Lab {
        _state: state,
        packages: tempfile::tempdir().unwrap(),
        sandbox,
    })
}

impl Lab {
    /// A package `id` whose tool runs `main.py` with `network` declared.
    fn job(&self, id: &str, script: &str, network: &[&str]) -> Job {
        let dir = self.packages.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.py"), script).unwrap();
        Job {
            package: id.to_owned(),
            package_dir: dir.clone(),
            command: vec!["python3".into(), "main.py".into()],
            command_dir: dir,
            access: Access {
                network: network.iter().map(|s| (*s).to_owned()).collect(),
                ..Access::default()
            },
            settings: serde_json::Map::new(),
            timeout: Duration::from_secs(30),
            limits: Default::default(),
            python_env: None,
        }
    }

    fn run(&self, job: &Job) -> Result<Output, SandboxError> {
        self.sandbox.run(job, b"{}")
    }

    /// Runs a tool that sends `request` (Python bytes, `{port}` filled in) to its proxy and
    /// prints the whole answer.
    fn send(&self, id: &str, network: &[&str], request: &str) -> Result<String, SandboxError> {
        let script = format!(
            r#"
import os, socket, sys
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', port), timeout=10)
s.sendall({request})
data = b''
while True:
    try:
        chunk = s.recv(65536)
    except Exception:
        break
    if not chunk:
        break
    data += chunk
sys.stdout.write(data.decode('latin-1'))
"#
        );
        let out = self.run(&self.job(id, &script, network))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[test]
fn proxy_attacks_are_refused_and_a_normal_call_still_runs() {
    let Some(lab) = lab() else { return };
    let secret = canary();
    let target = server(secret.clone());
    let port = target.port();
    let own = server(secret.clone());
    register_own_listener(own);
    let own_port = own.port();
    type Case = (
        &'static str,
        &'static [&'static str],
        String,
        Result<&'static str, SandboxError>,
    );
    let cases: Vec<Case> = vec![
        // The runtime's own listener, though `localhost` and the literal are declared.
        (
            "own-listener",
            &["localhost", "127.0.0.1"],
            format!("b'GET http://localhost:{own_port}/ HTTP/1.1\\r\\n\\r\\n'"),
            Err(SandboxError::Denied(denial_message("localhost"))),
        ),
        (
            "own-listener-tunnel",
            &["127.0.0.1"],
            format!("b'CONNECT 127.0.0.1:{own_port} HTTP/1.1\\r\\n\\r\\n'"),
            Err(SandboxError::Denied(denial_message("127.0.0.1"))),
        ),
        // Patterns never match IP literals; `*` means public addresses.
        (
            "pattern-literal",
            &["*.0.0.1"],
            format!("b'GET http://127.0.0.1:{port}/ HTTP/1.1\\r\\n\\r\\n'"),
            Err(SandboxError::Denied(denial_message("127.0.0.1"))),
        ),
        (
            "star-loopback",
            &["*"],
            format!("b'GET http://127.0.0.1:{port}/ HTTP/1.1\\r\\n\\r\\n'"),
            Err(SandboxError::Denied(denial_message("127.0.0.1"))),
        ),
        // Ambiguous requests.
        (
            "two-hosts",
            &["localhost"],
            format!(
                "b'GET http://localhost:{port}/ HTTP/1.1\\r\\nHost: localhost:{port}\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'"
            ),
            Ok("HTTP/1.1 400"),
        ),
        (
            "bare-lf-host",
            &["localhost"],
            format!(
                "b'GET http://localhost:{port}/ HTTP/1.1\\r\\nX: y\\nHost: 127.0.0.1\\r\\n\\r\\n'"
            ),
            Ok("HTTP/1.1 400"),
        ),
        (
            "obs-fold",
            &["localhost"],
            format!(
                "b'GET http://localhost:{port}/ HTTP/1.1\\r\\nX: y\\r\\n Host: 127.0.0.1\\r\\n\\r\\n'"
            ),
            Ok("HTTP/1.1 400"),
        ),
        (
            "tunnel-host",
            &["localhost"],
            format!(
                "b'CONNECT localhost:{port} HTTP/1.1\\r\\n\\r\\nGET / HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n'"
            ),
            Err(SandboxError::Denied(denial_message("127.0.0.1"))),
        ),
    ];
    for (id, network, request, want) in cases {
        let got = lab.send(id, network, &request);
        if let Ok(answer) = &got {
            assert!(
                !answer.contains(&secret),
                "{id}: the canary leaked: {answer}"
            );
        }
        match want {
            Ok(status) => {
                let answer = got.unwrap_or_else(|e| panic!("{id}: {e}"));
                assert!(answer.starts_with(status), "{id}: {answer}");
            }
            Err(err) => assert_eq!(got, Err(err), "{id}"),
        }
    }
    // TLS in a tunnel to an allowed host asking that server for another name (SNI).
    let script = format!(
        r#"
import os, socket, ssl, sys
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', port), timeout=10)
s.sendall(b'CONNECT localhost:{port} HTTP/1.1\r\n\r\n')
answer = s.recv(4096)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    answer += ctx.wrap_socket(s, server_hostname='evil.test').recv(4096)
except Exception as e:
    answer += repr(e).encode()
sys.stdout.write(answer.decode('latin-1'))
"#
    );
    let got = lab.run(&lab.job("tls-sni", &script, &["localhost"]));
    assert_eq!(
        got.map(|o| o.code),
        Err(SandboxError::Denied(denial_message("evil.test")))
    );
    // The same tool, asking plainly, is served.
    let answer = lab
        .send(
            "plain",
            &["localhost"],
            &format!(
                "b'GET http://localhost:{port}/ HTTP/1.1\\r\\nHost: localhost:{port}\\r\\n\\r\\n'"
            ),
        )
        .unwrap();
    assert!(answer.ends_with(&secret), "{answer}");
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Runs `f` and returns the runtime's peak resident growth during it (sampled every 5 ms).
fn peak_growth<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let base = rss_kib();
    let (stop, peak) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(base)),
    );
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = f();
    peak.fetch_max(rss_kib(), Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    (out, peak.load(Ordering::Relaxed) - base)
}

#[test]
fn a_stderr_flood_does_not_grow_the_runtime() {
    let Some(lab) = lab() else { return };
    let secret = canary();
    // 1 GiB on stderr without a newline, then the canary.
    let script = format!(
        r#"
import sys
w = sys.stderr.buffer
block = b'x' * (1 << 20)
for _ in range(1024):
    w.write(block)
w.write(b'{secret}')
w.flush()
print('{{}}')
"#
    );
    let job = lab.job("flood", &script, &[]);
    let started = Instant::now();
    let (out, growth) = peak_growth(|| lab.run(&job));
    let out = out.unwrap();
    eprintln!(
        "FIGURE: runtime peak RSS growth during a 1 GiB stderr flood: {} KiB ({:.1} s)",
        growth,
        started.elapsed().as_secs_f64()
    );
    assert!(growth < 16 * 1024, "the runtime grew by {growth} KiB");
    assert_eq!(out.code, 0);
    assert!(out.stderr_tail.ends_with(&secret), "the tail keeps the end");
    assert!(out.stderr_tail.len() <= 4096);
    // A normal call still runs.
    let ok = lab
        .run(&lab.job("after", "print('{\"ok\": 1}')", &[]))
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "{\"ok\": 1}");
}
