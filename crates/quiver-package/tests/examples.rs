//! The example packages in `examples/packages/` load without errors or unexpected warnings,
//! declare what the docs say they declare, and their tools really run under `python3`.

// A test binary: the helpers below report failures by panicking, like the tests they serve.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use quiver_package::agent::Agent;
use quiver_package::prompt::{Layer, Retention};
use quiver_package::tool::{Approval, Category, Risk, RiskCategory, Run, Tool, ToolScope};
use quiver_package::workflow::{Catchup, Overlap, Schedule, StepAction, Trigger};
use quiver_package::{Package, Severity, load_package};
use serde_json::{Value, json};

/// Every example package folder.
const PACKAGES: [&str; 7] = [
    "calc",
    "daily-report",
    "group-admin",
    "notes",
    "travel-advice",
    "weather",
    "web-fetch",
];

/// Warnings the examples carry on purpose, as `(package folder, code)`. None today: every
/// example is meant to be clean, so a new warning fails the test until it is fixed or listed.
const DELIBERATE_WARNINGS: &[(&str, &str)] = &[];

/// Tools whose examples are not run for real: they need the network.
const NEEDS_NETWORK: &[(&str, &str)] = &[("web-fetch", "fetch_url")];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages")
}

/// Loads an example package, failing on any error and on any warning not listed above.
fn load(folder: &str) -> Package {
    let loaded = load_package(&examples_dir().join(folder));
    let unexpected: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| {
            d.severity == Severity::Error
                || (d.severity == Severity::Warning
                    && !DELIBERATE_WARNINGS.contains(&(folder, d.code)))
        })
        .map(ToString::to_string)
        .collect();
    assert!(
        unexpected.is_empty(),
        "{folder}:\n{}",
        unexpected.join("\n")
    );
    let Some(package) = loaded.package else {
        panic!("{folder} did not load");
    };
    package
}

fn tool<'a>(package: &'a Package, name: &str) -> &'a Tool {
    package
        .tool(name)
        .unwrap_or_else(|| panic!("{} has no tool `{name}`", package.id))
}

fn names<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = items.into_iter().map(str::to_owned).collect();
    out.sort();
    out
}

#[test]
fn every_folder_is_an_example_and_loads_cleanly() {
    let mut found: Vec<String> = std::fs::read_dir(examples_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, PACKAGES);
    for folder in PACKAGES {
        let package = load(folder);
        assert_eq!(package.id.as_str(), folder);
        assert!(package.has_manifest, "{folder}");
        assert!(package.version.is_some(), "{folder} has no version");
        assert!(
            package.manifest.license.is_some(),
            "{folder} has no license"
        );
        assert!(package.readme.is_some(), "{folder} has no docs/README.md");
        let has_cjk = |s: &str| s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
        let has_latin = |s: &str| s.chars().filter(char::is_ascii_alphabetic).count() >= 10;
        assert!(
            has_cjk(&package.description) && has_latin(&package.description),
            "{folder}: the description must be in Chinese and English: {}",
            package.description
        );
        for t in &package.tools {
            let text = t.description.full();
            assert!(
                has_cjk(&text) && has_latin(&text),
                "{folder}.{}: not bilingual",
                t.name
            );
        }
    }
}

/// (package, tools, agents, workflows, skill ids, prompt sections)
type Items = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

#[test]
fn ids_and_item_names() {
    let cases: [Items; 7] = [
        ("calc", &["evaluate"], &[], &[], &[], &[]),
        (
            "daily-report",
            &["publish", "week_range"],
            &["editor", "reporter"],
            &["compile"],
            &["daily-report/weekly"],
            &["tone"],
        ),
        (
            "group-admin",
            &[
                "kick_member",
                "list_members",
                "mute_member",
                "send_group_notice",
            ],
            &[],
            &[],
            &[],
            &[],
        ),
        (
            "notes",
            &["add_note", "delete_note", "list_notes"],
            &[],
            &[],
            &[],
            &[],
        ),
        ("travel-advice", &["packing_advice"], &[], &[], &[], &[]),
        ("weather", &["forecast"], &[], &[], &["weather"], &[]),
        ("web-fetch", &["fetch_url"], &[], &[], &[], &[]),
    ];
    for (folder, tools, agents, workflows, skills, prompts) in cases {
        let p = load(folder);
        assert_eq!(
            names(p.tools.iter().map(|t| t.name.as_str())),
            names(tools.iter().copied()),
            "{folder}"
        );
        assert_eq!(
            names(p.agents.iter().map(|a| a.name.as_str())),
            names(agents.iter().copied()),
            "{folder}"
        );
        assert_eq!(
            names(p.workflows.iter().map(|w| w.name.as_str())),
            names(workflows.iter().copied()),
            "{folder}"
        );
        assert_eq!(
            names(p.all_skills().map(|s| s.id.as_str())),
            names(skills.iter().copied()),
            "{folder}"
        );
        assert_eq!(
            names(p.prompts.iter().map(|s| s.name.as_str())),
            names(prompts.iter().copied()),
            "{folder}"
        );
        for t in &p.tools {
            assert_eq!(
                t.run,
                Run::Command(vec!["python3".into(), "main.py".into()]),
                "{folder}.{}",
                t.name
            );
            let dir = t.file.parent().unwrap();
            assert!(
                dir.join("main.py").is_file(),
                "{folder}.{} has no main.py",
                t.name
            );
        }
    }
}

#[test]
fn exposed_tools_have_examples_and_negative_examples() {
    for folder in PACKAGES {
        let p = load(folder);
        for t in p.tools.iter().filter(|t| t.expose) {
            let id = format!("{folder}.{}", t.name);
            assert!(t.examples.len() >= 3, "{id}: {} examples", t.examples.len());
            assert!(
                t.negative_examples.len() >= 2,
                "{id}: {} negative examples",
                t.negative_examples.len()
            );
            assert!(
                t.examples.iter().any(|e| e.arguments.is_some()),
                "{id}: no example has arguments"
            );
            let cjk = t
                .examples
                .iter()
                .filter(|e| e.query.chars().any(|c| c > '\u{2e80}'))
                .count();
            assert!(
                cjk >= 1 && cjk < t.examples.len(),
                "{id}: examples must be in Chinese and English"
            );
            assert!(
                !t.description.when_to_use.is_empty() && !t.description.when_not_to_use.is_empty(),
                "{id}"
            );
            let props = t.input.get("properties").and_then(Value::as_object);
            for (name, schema) in props.into_iter().flatten() {
                assert!(
                    schema.get("description").is_some(),
                    "{id}: parameter `{name}` has no description"
                );
            }
        }
        // Everything in the examples is exposed but daily-report's `publish`, private on
        // purpose: only its own workflow calls it (seed 000).
        let private: Vec<&str> = p
            .tools
            .iter()
            .filter(|t| !t.expose || t.hidden)
            .map(|t| t.name.as_str())
            .collect();
        let expected: &[&str] = if folder == "daily-report" {
            &["publish"]
        } else {
            &[]
        };
        assert_eq!(private, expected, "{folder}");
    }
}

#[test]
fn weather_and_travel_advice_name_each_other() {
    let weather = load("weather");
    let travel = load("travel-advice");
    let forecast = tool(&weather, "forecast");
    let packing = tool(&travel, "packing_advice");
    assert_eq!(forecast.category, Category::Perception);
    assert!(
        forecast.permission.network.is_empty(),
        "the forecast is offline"
    );
    assert!(
        forecast
            .description
            .when_not_to_use
            .contains("travel-advice.packing_advice")
    );
    assert!(
        packing
            .description
            .when_not_to_use
            .contains("weather.forecast")
    );
    assert!(matches!(
        packing.category,
        Category::Decision | Category::Perception
    ));
    let text = packing.description.full();
    for word in ["天气", "气温", "weather", "temperature"] {
        assert!(
            text.contains(word),
            "packing_advice should mention `{word}`"
        );
    }
    let queries: Vec<&str> = forecast.examples.iter().map(|e| e.query.as_str()).collect();
    assert!(queries.contains(&"北京明天多少度"));
    assert!(queries.contains(&"what's the weather in Paris tomorrow"));
    assert!(
        packing
            .negative_examples
            .iter()
            .any(|q| q == "北京明天多少度")
    );

    let skill = weather.skill.as_ref().unwrap();
    assert_eq!(
        (skill.id.as_str(), skill.name.as_str()),
        ("weather", "weather")
    );
    assert!(
        skill.files.contains(&"references/cities.md".to_owned()),
        "{:?}",
        skill.files
    );
    // Every city of the bundled table is listed in the reference the skill points to.
    let table: Value = serde_json::from_str(
        &std::fs::read_to_string(weather.root.join("tools/forecast/cities.json")).unwrap(),
    )
    .unwrap();
    let reference = std::fs::read_to_string(weather.root.join("references/cities.md")).unwrap();
    for city in table["cities"].as_array().unwrap() {
        for key in ["zh", "en"] {
            let name = city[key].as_str().unwrap();
            assert!(
                reference.contains(&format!("| {name} |")),
                "cities.md lacks {name}"
            );
        }
    }
}

#[test]
fn group_admin_dangerous_tools() {
    let p = load("group-admin");
    let cases = [
        ("kick_member", RiskCategory::Member),
        ("mute_member", RiskCategory::Member),
        ("send_group_notice", RiskCategory::Publish),
    ];
    for (name, category) in cases {
        let t = tool(&p, name);
        assert_eq!(t.risk, Some(Risk::Dangerous), "{name}");
        assert_eq!(t.risk_category, Some(category), "{name}");
        assert_eq!(t.approval, Approval::Human, "{name}");
        assert_eq!(t.permissions, ["role(trusted)"], "{name}");
        assert_eq!(t.category, Category::Action, "{name}");
    }
    let list = tool(&p, "list_members");
    assert_eq!((list.category, list.risk), (Category::Perception, None));
    assert!(list.permissions.is_empty());
    assert!(
        p.tools
            .iter()
            .all(|t| t.platforms.is_none() && t.scopes.is_none())
    );
}

#[test]
fn calc_notes_and_web_fetch_declarations() {
    let calc = load("calc");
    let evaluate = tool(&calc, "evaluate");
    assert_eq!(evaluate.category, Category::Decision);
    assert!(evaluate.idempotent);

    let notes = load("notes");
    let categories: Vec<_> = ["add_note", "list_notes", "delete_note"]
        .iter()
        .map(|n| tool(&notes, n).category)
        .collect();
    assert_eq!(
        categories,
        [Category::Action, Category::Perception, Category::Action]
    );

    let web = load("web-fetch");
    let fetch = tool(&web, "fetch_url");
    let hosts = ["example.com".to_owned(), "*.wikipedia.org".to_owned()];
    assert_eq!(fetch.category, Category::Perception);
    assert_eq!(fetch.permission.network, hosts);
    assert_eq!(web.manifest.permissions.network, hosts);
    assert!(!fetch.permission.is_open_ended());
}

#[test]
fn daily_report_parts() {
    let p = load("daily-report");
    let workflow = &p.workflows[0];
    assert!(workflow.expose);
    assert_eq!(
        workflow.triggers,
        [
            Trigger::Manual,
            Trigger::Schedule(Schedule {
                cron: "0 18 * * 1-5".into(),
                timezone: "Asia/Shanghai".into(),
                overlap: Overlap::Skip,
                catchup: Catchup::Latest,
            })
        ]
    );
    let kinds: Vec<&str> = workflow
        .steps
        .iter()
        .map(|s| match &s.action {
            StepAction::Tool { .. } => "tool",
            StepAction::Agent { .. } => "agent",
            StepAction::Approval { .. } => "approval",
            StepAction::Wait { .. } => "wait",
        })
        .collect();
    assert_eq!(kinds, ["tool", "agent", "agent", "approval", "tool"]);
    let publish = p
        .tools
        .iter()
        .find(|t| t.name.as_str() == "publish")
        .unwrap();
    assert_eq!(
        (publish.risk, publish.approval, publish.category),
        (Some(Risk::Dangerous), Approval::Human, Category::Action)
    );
    assert!(
        matches!(&workflow.steps[0].action, StepAction::Tool { name, .. } if name == "notes.list_notes")
    );
    assert_eq!(p.manifest.requires.packages, ["notes"]);

    let agent =
        |name: &str| -> &Agent { p.agents.iter().find(|a| a.name.as_str() == name).unwrap() };
    let reporter = agent("reporter");
    assert!(reporter.expose && reporter.file.ends_with("agents/reporter.md"));
    assert!(!reporter.prompt.system.is_empty());
    let editor = agent("editor");
    assert!(!editor.expose && editor.file.ends_with("agents/editor/agent.yaml"));
    assert!(!editor.prompt.system.is_empty());
    assert!(editor.prompt.boundaries.is_some() && editor.prompt.conventions.is_some());

    let tone = &p.prompts[0];
    assert_eq!(
        (tone.layer, tone.retention),
        (Layer::Role, Retention::Preferred)
    );
    assert!(p.agents_md.is_some());
    assert_eq!(p.requirements, ["python-dateutil==2.9.0.post0"]);

    let week = tool(&p, "week_range");
    assert_eq!(week.scope, ToolScope::Skill("daily-report/weekly".into()));
    // It runs from project roots too, where nothing installs requirements.txt (only
    // `quiver install` does), so no tool may import it.
    for t in &p.tools {
        let source = std::fs::read_to_string(t.file.with_file_name("main.py")).unwrap();
        let imports = source.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("import ") || l.starts_with("from ")) && l.contains("dateutil")
        });
        assert!(!imports, "{} imports dateutil", t.name);
    }
}

// ---------------------------------------------------------------------------------------------
// Running the implementations.

/// Whether `python3` can be started; tests that run tools print why and return when not.
fn have_python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: python3 is not available, so the example tools cannot run");
    }
    ok
}

/// A call context like the runtime's: a QQ group, sender 10001 (the demo roster's owner).
fn group_context() -> Value {
    json!({
        "call_id": "call-1",
        "session_id": "session-1",
        "origin": {"platform": "qq", "scope": "group", "channel": "123456"},
        "principal": {"user_id": "10001", "role": "trusted"},
        "unattended": false,
    })
}

/// Runs `tool` as the runtime would: its command from the tool's folder, the data folder as
/// working directory and `QUIVER_DATA_DIR`, one JSON request on stdin. Returns the exit code
/// and the JSON object printed on stdout.
fn call(t: &Tool, arguments: Value, context: Value, data: &Path) -> (i32, Value) {
    let Run::Command(command) = &t.run else {
        panic!("{} is not run by a command", t.name);
    };
    let dir = t.file.parent().unwrap();
    let args: Vec<PathBuf> = command[1..]
        .iter()
        .map(|a| {
            if dir.join(a).is_file() {
                dir.join(a)
            } else {
                PathBuf::from(a)
            }
        })
        .collect();
    let mut child = Command::new(&command[0])
        .args(&args)
        .current_dir(data)
        .env("QUIVER_DATA_DIR", data)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request = json!({"arguments": arguments, "context": context});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let value: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{}: stdout is not JSON ({e}): {stdout}\nstderr: {stderr}",
            t.name
        )
    });
    assert!(
        value.is_object(),
        "{}: the result is not an object: {value}",
        t.name
    );
    (output.status.code().unwrap_or(-1), value)
}

/// Calls a tool that must succeed and returns its result.
fn ok(t: &Tool, arguments: Value, data: &Path) -> Value {
    let (code, value) = call(t, arguments.clone(), group_context(), data);
    assert!(
        code == 0 && value.get("error").is_none(),
        "{} {arguments}: exit {code}: {value}",
        t.name
    );
    value
}

/// Calls a tool that must fail and returns its error code.
fn fails(t: &Tool, arguments: Value, data: &Path) -> String {
    let (code, value) = call(t, arguments.clone(), group_context(), data);
    assert_eq!(code, 1, "{} {arguments} should fail: {value}", t.name);
    value["code"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn calc_evaluate_runs() {
    if !have_python() {
        return;
    }
    let calc = load("calc");
    let evaluate = tool(&calc, "evaluate");
    let data = tempfile::tempdir().unwrap();
    let cases = [
        ("1 + 2 * 3", json!(7)),
        ("(1+2)×3÷4", json!(2.25)),
        ("sqrt(16) + 2^3", json!(12)),
        ("15% * 80", json!(12)),
        ("17 % 5", json!(2)),
        ("399 * 0.85", json!(339.15)),
        ("（10 － 4）／ 3", json!(2)),
    ];
    for (expression, want) in cases {
        let result = ok(evaluate, json!({"expression": expression}), data.path());
        assert_eq!(result["result"], want, "{expression}: {result}");
    }
    let big = ok(evaluate, json!({"expression": "2^100"}), data.path());
    assert_eq!(big["text"], "1267650600228229401496703205376");
    let refused = [
        ("__import__('os').system('true')", "unsupported"),
        ("().__class__", "unsupported"),
        ("x + 1", "unsupported"),
        ("1/0", "division_by_zero"),
        ("9**9**9", "too_large"),
        ("1 +", "syntax"),
    ];
    for (expression, code) in refused {
        assert_eq!(
            fails(evaluate, json!({"expression": expression}), data.path()),
            code,
            "{expression}"
        );
    }
}

#[test]
fn notes_add_list_and_delete_run() {
    if !have_python() {
        return;
    }
    let notes = load("notes");
    let (add, list, delete) = (
        tool(&notes, "add_note"),
        tool(&notes, "list_notes"),
        tool(&notes, "delete_note"),
    );
    let data = tempfile::tempdir().unwrap();
    let first = ok(
        add,
        json!({"text": "周五前交报销单", "tags": ["待办"]}),
        data.path(),
    );
    assert_eq!(first["note"]["id"], 1);
    assert_eq!(first["note"]["author"], "10001");
    ok(
        add,
        json!({"text": "buy milk and eggs", "title": "Groceries"}),
        data.path(),
    );
    assert!(data.path().join("notes.json").is_file());

    let all = ok(list, json!({}), data.path());
    assert_eq!(all["count"], 2);
    let titles: Vec<&str> = all["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Groceries", "周五前交报销单"], "newest first");
    assert_eq!(ok(list, json!({"query": "报销"}), data.path())["count"], 1);
    assert_eq!(
        ok(list, json!({"tag": "待办"}), data.path())["notes"][0]["id"],
        1
    );
    assert_eq!(
        ok(list, json!({"query": "nothing like this"}), data.path())["count"],
        0
    );

    assert_eq!(ok(delete, json!({"id": 1}), data.path())["count"], 1);
    assert_eq!(fails(delete, json!({"id": 1}), data.path()), "not_found");
    assert_eq!(ok(list, json!({}), data.path())["count"], 1);
}

#[test]
fn weather_forecast_runs() {
    if !have_python() {
        return;
    }
    let weather = load("weather");
    let forecast = tool(&weather, "forecast");
    let data = tempfile::tempdir().unwrap();
    let beijing = ok(
        forecast,
        json!({"city": "北京", "date": "2025-10-01"}),
        data.path(),
    );
    assert_eq!(beijing["city"], "北京");
    assert_eq!(beijing["city_en"], "Beijing");
    assert_eq!(beijing["date"], "2025-10-01");
    assert!(beijing["temp_min_c"].as_i64().unwrap() <= beijing["temp_max_c"].as_i64().unwrap());
    assert!(
        beijing["source"]
            .as_str()
            .unwrap()
            .contains("not a real forecast")
    );
    assert_eq!(
        beijing,
        ok(
            forecast,
            json!({"city": "Beijing", "date": "2025-10-01"}),
            data.path()
        ),
        "the same city and day give the same figures"
    );
    let paris = ok(
        forecast,
        json!({"city": "paris", "date": "tomorrow"}),
        data.path(),
    );
    assert_eq!(paris["city"], "巴黎");
    assert_eq!(paris["date"].as_str().unwrap().len(), 10);
    let harbin = ok(
        forecast,
        json!({"city": "哈尔滨市", "date": "2025-01-15"}),
        data.path(),
    );
    assert!(
        harbin["temp_max_c"].as_i64().unwrap() < 0,
        "Harbin in January: {harbin}"
    );
    assert_eq!(
        fails(forecast, json!({"city": "火星"}), data.path()),
        "unknown_city"
    );
    assert_eq!(
        fails(
            forecast,
            json!({"city": "北京", "date": "soon"}),
            data.path()
        ),
        "bad_date"
    );
}

/// Every example's arguments, given to the real implementation, produce a result and no error.
#[test]
fn every_example_with_arguments_runs() {
    if !have_python() {
        return;
    }
    let mut ran = 0;
    for folder in PACKAGES {
        let p = load(folder);
        for t in &p.tools {
            if NEEDS_NETWORK.contains(&(folder, t.name.as_str())) {
                continue;
            }
            for example in &t.examples {
                let Some(arguments) = &example.arguments else {
                    continue;
                };
                let data = tempfile::tempdir().unwrap();
                if t.name.as_str() == "delete_note" {
                    let add = tool(&p, "add_note");
                    for i in 1..=3 {
                        ok(add, json!({"text": format!("note {i}")}), data.path());
                    }
                }
                ok(t, arguments.clone(), data.path());
                ran += 1;
            }
        }
    }
    assert!(ran >= 20, "only {ran} examples ran");
}

#[test]
fn group_admin_uses_the_call_context() {
    if !have_python() {
        return;
    }
    let p = load("group-admin");
    let data = tempfile::tempdir().unwrap();
    let members = ok(tool(&p, "list_members"), json!({}), data.path());
    assert_eq!(members["group"], "123456");
    assert_eq!(members["count"], 6);
    ok(
        tool(&p, "kick_member"),
        json!({"user_id": "10006", "reason": "spam"}),
        data.path(),
    );
    assert_eq!(
        ok(tool(&p, "list_members"), json!({}), data.path())["count"],
        5
    );
    assert_eq!(
        fails(
            tool(&p, "kick_member"),
            json!({"user_id": "10002"}),
            data.path()
        ),
        "protected"
    );

    let kick = tool(&p, "kick_member");
    let not_admin = json!({"origin": {"scope": "group", "channel": "123456"}, "principal": {"user_id": "10003"}});
    let (code, value) = call(kick, json!({"user_id": "10004"}), not_admin, data.path());
    assert_eq!((code, value["code"].as_str()), (1, Some("not_admin")));
    let (code, value) = call(kick, json!({"user_id": "10004"}), json!({}), data.path());
    assert_eq!((code, value["code"].as_str()), (1, Some("not_in_group")));
    let other_group =
        json!({"origin": {"scope": "group", "group_id": "999"}, "principal": {"user_id": "10001"}});
    let (code, value) = call(
        tool(&p, "list_members"),
        json!({}),
        other_group,
        data.path(),
    );
    assert_eq!(
        (code, value["count"].as_i64()),
        (0, Some(6)),
        "each group has its own roster"
    );
}

#[test]
fn tools_named_in_descriptions_exist() {
    // A `package.tool` named in a description (`when_not_to_use` mostly) is an example tool.
    let loaded: Vec<Package> = PACKAGES.into_iter().map(load).collect();
    let known: BTreeSet<String> = loaded
        .iter()
        .flat_map(|p| {
            let tools = p.tools.iter().map(|t| t.name.as_str());
            let workflows = p.workflows.iter().map(|w| w.name.as_str());
            tools
                .chain(workflows)
                .map(move |name| format!("{}.{name}", p.id))
        })
        .collect();
    for p in &loaded {
        for t in &p.tools {
            let text = t.description.full();
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))) {
                let word = word.trim_end_matches('.');
                if let Some((pkg, item)) = word.split_once('.')
                    && PACKAGES.contains(&pkg)
                    && !item.is_empty()
                    && !item.contains('.')
                {
                    assert!(
                        known.contains(word),
                        "{}.{} names unknown `{word}`",
                        p.id,
                        t.name
                    );
                }
            }
        }
    }
}
