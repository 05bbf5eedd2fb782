//! `quiver chat -m` and `quiver eval` as real processes against a scripted fake model server
//! on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use quiver_agent::fake::{Api, FakeServer, Move, ScriptedModel};
use serde_json::{Value, json};

mod support;

use support::json;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A catalog where search is unambiguous: weather, notes, and a dangerous tool.
fn fixture(root: &Path) {
    write(
        root,
        "weather/quiver.yaml",
        "id: weather\ndescription: 天气预报 Weather forecasts\n",
    );
    write(
        root,
        "weather/tools/forecast/tool.yaml",
        "description: 查询城市天气预报和气温 Get the weather forecast for a city\ncategory: perception\nexpose: true\ninput:\n  type: object\n  properties:\n    city: {type: string}\n  required: [city]\nrun: {command: [sh, -c, 'echo ''{\"sky\": \"sunny\"}''']}\n",
    );
    write(
        root,
        "notes/quiver.yaml",
        "id: notes\ndescription: 记笔记 Take notes\n",
    );
    write(
        root,
        "notes/tools/add_note/tool.yaml",
        "description: 保存一条笔记 Save a note\ncategory: action\nexpose: true\ninput:\n  type: object\n  properties:\n    text: {type: string, minLength: 1}\n  required: [text]\nrun: {command: [sh, -c, 'echo {}']}\n",
    );
    write(
        root,
        "group-admin/quiver.yaml",
        "id: group-admin\ndescription: 群管理 group moderation\n",
    );
    write(
        root,
        "group-admin/tools/kick_member/tool.yaml",
        "description: 把成员移出群 Remove a member from the group\ncategory: action\nexpose: true\nrisk: dangerous\nrisk_category: member\ninput: {type: object, properties: {user_id: {type: string}}, required: [user_id]}\nrun: {command: [sh, -c, 'echo {}']}\n",
    );
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(server: &FakeServer) -> Env {
        let dir = tempfile::tempdir().unwrap();
        fixture(&dir.path().join("packages"));
        write(
            dir.path(),
            "agent.yaml",
            &format!(
                "default: fake\nproviders:\n  fake:\n    kind: openai\n    base_url: {}\n    model: fake-model\n    retry_backoff_ms: 1\n",
                server.url()
            ),
        );
        Env { dir }
    }

    fn quiver(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["--root", self.dir.path().join("packages").to_str().unwrap()])
            .args(args)
            // `inspect` keeps its sessions in a scratch database of its own.
            .args(if args.first() == Some(&"inspect") {
                Vec::new()
            } else {
                vec![
                    "--db".to_owned(),
                    self.dir.path().join("state.db").display().to_string(),
                ]
            })
            .env("QUIVER_HOME", self.dir.path().join("home"))
            .env("HOME", self.dir.path().join("home"))
            .env("QUIVER_AGENT_CONFIG", self.dir.path().join("agent.yaml"))
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_BASE_URL")
            .env_remove("QUIVER_MODEL")
            .env_remove("QUIVER_PROVIDER")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

fn steps(call: &Value) -> Vec<(String, String)> {
    call["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["step"].as_str().unwrap().to_owned(),
                d["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn chat_m_json_shows_each_call_with_its_decisions_and_the_tokens() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([
        Move::call("tool_search", json!({"query": "北京天气"})),
        Move::call("weather__forecast", json!({"city": "北京"})),
        Move::call("group-admin__kick_member", json!({"user_id": "42"})),
        Move::text("北京晴。我不能踢人：需要你本人批准。"),
    ]);
    let env = Env::new(&server);
    let out = env.quiver(&[
        "chat",
        "-m",
        "北京天气怎么样？顺便把 42 踢了",
        "--json",
        "--yes",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["reply"], "北京晴。我不能踢人：需要你本人批准。");
    assert_eq!(v["agent"], "chat");
    let calls = v["calls"].as_array().unwrap();
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "tool_search",
            "weather__forecast",
            "group-admin__kick_member"
        ]
    );
    assert_eq!(calls[0]["status"], "ok");
    assert_eq!(
        calls[0]["result"]["results"][0]["name"],
        "weather__forecast"
    );
    assert!(
        steps(&calls[1]).contains(&("consent".into(), "allow-session".into())),
        "{:?}",
        steps(&calls[1])
    );
    // --yes never approves a dangerous tool, and there is no terminal to ask.
    assert_eq!(calls[2]["status"], "refused");
    assert!(
        steps(&calls[2])
            .iter()
            .any(|(s, d)| s == "approval" && d == "unanswered"),
        "{:?}",
        steps(&calls[2])
    );
    assert!(
        calls[2]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("needs human approval"),
        "{}",
        calls[2]
    );
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 400, "output_tokens": 40, "total_tokens": 440})
    );
    assert!(v["prompt_tokens"].as_u64().unwrap() > 100);
    assert_eq!(v["steps"], 4);
    // The audit log has the same calls.
    let audit = env.quiver(&[
        "audit",
        "--json",
        "--session",
        v["session"].as_str().unwrap(),
    ]);
    let records = json(&audit);
    let kinds: Vec<&str> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    // The three calls, and the counted turn's tokens against the eager baseline.
    assert_eq!(
        kinds.iter().filter(|k| **k == "call").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "turn").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    // Without --json the reply alone goes to stdout and the calls to stderr.
    server.push([Move::text("你好！")]);
    let out = env.quiver(&["chat", "-m", "你好"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "你好！\n");
}

#[test]
fn chat_without_a_provider_or_a_terminal_says_what_to_do() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    let env = Env::new(&server);
    fs::write(env.dir.path().join("agent.yaml"), "providers: {}\n").unwrap();
    let out = env.quiver(&["chat", "-m", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no model provider is configured") && stderr.contains("QUIVER_BASE_URL"),
        "{stderr}"
    );
    fs::write(
        env.dir.path().join("agent.yaml"),
        "providers:\n  x: {base_url: 'http://127.0.0.1:9/v1', model: m, max_retries: 0}\n",
    )
    .unwrap();
    let out = env.quiver(&["chat"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
    let out = env.quiver(&["chat", "-m", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot reach http://127.0.0.1:9/v1/chat/completions")
    );
}

/// Issue 22 item 9: an empty `XDG_CONFIG_HOME` counts as unset, so `./quiver/agent.yaml` of
/// the current folder never picks the provider.
#[test]
fn an_empty_xdg_config_home_reads_no_config_from_the_current_folder() {
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write(
        cwd.path(),
        "quiver/agent.yaml",
        "providers:\n  x: {base_url: 'http://127.0.0.1:9/v1', model: m, max_retries: 0}\n",
    );
    for xdg in ["", "."] {
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["chat", "-m", "hi"])
            .args(["--db", home.path().join("state.db").to_str().unwrap()])
            .current_dir(cwd.path())
            .env("XDG_CONFIG_HOME", xdg)
            .env("HOME", home.path())
            .env("QUIVER_HOME", home.path())
            .env_remove("QUIVER_AGENT_CONFIG")
            .env_remove("QUIVER_CONFIG")
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_BASE_URL")
            .env_remove("QUIVER_MODEL")
            .env_remove("QUIVER_PROVIDER")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{xdg:?}: {stderr}");
        assert!(
            stderr.contains("no model provider is configured"),
            "{xdg:?}: {stderr}"
        );
    }
}

const CASES: &str = "cases:
  - request: 北京天气
    expect: {tool: weather.forecast, arguments: {city: 北京}}
  - request: 上海天气
    expect: {tool: weather__forecast, arguments: {city: 上海}}
  - request: 记一下买牛奶
    expect: {tool: notes.add_note}
  - request: 你好
    expect: none
  - request: 谢谢
    expect: none
";

const MODEL: &str = "rules:
  - {when: 北京天气, call: weather__forecast, args: {city: 北京}, search: 天气预报, reply: 晴}
  - {when: 上海天气, call: weather__forecast, args: {city: Shanghai}, search: 天气预报, reply: 雨}
  - {when: 记一下, call: weather__forecast, args: {city: 牛奶}, search: 天气预报, reply: 嗯}
  - {when: 你好, reply: 你好！}
  - {when: 谢谢, call: notes__add_note, args: {text: 谢谢}, search: 记笔记, reply: 记下了}
";

#[test]
fn eval_arithmetic_on_a_scripted_run_with_the_eager_baseline() {
    let model = ScriptedModel::parse(MODEL).unwrap();
    let server = FakeServer::with_responder(Api::OpenAi, model.responder()).unwrap();
    let env = Env::new(&server);
    write(env.dir.path(), "cases.yaml", CASES);
    let cases = env.dir.path().join("cases.yaml");
    let out = env.quiver(&[
        "eval",
        cases.to_str().unwrap(),
        "--baseline",
        "eager",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    for mode in ["progressive", "eager"] {
        let m = &v[mode]["metrics"];
        assert_eq!(m["cases"], 5, "{mode}");
        // 北京 right; 上海 right tool, wrong argument; 记一下 wrong tool; 你好 right; 谢谢 a false call.
        assert_eq!(m["call_accuracy"], json!(0.6), "{mode}: {m}");
        assert_eq!(m["false_call_rate"], json!(0.5), "{mode}");
        assert_eq!(m["wrong_tool_rate"], json!(1.0 / 3.0), "{mode}");
        assert_eq!(m["argument_accuracy"], json!(0.5), "{mode}");
        assert_eq!(m["errors"], 0);
        assert!(m["prompt_tokens_per_turn"].as_f64().unwrap() > 50.0);
        assert!(m["mean_reply_chars"].as_f64().unwrap() > 0.0);
    }
    // Progressive searched first (one more request on the tool cases), eager did not.
    let requests = server.requests();
    let searched = requests
        .iter()
        .filter(|r| r.body["messages"].to_string().contains("tool_search"))
        .count();
    assert!(searched > 0);
    let eager_first = requests
        .iter()
        .rev()
        .find(|r| quiver_agent::fake::first_user_text(&r.body) == "谢谢")
        .unwrap();
    let offered = quiver_agent::fake::offered_tools(&eager_first.body);
    assert!(
        !offered.contains(&"tool_search".to_owned()),
        "no meta-tools in the baseline: {offered:?}"
    );
    assert!(
        offered.contains(&"weather__forecast".to_owned())
            && offered.contains(&"notes__add_note".to_owned())
    );
    // The text form prints both columns.
    let out = env.quiver(&["eval", cases.to_str().unwrap(), "--baseline", "eager"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("progressive")
            && table.contains("eager")
            && table.contains("call accuracy")
            && table.contains("60.0%"),
        "{table}"
    );
    // Bad case files are clear errors.
    write(env.dir.path(), "bad.yaml", "- request: x\n");
    let out = env.quiver(&["eval", env.dir.path().join("bad.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("say what should happen"));
}

#[test]
fn inspect_cost_compares_progressive_disclosure_with_every_schema() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    let env = Env::new(&server);
    let out = env.quiver(&["inspect", "--cost", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let packages: Vec<&str> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["package"].as_str().unwrap())
        .collect();
    assert_eq!(packages, ["group-admin", "notes", "weather"]);
    // Eager offers the three tools; progressive only the meta-tools (`get_run` among them: the
    // host gives every runtime its workflow store, as chat and serve have it).
    assert_eq!(v["eager"]["tools"], 3);
    assert_eq!(v["progressive"]["tools"], 7);
    let eager_sum: u64 = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["eager_tokens"].as_u64().unwrap())
        .sum();
    // Per-package schemas add up to the whole list, up to the tokens BPE merges across joins.
    let total = v["eager"]["tool_tokens"].as_u64().unwrap();
    assert!(eager_sum.abs_diff(total) < 10, "{eager_sum} vs {total}");
    assert!(v["packages"][2]["catalog_tokens"].as_u64().unwrap() > 5);
    // Issue 12 defect 13: a hit brings the whole package into one loaded slot; what that costs
    // is its exposed schemas (each package here exposes one tool), and every slot held by the
    // costliest packages is the progressive turn plus all of them (3 packages < 12 slots).
    assert_eq!(v["loaded_slots"], 12);
    let mut loaded_sum = 0;
    for p in v["packages"].as_array().unwrap() {
        let (loaded, eager) = (
            p["loaded_tokens"].as_u64().unwrap(),
            p["eager_tokens"].as_u64().unwrap(),
        );
        assert!(loaded > 0 && loaded.abs_diff(eager) < 10, "{p}");
        loaded_sum += loaded;
    }
    assert_eq!(
        v["all_slots_tokens"].as_u64().unwrap(),
        v["progressive"]["system_tokens"].as_u64().unwrap()
            + v["progressive"]["tool_tokens"].as_u64().unwrap()
            + loaded_sum
    );
    // A benchmark's tools load as packages.
    let tools = env.dir.path().join("tools.jsonl");
    let lines: Vec<String> = (0..25)
        .map(|i| json!({"name": format!("Demo.tool{i}"), "description": format!("Demo tool number {i} that does a thing"), "parameters": {"type": "dict", "properties": {"x": {"type": "String", "description": "an input"}}, "required": ["x"]}}).to_string())
        .collect();
    fs::write(&tools, lines.join("\n")).unwrap();
    let out = env.quiver(&[
        "inspect",
        "--cost",
        "--bench-tools",
        tools.to_str().unwrap(),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["eager"]["tools"], 25);
    assert_eq!(v["packages"].as_array().unwrap().len(), 3);
    assert!(v["reduction"].as_f64().unwrap() > 0.0, "{v}");
}

/// `quiver chat` at a terminal, driven through util-linux `script`, which gives it a
/// pseudo-terminal: the output (stdout and stderr, merged as a person sees them) is read as it
/// comes, and each line is typed only after what it answers has been shown.
struct Terminal {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    fn start(env: &Env, args: &[&str]) -> Terminal {
        use std::io::Read;
        let quiver = env!("CARGO_BIN_EXE_quiver");
        let root = env.dir.path().join("packages");
        let db = env.dir.path().join("state.db");
        let command = format!(
            "'{quiver}' --root '{}' {} --db '{}'",
            root.display(),
            args.join(" "),
            db.display()
        );
        let mut child = Command::new("script")
            .args(["-qfec", &command, "/dev/null"])
            .env("QUIVER_HOME", env.dir.path().join("home"))
            .env("HOME", env.dir.path().join("home"))
            .env("QUIVER_AGENT_CONFIG", env.dir.path().join("agent.yaml"))
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_BASE_URL")
            .env_remove("QUIVER_MODEL")
            .env_remove("QUIVER_PROVIDER")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("util-linux `script` runs the chat under a pseudo-terminal");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes.extend_from_slice(&buf[..n]);
                *sink.lock().unwrap() = String::from_utf8_lossy(&bytes).replace('\r', "");
            }
        });
        Terminal { child, stdin, seen }
    }

    fn output(&self) -> String {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until the output holds `text` `count` times; the whole output so far.
    fn wait_for(&mut self, text: &str, count: usize) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = self.output();
            if out.matches(text).count() >= count {
                return out;
            }
            let exited = self.child.try_wait().unwrap();
            assert!(
                exited.is_none() && std::time::Instant::now() < deadline,
                "no {count}× {text:?} in the chat's output ({exited:?}):\n{out}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, line: &str) {
        use std::io::Write;
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        self.stdin.flush().unwrap();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn chat_at_a_terminal_streams_asks_consent_and_runs_its_commands() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([
        Move::call("tool_search", json!({"query": "北京天气"})),
        Move::call("weather__forecast", json!({"city": "北京"})),
        Move::text("北京今天晴，适合出门。"),
        Move::text("已按日报整理：买牛奶。"),
    ]);
    let env = Env::new(&server);
    write(
        &env.dir.path().join("packages"),
        "notes/skills/daily/SKILL.md",
        "---\nname: daily\ndescription: 每日笔记 Daily notes digest\n---\nList today's notes as bullets.\n",
    );
    let mut term = Terminal::start(&env, &["chat"]);
    // The banner and the first prompt (the prompt is "\n> ", typed lines are echoed after it).
    let prompt = "\n> ";
    let out = term.wait_for(prompt, 1);
    assert!(out.contains("quiver chat · agent `chat`"), "{out}");

    term.type_line("北京天气怎么样？");
    let out = term.wait_for("[a] for this conversation  [n] deny: ", 1);
    assert!(
        out.contains("Allow the model to use package `weather` in this conversation?"),
        "{out}"
    );
    term.type_line("a");
    let out = term.wait_for(prompt, 2);
    assert!(
        out.contains("→ tool_search {\"query\":\"北京天气\"}"),
        "{out}"
    );
    assert!(
        out.contains("→ weather__forecast {\"city\":\"北京\"}"),
        "{out}"
    );
    assert!(out.contains("  ← ok: {\"sky\":\"sunny\"}"), "{out}");
    // Streamed (the model was asked for a stream) and shown once, not printed again at the end.
    assert_eq!(out.matches("北京今天晴，适合出门。\n").count(), 1, "{out}");
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.body["stream"] == json!(true)),
        "the terminal chat asks for streamed replies"
    );

    term.type_line("/tools");
    let out = term.wait_for(prompt, 3);
    let tools = &out[out.rfind("/tools").unwrap()..];
    assert!(tools.contains("\ntool_search  "), "{tools}");
    assert!(
        tools.contains("\nweather__forecast  查询城市天气预报和气温"),
        "{tools}"
    );

    term.type_line("/skills");
    let out = term.wait_for(prompt, 4);
    let skills = &out[out.rfind("/skills").unwrap()..];
    assert!(
        skills.contains("\n/notes/daily  每日笔记 Daily notes digest"),
        "{skills}"
    );

    term.type_line("/notes/daily 买牛奶");
    let out = term.wait_for(prompt, 5);
    assert!(out.contains("已按日报整理：买牛奶。\n"), "{out}");
    // The model was told the skill started, with its instructions and the text typed.
    let sent = fake_last_user(&server);
    assert!(
        sent.contains("I started the skill `notes/daily`")
            && sent.contains("List today's notes as bullets.")
            && sent.ends_with("买牛奶"),
        "{sent}"
    );

    term.type_line("/audit");
    let out = term.wait_for(prompt, 6);
    let audit = &out[out.rfind("/audit").unwrap()..];
    assert!(audit.contains("\nCall  tool_search  ok  "), "{audit}");
    assert!(
        audit.contains("\nCall  weather.forecast  ok  ")
            && audit.contains("consent: allow-session"),
        "{audit}"
    );
    assert!(
        audit.contains("\nSkillActivated  notes/daily  ok"),
        "{audit}"
    );

    term.type_line("/reset");
    let out = term.wait_for(prompt, 7);
    assert!(
        out.contains("conversation cleared; skills ended: notes/daily"),
        "{out}"
    );

    term.type_line("/quit");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = term.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "`/quit` did not end the chat:\n{}",
            term.output()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}\n{}", term.output());
    assert_eq!(server.remaining(), 0);
}

fn fake_last_user(server: &FakeServer) -> String {
    let requests = server.requests();
    quiver_agent::fake::last_user_text(&requests.last().unwrap().body)
}

/// Issue 12 D16: `quiver chat --agent` offers the meta-tools the config file's
/// `runtime.agents.<pkg>.<agent>.meta_tools` sets, as `quiver call --agent` does; without an
/// entry, the ones the agent declares among its tools.
#[test]
fn chat_agent_offers_the_meta_tools_of_the_config_file() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    let env = Env::new(&server);
    write(
        &env.dir.path().join("packages"),
        "desk/quiver.yaml",
        "id: desk\ndescription: 前台 The front desk\n",
    );
    write(
        &env.dir.path().join("packages"),
        "desk/agents/clerk.md",
        "---\ndescription: Answers visitors\ntools: [read_skill, weather.forecast]\n---\nYou are the clerk.\n",
    );
    let config = env.dir.path().join("config.yaml");
    let cases = [
        (None, vec!["read_skill"]),
        (
            Some("runtime:\n  agents:\n    desk.clerk: {meta_tools: [tool_search, load_tool]}\n"),
            vec!["load_tool", "tool_search"],
        ),
    ];
    for (text, want) in cases {
        match text {
            Some(text) => fs::write(&config, text).unwrap(),
            None => fs::write(&config, "{}\n").unwrap(),
        }
        server.push([Move::text("您好")]);
        let before = server.requests().len();
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["--root", env.dir.path().join("packages").to_str().unwrap()])
            .args(["chat", "--agent", "desk.clerk", "-m", "你好"])
            .args(["--db", env.dir.path().join("state.db").to_str().unwrap()])
            .env("QUIVER_HOME", env.dir.path().join("home"))
            .env("HOME", env.dir.path().join("home"))
            .env("QUIVER_AGENT_CONFIG", env.dir.path().join("agent.yaml"))
            .env("QUIVER_CONFIG", &config)
            .env("QUIVER_LOG", "quiver_host=debug")
            .env_remove("QUIVER_PATH")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        // `chat` too reads the config file once (the host logs each read).
        assert_eq!(
            stderr.matches("reading the config file").count(),
            1,
            "{stderr}"
        );
        let requests = server.requests();
        let offered = quiver_agent::fake::offered_tools(&requests[before].body);
        let mut metas: Vec<&str> = offered
            .iter()
            .map(String::as_str)
            .filter(|t| !t.contains("__"))
            .collect();
        metas.sort_unstable();
        assert_eq!(metas, want, "{text:?}: {offered:?}");
        assert!(
            offered.iter().any(|t| t == "weather__forecast"),
            "{offered:?}"
        );
    }
}
