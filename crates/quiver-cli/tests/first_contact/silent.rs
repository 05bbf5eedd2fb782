//! Item 4: nothing missing without a word.

use std::process::Stdio;

use quiver_agent::fake::{Api, FakeServer, ScriptedModel};

use crate::{Quiver, both, support::json};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A `--root` that does not exist is an error (exit 2) for every command that reads roots,
/// not an empty catalog.
#[test]
fn a_missing_root_is_an_error() {
    let q = Quiver::new();
    let missing = q.path("no-such-folder");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["--root", missing, "list"],
        vec!["--root", missing, "search", "weather"],
        vec!["--root", missing, "call", "weather.forecast", "--yes"],
    ] {
        let out = q.run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", both(&out));
        assert!(
            stderr(&out).contains("does not exist"),
            "{args:?}: {}",
            both(&out)
        );
    }
}

/// A root the scan stops in (more than 2,000 folders) is said by `list` and on `serve`'s start
/// line, not only by `lint`.
#[test]
fn a_cut_root_is_said_by_list_and_serve() {
    let q = Quiver::new();
    for i in 0..2_100 {
        std::fs::create_dir_all(q.path(&format!("big/d{i:04}"))).unwrap();
    }
    q.write(
        "big/zz/late/quiver.yaml",
        "id: late\nname: late\nversion: 1.0.0\ndescription: Found after the limit\n",
    );
    let root = q.path("big");
    let root = root.to_str().unwrap();
    let out = q.run(&["--root", root, "list"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(
        stderr(&out).contains("the scan stopped after 2000 folders"),
        "{}",
        both(&out)
    );
    let out = q
        .command(&["--root", root, "serve", "--stdio"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let start = stderr(&out)
        .lines()
        .find(|l| l.starts_with("quiver: MCP over stdio"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no start line: {}", both(&out)));
    assert!(
        start.contains("NOT ALL LOADED") && start.contains(root),
        "{start}"
    );
}

/// Folders laid out for another system say what to rename or add, in `list` (stderr) and in
/// `lint` (a diagnostic with its code).
#[test]
fn another_systems_packages_say_what_to_add() {
    let q = Quiver::new();
    q.write(
        "roots/zhin-weather/package.json",
        "{\"name\": \"zhin-weather\"}",
    );
    q.write(
        "roots/zhin-weather/tools/forecast/index.ts",
        "export default {}",
    );
    q.write(
        "roots/legacy/manifest.yaml",
        "name: lookup\ndescription: Looks things up\ninputs:\n  q: {type: string}\n",
    );
    q.write(
        "roots/half/quiver.yaml",
        "id: half\nname: half\nversion: 1.0.0\ndescription: Half converted\n",
    );
    q.write("roots/half/tools/ping/index.js", "module.exports = {}");
    let root = q.path("roots");
    let root = root.to_str().unwrap();
    let out = q.run(&["--root", root, "list"], &[]);
    let err = stderr(&out);
    for want in [
        "zhin.js plugin (`tools/forecast/index.ts`)",
        "add `quiver.yaml` here",
        "`manifest.yaml` is another system's manifest",
        "move it to `tools/<tool>/tool.yaml`",
        "`index.js` is a zhin.js tool: add a `tool.yaml` here",
    ] {
        assert!(err.contains(want), "{want}: {}", both(&out));
    }
    let out = q.run(&["lint", "--json", root], &[]);
    let codes: Vec<String> = json(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        codes
            .iter()
            .filter(|c| *c == "package-foreign-layout")
            .count(),
        2,
        "{codes:?}"
    );
    assert!(codes.contains(&"tool-missing-file".to_owned()), "{codes:?}");
}

/// `quiver test` on packages without examples says so and passes; on a missing path it fails
/// as `lint` does.
#[test]
fn test_without_examples_says_so_and_a_missing_path_is_an_error() {
    let q = Quiver::new();
    q.write(
        "p/quiver.yaml",
        "id: p\nname: p\nversion: 1.0.0\ndescription: No examples\n",
    );
    q.write(
        "p/tools/t/tool.yaml",
        "description: A tool without examples.\ncategory: perception\nexpose: true\nrun: {command: [sh, -c, 'echo {}']}\n",
    );
    let dir = q.path("p");
    let out = q.run(&["test", dir.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(stderr(&out).contains("nothing to test"), "{}", both(&out));
    let out = q.run(&["test", "--json", dir.to_str().unwrap()], &[]);
    assert_eq!(json(&out), serde_json::json!([]));
    let missing = q.path("nope");
    for command in ["test", "lint"] {
        let out = q.run(&[command, missing.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", both(&out));
        assert!(stderr(&out).contains("does not exist"), "{command}");
    }
}

const CASES: &str = "cases:
  - request: 北京天气
    expect: {tool: weather.forecast}
  - request: 你好
    expect: none
  - request: 谢谢
    expect: none
";

/// One right call, one right silence, one false call: accuracy 2/3, one false call.
pub(crate) const MODEL: &str = "rules:
  - {when: 北京天气, call: weather__forecast, args: {city: 北京}, search: 天气预报, reply: 晴}
  - {when: 你好, reply: 你好！}
  - {when: 谢谢, call: weather__forecast, args: {city: 谢谢}, search: 天气预报, reply: 嗯}
";

pub(crate) fn eval_env(q: &Quiver, url: &str) -> Vec<String> {
    q.write(
        "packages/weather/quiver.yaml",
        "id: weather\ndescription: 天气预报 Weather forecasts\n",
    );
    q.write(
        "packages/weather/tools/forecast/tool.yaml",
        "description: 查询城市天气预报 Get the weather forecast for a city\ncategory: perception\nexpose: true\ninput: {type: object, properties: {city: {type: string}}, required: [city]}\nrun: {command: [sh, -c, 'echo {}']}\n",
    );
    q.write("cases.yaml", CASES);
    q.write(
        "agent.yaml",
        &format!("providers:\n  fake: {{base_url: '{url}', model: m, max_retries: 0, retry_backoff_ms: 1}}\n"),
    );
    vec![
        "--root".into(),
        q.path("packages").display().to_string(),
        "eval".into(),
        q.path("cases.yaml").display().to_string(),
        "--agent-config".into(),
        q.path("agent.yaml").display().to_string(),
    ]
}

/// `quiver eval` gates CI: thresholds exit 1 (said on stderr, listed in JSON), a case that
/// could not run exits 2.
#[test]
fn eval_exits_on_its_thresholds_and_on_errors() {
    let model = ScriptedModel::parse(MODEL).unwrap();
    let server = FakeServer::with_responder(Api::OpenAi, model.responder()).unwrap();
    let q = Quiver::new();
    let base = eval_env(&q, server.url());
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        q.run(&args, &[])
    };
    type Case<'a> = (&'a [&'a str], i32, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (&[], 0, &[]),
        (&["--min-accuracy", "0.6"], 0, &[]),
        (
            &["--min-accuracy", "0.9"],
            1,
            &["call accuracy 66.7% is under --min-accuracy 90.0%"],
        ),
        (&["--max-false-calls", "1"], 0, &[]),
        (
            &["--max-false-calls", "0"],
            1,
            &["1 false call(s), more than --max-false-calls 0"],
        ),
        (&["--min-accuracy", "1.5"], 2, &["not a fraction"]),
    ];
    for (extra, code, said) in cases {
        let out = run(extra);
        assert_eq!(out.status.code(), Some(*code), "{extra:?}: {}", both(&out));
        for s in *said {
            assert!(stderr(&out).contains(s), "{extra:?}: {}", both(&out));
        }
    }
    let out = run(&["--json", "--max-false-calls", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json(&out)["failures"],
        serde_json::json!([{"kind": "false_calls", "got": 1, "max": 0}])
    );
    // A model that cannot be reached: every case errors, and that is no pass.
    let q = Quiver::new();
    let base = eval_env(&q, "http://127.0.0.1:9/v1");
    let args: Vec<&str> = base.iter().map(String::as_str).collect();
    let out = q.run(&args, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    assert!(stderr(&out).contains("failed to run"), "{}", both(&out));
}
