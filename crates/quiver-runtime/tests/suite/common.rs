//! The harness: a fixture catalog in a temporary folder, a real SQLite file, built-in tools
//! that record their calls, and a scripted approver.

use std::collections::VecDeque;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use quiver_catalog::Catalog;
use quiver_policy::{Origin, Principal, ScopeKind};
use quiver_runtime::approver::{Answer, Approver, Card};
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::{ApproverSet, Profile, Runtime, RuntimeConfig, SessionRequest};
use quiver_store::SqliteStore;
use serde_json::{Value, json};

pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Answers cards from a script, and remembers every card it saw.
#[derive(Default)]
pub struct Scripted {
    pub answers: Mutex<VecDeque<Answer>>,
    pub seen: Mutex<Vec<Card>>,
    pub replies: Mutex<VecDeque<String>>,
}

impl Scripted {
    pub fn answer(&self, answers: &[Answer]) {
        self.answers.lock().unwrap().extend(answers.iter().copied());
    }

    pub fn cards(&self) -> Vec<Card> {
        self.seen.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

impl Approver for Scripted {
    fn decide(&self, card: &Card) -> Answer {
        self.seen.lock().unwrap().push(card.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::TimedOut)
    }

    fn answer_question(&self, _question: &str) -> Option<String> {
        self.replies.lock().unwrap().pop_front()
    }
}

pub const TODAY: (i32, u32, u32) = (2026, 11, 29);

/// The fixture packages.
pub fn fixture(root: &Path) {
    write(
        root,
        "weather/quiver.yaml",
        "id: weather\nname: 天气\ndescription: 天气预报 Weather forecasts\n",
    );
    write(
        root,
        "weather/SKILL.md",
        "---\nname: weather\ndescription: How to answer weather questions 天气.\nallowed-tools: weather.forecast\ndisallowed-tools: notes.add_note\n---\nUse weather__forecast for forecasts.\n",
    );
    write(root, "weather/references/cities.md", "Beijing, Shanghai\n");
    write(root, "weather/scripts/now.sh", "echo now\n");
    write(
        root,
        "weather/tools/forecast/tool.yaml",
        "description: 查询城市天气预报和气温 Get the weather forecast for a city\ncategory: perception\nexpose: true\ncache: 60\ninput:\n  type: object\n  properties:\n    city: {type: string}\n    date: {type: string, format: date}\n  required: [city]\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "weather/tools/private_helper/tool.yaml",
        "description: internal\ncategory: decision\nrun: {command: [a]}\n",
    );
    write(
        root,
        "weather/skills/manual/SKILL.md",
        "---\nname: manual\ndescription: Only people start this.\ndisable-model-invocation: true\n---\nsecret\n",
    );
    write(
        root,
        "notes/quiver.yaml",
        "id: notes\ndescription: Take notes 记笔记\n",
    );
    write(
        root,
        "notes/tools/add_note/tool.yaml",
        "description: Save a note\ncategory: action\nexpose: true\ninput:\n  type: object\n  properties:\n    text: {type: string, minLength: 1}\n  required: [text]\nrun: {command: [a]}\n",
    );
    write(
        root,
        "notes/tools/sync_notes/tool.yaml",
        "description: Sync notes to a server\ncategory: action\nexpose: true\napproval: once\ninput:\n  type: object\n  properties:\n    server: {type: string}\n    token: {type: string, secret: true}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "notes/tools/long_list/tool.yaml",
        "description: List every note in full\ncategory: perception\nexpose: true\nmax_output: 50\nrun: {command: [a]}\n",
    );
    write(
        root,
        "notes/tools/real_code/tool.yaml",
        "description: A tool whose code needs the sandbox\ncategory: perception\nexpose: true\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "group-admin/quiver.yaml",
        "id: group-admin\ndescription: 群管理 group moderation\n",
    );
    write(
        root,
        "group-admin/tools/kick_member/tool.yaml",
        "description: Remove a member from the group\ncategory: action\nexpose: true\nrisk: dangerous\nrisk_category: member\napproval: human\ninput: {type: object, properties: {user: {type: string}}, required: [user]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "group-admin/tools/master_only/tool.yaml",
        "description: Owner-only switch\ncategory: perception\nexpose: true\npermissions: ['role(master)']\nrun: {command: [a]}\n",
    );
    write(
        root,
        "group-admin/tools/group_poll/tool.yaml",
        "description: Start a poll in this group\ncategory: perception\nexpose: true\nscopes: [group]\nrun: {command: [a]}\n",
    );
}

pub struct Harness {
    pub _dir: tempfile::TempDir,
    pub runtime: Runtime,
    /// The runtime's database, as the test looks at it (the runtime keeps its store private).
    pub store: Arc<dyn quiver_store::Store>,
    pub person: Arc<Scripted>,
    pub reviewer: Option<Arc<Scripted>>,
    pub calls: Arc<Mutex<Vec<(String, Value)>>>,
    pub db: std::path::PathBuf,
}

pub fn harness() -> Harness {
    harness_with(RuntimeConfig::default())
}

pub fn harness_with(config: RuntimeConfig) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    let db = dir.path().join("state.db");
    build(dir, &packages, db, config, None)
}

pub fn build(
    dir: tempfile::TempDir,
    packages: &Path,
    db: std::path::PathBuf,
    config: RuntimeConfig,
    reviewer: Option<Arc<Scripted>>,
) -> Harness {
    build_over(dir, Catalog::load_dirs(&[packages]), db, config, reviewer)
}

/// [`build`] over a catalog the test made.
pub fn build_over(
    dir: tempfile::TempDir,
    catalog: Catalog,
    db: std::path::PathBuf,
    config: RuntimeConfig,
    reviewer: Option<Arc<Scripted>>,
) -> Harness {
    assert!(
        catalog.diagnostics().iter().all(|d| !d.is_error()),
        "{:#?}",
        catalog.diagnostics()
    );
    let store = Arc::new(SqliteStore::open(&db).unwrap());
    let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let mut executor = BuiltinExecutor::new();
    for tool in [
        "weather.forecast",
        "notes.add_note",
        "notes.sync_notes",
        "notes.long_list",
        "group-admin.kick_member",
        "group-admin.master_only",
        "group-admin.group_poll",
        "weather.run_skill_script",
        "gem.priv_tool",
        "probe.t_qq",
        "cfgd.lookup",
        "vault.peek",
    ] {
        let calls = calls.clone();
        let name = tool.to_owned();
        executor.register(
            tool,
            Arc::new(move |args: &Value, ctx| {
                calls.lock().unwrap().push((name.clone(), args.clone()));
                if name == "notes.long_list" {
                    return Ok(json!("x".repeat(120)));
                }
                Ok(json!({"tool": name, "args": args, "session": ctx.session_id}))
            }),
        );
    }
    let person = Arc::new(Scripted::default());
    let approvers = ApproverSet {
        person: Some(person.clone()),
        console: None,
        reviewer: reviewer.clone().map(|r| r as Arc<dyn Approver>),
    };
    let mut runtime = Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        approvers,
        config,
    );
    runtime.set_clock(|| NaiveDate::from_ymd_opt(TODAY.0, TODAY.1, TODAY.2).unwrap());
    Harness {
        _dir: dir,
        runtime,
        store,
        person,
        reviewer,
        calls,
        db,
    }
}

/// A second runtime over `h`'s packages and database, as another process of the same state
/// folder would open it (nothing shared in memory).
pub fn reopen(h: &Harness) -> Harness {
    build(
        tempfile::tempdir().unwrap(),
        &h._dir.path().join("packages"),
        h.db.clone(),
        RuntimeConfig::default(),
        None,
    )
}

/// A harness whose reviewing model answers from its own script.
pub fn harness_with_reviewer() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    let db = dir.path().join("state.db");
    build(
        dir,
        &packages,
        db,
        RuntimeConfig::default(),
        Some(Arc::new(Scripted::default())),
    )
}

pub fn cli_session(h: &Harness) -> String {
    h.runtime
        .create_session(&SessionRequest {
            origin: Origin::default(),
            agent: "chat".into(),
            principal: owner(),
            profile: Profile::Interactive,
        })
        .unwrap()
}

pub fn group_session(h: &Harness) -> String {
    h.runtime
        .create_session(&SessionRequest {
            origin: Origin::on("qq", ScopeKind::Group, "10001"),
            agent: "chat".into(),
            principal: owner(),
            profile: Profile::Interactive,
        })
        .unwrap()
}

pub fn owner() -> Principal {
    Principal::user("owner", quiver_package::rules::Role::Master)
}

pub fn member(id: &str) -> Principal {
    Principal::user(id, quiver_package::rules::Role::User)
}

pub fn error_text(v: &Value) -> String {
    v.get("error")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
