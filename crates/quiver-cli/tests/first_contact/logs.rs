//! Item 5: logs as the ecosystem expects them, through the real binary: `RUST_LOG` and
//! `QUIVER_LOG`, `-v`/`-q`, timestamps, no colour off a terminal, and one span per MCP
//! request, call (with its id), sandbox start and workflow step.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::{Quiver, both, sandbox_ok};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether `line` starts with an RFC 3339 UTC timestamp (`2026-12-03T16:50:00.050691Z`).
fn stamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[10] == b'T'
        && line[..30.min(line.len())].contains('Z')
}

/// A package with a tool that needs nothing, and a workflow that calls it.
fn package(q: &Quiver) -> String {
    q.write(
        "packages/echo/quiver.yaml",
        "id: echo\nname: echo\nversion: 1.0.0\ndescription: Echoes\n",
    );
    q.write(
        "packages/echo/tools/say/tool.yaml",
        "description: Says ok.\ncategory: perception\napproval: never\nexpose: true\nrun: {command: [sh, -c, 'echo ''{\"ok\": true}''']}\n",
    );
    q.write(
        "packages/echo/workflows/twice.yaml",
        "description: Says ok twice\nsteps:\n  - id: first\n    tool: say\n  - id: second\n    tool: say\n",
    );
    q.path("packages").display().to_string()
}

/// `RUST_LOG=quiver=debug quiver serve --stdio` shows what happened to a request: its span
/// (JSON-RPC id, method, tool) and the runtime's call span with the call id, each line
/// timestamped and without colour codes (stderr is not a terminal).
#[test]
fn rust_log_shows_each_mcp_request_and_its_call() {
    let q = Quiver::new();
    let root = package(&q);
    let mut child = q
        .command(&["--root", &root, "serve", "--stdio"])
        .env("RUST_LOG", "quiver=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let messages = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":"echo"}}}"#,
    ];
    for message in messages {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "no answer to id 2"
        );
        if line.contains(r#""id":2"#) {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    for want in [
        r#"mcp_request{id=1 method="initialize"}"#,
        r#"mcp_request{id=2 method="tools/call" tool="tool_search"}"#,
        "request answered",
        r#"call{id=call-"#,
        r#"tool="tool_search""#,
        "call ended status=Ok",
    ] {
        assert!(err.contains(want), "{want}:\n{err}");
    }
    assert!(
        !err.contains('\u{1b}'),
        "colour codes off a terminal:\n{err}"
    );
    let logs: Vec<&str> = err.lines().filter(|l| l.contains(" DEBUG ")).collect();
    assert!(!logs.is_empty() && logs.iter().all(|l| stamped(l)), "{err}");
}

/// Over HTTP each request has its span too: the HTTP method, the JSON-RPC id and method, and
/// the status it was answered with.
#[test]
fn rust_log_shows_each_http_request() {
    let q = Quiver::new();
    let root = package(&q);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = q
        .command(&[
            "--root",
            &root,
            "serve",
            "--http",
            &addr,
            "--allow-anonymous",
        ])
        .env("RUST_LOG", "quiver=debug")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut stream = loop {
        match std::net::TcpStream::connect(&addr) {
            Ok(stream) => break stream,
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("the server never listened: {e}"),
        }
    };
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let _ = child.kill();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = child.wait();
    assert!(
        err.lines().any(
            |l| l.contains(r#"mcp_request{http=POST id=7 method="initialize"}"#)
                && l.contains("request answered status=200")
        ),
        "{err}"
    );
}

/// A call's span holds the sandbox start; a workflow run's steps each have a span with the run,
/// the step and the attempt, and their calls inside.
#[test]
fn spans_for_the_sandbox_start_and_each_workflow_step() {
    if !sandbox_ok() {
        return;
    }
    let q = Quiver::new();
    let root = package(&q);
    let debug = [("RUST_LOG", "quiver=debug")];
    let out = q.run(&["--root", &root, "call", "echo.say", "--yes"], &debug);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.contains("call{id=call-") && l.contains(":sandbox_start{package=echo}:")),
        "{err}"
    );
    let out = q.run(&["--root", &root, "run", "echo.twice", "--json"], &debug);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let err = stderr(&out);
    for step in ["first", "second"] {
        let want = format!("step={step} attempt=1}}");
        assert!(
            err.lines()
                .any(|l| l.contains("workflow_step{run=run-") && l.contains(&want)),
            "{want}:\n{err}"
        );
    }
    assert!(
        err.lines()
            .any(|l| l.contains("workflow_step{") && l.contains(":call{id=call-")),
        "{err}"
    );
}

/// `QUIVER_LOG` wins over `RUST_LOG`; `-v`/`-q` apply when neither is set; `-q` hides notes;
/// an invalid filter is said, not fatal.
#[test]
fn quiver_log_rust_log_and_the_flags() {
    let q = Quiver::new();
    let root = package(&q);
    let list = |flags: &[&str], vars: &[(&str, &str)]| {
        let mut args = vec!["--root", root.as_str()];
        args.extend_from_slice(flags);
        args.push("search");
        args.push("echo");
        q.run(&args, vars)
    };
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], bool, bool);
    // (flags, variables, debug lines expected, the search note expected)
    let cases: &[Case<'_>] = &[
        (&[], &[], false, true),
        (&["-vv"], &[], true, true),
        (&["-q"], &[], false, false),
        (&[], &[("RUST_LOG", "quiver=debug")], true, true),
        (
            &[],
            &[("RUST_LOG", "quiver=debug"), ("QUIVER_LOG", "error")],
            false,
            true,
        ),
        (&[], &[("RUST_LOG", ""), ("QUIVER_LOG", "")], false, true),
        (&["-q"], &[("QUIVER_LOG", "quiver=debug")], true, false),
    ];
    for (flags, vars, debug, note) in cases {
        let out = list(flags, vars);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flags:?} {vars:?}: {}",
            both(&out)
        );
        let err = stderr(&out);
        assert_eq!(
            err.contains(" DEBUG "),
            *debug,
            "{flags:?} {vars:?}:\n{err}"
        );
        assert_eq!(
            err.contains("search is BM25 only"),
            *note,
            "{flags:?} {vars:?}:\n{err}"
        );
    }
    let out = list(&[], &[("QUIVER_LOG", "quiver=loud")]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(stderr(&out).contains("is not valid"), "{}", both(&out));
}
