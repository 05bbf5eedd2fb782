//! Item 5: `--json` on every command that prints data, with the exit codes of docs/cli.md.

use serde_json::Value;

use crate::{Quiver, both, support::repo_root};

/// Runs each command with `--json`: stdout is one JSON value, the exit code the documented
/// one, and nothing on stdout is anything but that value.
#[test]
fn every_data_command_speaks_json_with_its_exit_code() {
    let q = Quiver::new();
    let examples = repo_root().join("examples/packages");
    let examples = examples.to_str().unwrap().to_owned();
    let scratch = q.path("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let scratch = scratch.to_str().unwrap().to_owned();
    let call = q.run(
        &[
            "--root",
            &examples,
            "call",
            "tool_search",
            "--args",
            r#"{"query": "天气"}"#,
            "--json",
        ],
        &[],
    );
    assert_eq!(call.status.code(), Some(0), "{}", both(&call));
    let session = serde_json::from_slice::<Value>(&call.stdout).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = |args: &[&str]| {
        let mut all = vec!["--root", examples.as_str()];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let plain = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    // (arguments, exit code, a key or value the JSON must hold)
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (plain(&["lint", "--json", &examples]), 0, "["),
        (r(&["list", "--json"]), 0, "\"weather\""),
        (
            r(&["show", "weather.forecast", "--json"]),
            0,
            "\"definition\"",
        ),
        (r(&["search", "北京天气", "--json"]), 0, "\"score\""),
        (plain(&["test", "--json", &examples]), 0, "\"passed\""),
        (
            plain(&["new", "package", "fresh", "--dir", &scratch, "--json"]),
            0,
            "\"kind\":\"package\"",
        ),
        (plain(&["session", "list", "--json"]), 0, &session),
        (plain(&["session", "show", &session, "--json"]), 0, &session),
        (
            plain(&["audit", "--json", "--session", &session]),
            0,
            "\"tool_search\"",
        ),
        (plain(&["control", "--json"]), 0, "\"control\":\"normal\""),
        (
            plain(&["disable", "notes", "--json"]),
            0,
            "\"enabled\":false",
        ),
        (plain(&["enable", "notes", "--json"]), 0, "\"enabled\":true"),
        (
            plain(&["session", "end", &session, "--json"]),
            0,
            "\"ended\":true",
        ),
        (
            plain(&["session", "end", &session, "--json"]),
            1,
            "\"ended\":false",
        ),
        (plain(&["approvals", "list", "--json"]), 0, "["),
        (plain(&["runs", "list", "--json"]), 0, "["),
        (r(&["schedules", "list", "--json"]), 0, "\"cron\""),
        (plain(&["models", "list", "--json"]), 0, "["),
        (
            plain(&["models", "remove", "usem3", "--json"]),
            1,
            "\"removed\":false",
        ),
        (
            plain(&["bench", "load", "--packages", "5", "--json"]),
            0,
            "\"packages\":5",
        ),
    ];
    for (args, code, holds) in cases {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = q.run(&words, &[]);
        assert_eq!(out.status.code(), Some(code), "{words:?}: {}", both(&out));
        let value: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{words:?}: not JSON ({e}): {}", both(&out)));
        let compact = value.to_string();
        assert!(
            compact.contains(holds),
            "{words:?}: {holds} not in {compact}"
        );
    }
    // A name that is not there is a negative answer, not a failure to run.
    for args in [
        r(&["show", "no.such", "--json"]),
        plain(&["session", "show", "ses-none", "--json"]),
    ] {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = q.run(&words, &[]);
        assert_eq!(out.status.code(), Some(1), "{words:?}: {}", both(&out));
        assert!(out.stdout.is_empty(), "{words:?}: {}", both(&out));
    }
}
