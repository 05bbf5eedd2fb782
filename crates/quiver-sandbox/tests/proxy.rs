//! The network proxy against real sockets (127.0.0.1 only): bounded under a flood of idle
//! connections, timeouts, the address check after resolution with an injected resolver, the
//! runtime's own listeners, and ambiguous requests. Each attack serves a random canary that
//! must never come back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_sandbox::proxy::{Proxy, ProxyConfig, denial_message, register_own_listener};

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
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

/// A resolver that maps every name to `addr`'s IP.
fn resolving_to(addr: SocketAddr) -> ProxyConfig {
    ProxyConfig {
        resolver: Arc::new(move |_, port| Ok(vec![SocketAddr::new(addr.ip(), port)])),
        ..ProxyConfig::default()
    }
}

fn ask(proxy: &Proxy, request: &[u8]) -> String {
    let mut client = UnixStream::connect(proxy.socket()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The proxy's threads in this process (its runtime names them; threads they start inherit
/// the name), so tests running alongside do not count.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "quiver-proxy")
        .count()
}

#[test]
fn idle_connections_cost_no_thread_and_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(dir.path(), vec!["localhost".into()]).unwrap();
    // Start the proxy's runtime before counting.
    let _ = ask(&proxy, b"GET / HTTP/1.1\r\n\r\n");
    let before = threads();
    let clients: Vec<UnixStream> = (0..1600)
        .map(|_| UnixStream::connect(proxy.socket()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    let during = threads();
    eprintln!("FIGURE: proxy threads before {before}, with 1600 idle connections {during}");
    assert!(before >= 1 && during <= before + 4, "{before} -> {during}");
    // Past the per-proxy cap, connections are answered 503 and closed at once.
    let refused = clients
        .iter()
        .filter(|c| {
            let mut c: &UnixStream = c;
            c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let mut buf = [0u8; 64];
            matches!(c.read(&mut buf), Ok(n) if buf[..n].starts_with(b"HTTP/1.1 503"))
        })
        .count();
    let held = 1600 - refused;
    eprintln!("FIGURE: of 1600 idle connections {held} held, {refused} refused");
    assert_eq!(held, ProxyConfig::default().max_connections);
    drop(clients);
    // Once they are gone, the proxy serves again.
    std::thread::sleep(Duration::from_millis(200));
    let answer = ask(&proxy, b"GET http://evil.example/ HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}

#[test]
fn a_slow_head_and_an_idle_tunnel_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let config = ProxyConfig {
        header_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(500),
        ..ProxyConfig::default()
    };
    let proxy = Proxy::start_with(dir.path(), vec!["127.0.0.1".into()], config).unwrap();
    // A head that never ends.
    let started = Instant::now();
    let answer = ask(&proxy, b"GET http://127.0.0.1/ HTTP/1.1\r\nX-Slow: 1\r\n");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // A tunnel whose server never answers, and one that never sends its ClientHello whole.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(4).collect();
        std::thread::sleep(Duration::from_secs(30));
        drop(held);
    });
    for request in [
        format!(
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        ),
        format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"),
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n\x16\x03\x01\x02\x00"),
    ] {
        let started = Instant::now();
        let answer = ask(&proxy, request.as_bytes());
        let elapsed = started.elapsed();
        assert!(!answer.contains("HTTP/1.1 200 OK"), "{request:?}: {answer}");
        assert!(
            elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(5),
            "{request:?}: {elapsed:?}"
        );
    }
}

#[test]
fn a_name_resolving_to_a_private_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = canary();
    let addr = server(secret.clone());
    let port = addr.port();
    // Declared names resolving to loopback: refused, `localhost` declared or not.
    let cases: &[(&[&str], String, Option<&str>)] = &[
        (
            &["rebind.test"],
            format!("GET http://rebind.test:{port}/ HTTP/1.1\r\n\r\n"),
            Some("rebind.test"),
        ),
        (
            &["rebind.test", "localhost"],
            format!("CONNECT rebind.test:{port} HTTP/1.1\r\n\r\n"),
            Some("rebind.test"),
        ),
        (
            &["*"],
            format!("GET http://anything.test:{port}/ HTTP/1.1\r\n\r\n"),
            Some("anything.test"),
        ),
        (
            &["*.0.0.1"],
            format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"),
            Some("127.0.0.1"),
        ),
        (
            &["*"],
            format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"),
            Some("127.0.0.1"),
        ),
        // The literal declared, or `localhost` asked for: admitted.
        (
            &["inner.test", "127.0.0.1"],
            format!("GET http://inner.test:{port}/ HTTP/1.1\r\n\r\n"),
            None,
        ),
        (
            &["localhost"],
            format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n"),
            None,
        ),
    ];
    for (allow, request, denied) in cases {
        let allow = allow.iter().map(|s| (*s).to_owned()).collect();
        let proxy = Proxy::start_with(dir.path(), allow, resolving_to(addr)).unwrap();
        let answer = ask(&proxy, request.as_bytes());
        match denied {
            Some(host) => {
                assert!(answer.starts_with("HTTP/1.1 403"), "{request}: {answer}");
                assert!(!answer.contains(&secret), "{request}: {answer}");
                assert_eq!(proxy.take_denials(), [denial_message(host)]);
            }
            None => assert!(answer.ends_with(&secret), "{request}: {answer}"),
        }
    }
}

#[test]
fn the_runtimes_own_listener_is_never_reached() {
    let dir = tempfile::tempdir().unwrap();
    let secret = canary();
    let addr = server(secret.clone());
    register_own_listener(addr);
    for allow in [["localhost"], ["127.0.0.1"]] {
        let proxy = Proxy::start_with(
            dir.path(),
            allow.map(String::from).to_vec(),
            resolving_to(addr),
        )
        .unwrap();
        for host in ["localhost", "127.0.0.1"] {
            for request in [
                format!("GET http://{host}:{}/ HTTP/1.1\r\n\r\n", addr.port()),
                format!("CONNECT {host}:{} HTTP/1.1\r\n\r\n", addr.port()),
            ] {
                let answer = ask(&proxy, request.as_bytes());
                assert!(
                    answer.starts_with("HTTP/1.1 403"),
                    "{allow:?} {request}: {answer}"
                );
                assert!(!answer.contains(&secret));
            }
        }
    }
}

#[test]
fn ambiguous_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = canary();
    let addr = server(secret.clone());
    let port = addr.port();
    let proxy = Proxy::start(dir.path(), vec!["localhost".into()]).unwrap();
    let cases = [
        (
            format!(
                "GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.test\r\n\r\n"
            ),
            "400",
        ),
        (
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nX: y\nHost: evil.test\r\n\r\n"),
            "400",
        ),
        (
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nX: y\r\n Host: evil.test\r\n\r\n"),
            "400",
        ),
        (
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
            "403",
        ),
        (
            format!("GET http://evil.test@localhost:{port}/ HTTP/1.1\r\n\r\n"),
            "400",
        ),
        (
            format!(
                "POST http://localhost:{port}/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
            ),
            "400",
        ),
        (
            format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
            "403",
        ),
        // Inside a tunnel: a plain request naming another host.
        (
            format!(
                "CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
            ),
            "403",
        ),
        (
            format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"),
            "400",
        ),
        (
            format!(
                "CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
            ),
            "400",
        ),
    ];
    for (request, status) in cases {
        let answer = ask(&proxy, request.as_bytes());
        let answer = answer
            .strip_prefix("HTTP/1.1 200 Connection established\r\n\r\n")
            .unwrap_or(&answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{request:?}: {answer}"
        );
        assert!(!answer.contains(&secret), "{request:?}: {answer}");
    }
    // The same requests without the ambiguity go through.
    for request in [
        format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"),
        format!(
            "CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
        ),
    ] {
        let answer = ask(&proxy, request.as_bytes());
        assert!(answer.ends_with(&secret), "{request:?}: {answer}");
    }
}
