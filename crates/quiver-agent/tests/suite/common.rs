//! The harness: fixture packages in a temporary folder, a real SQLite file, built-in tools
//! that record their calls, a scripted person, and a fake model server.

use std::collections::VecDeque;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use quiver_agent::config::{AgentConfig, ProviderConfig, ProviderKind, ToolMode};
use quiver_agent::fake::{Api, FakeServer};
use quiver_agent::{Providers, SubAgents};
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

/// Answers cards from a script and remembers them.
#[derive(Default)]
pub struct Scripted {
    pub answers: Mutex<VecDeque<Answer>>,
    pub seen: Mutex<Vec<Card>>,
}

impl Scripted {
    pub fn answer(&self, answers: &[Answer]) {
        self.answers.lock().unwrap().extend(answers.iter().copied());
    }
    pub fn cards(&self) -> Vec<Card> {
        self.seen.lock().unwrap().clone()
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
}

pub fn fixture(root: &Path) {
    write(
        root,
        "weather/quiver.yaml",
        "id: weather\nname: 天气\ndescription: 天气预报 Weather forecasts\n",
    );
    write(
        root,
        "weather/SKILL.md",
        "---\nname: weather\ndescription: How to answer weather questions 天气.\n---\nUse weather__forecast for forecasts.\n",
    );
    write(
        root,
        "weather/tools/forecast/tool.yaml",
        "description: 查询城市天气预报和气温 Get the weather forecast for a city\ncategory: perception\nexpose: true\ninput:\n  type: object\n  properties:\n    city: {type: string}\n  required: [city]\nrun: {command: [python3, main.py]}\n",
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
        "notes/tools/list_notes/tool.yaml",
        "description: List the notes\ncategory: perception\nexpose: true\ninput: {type: object, properties: {since: {type: string}}}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "group-admin/quiver.yaml",
        "id: group-admin\ndescription: 群管理 group moderation\n",
    );
    write(
        root,
        "group-admin/tools/kick_member/tool.yaml",
        "description: Remove a member from the group\ncategory: action\nexpose: true\nrisk: dangerous\nrisk_category: member\ninput: {type: object, properties: {user: {type: string}}, required: [user]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "reports/quiver.yaml",
        "id: reports\ndescription: 报告 Reports from notes\n",
    );
    write(
        root,
        "reports/AGENTS.md",
        "REPORT RULES: never invent facts.\n",
    );
    write(
        root,
        "reports/agents/writer.md",
        "---\ndescription: Writes a report from the notes\ntools: [notes.list_notes]\nexpose: true\nmax_turns: 4\n---\nYou are the report writer.\n",
    );
    write(
        root,
        "reports/agents/editor/agent.yaml",
        "description: Polishes a report\ntools: [reports.writer]\nexpose: true\n",
    );
    write(
        root,
        "reports/agents/editor/system.md",
        "You are the editor.\n",
    );
    write(
        root,
        "reports/agents/editor/boundaries.md",
        "Never publish.\n",
    );
    write(
        root,
        "reports/agents/editor/conventions.md",
        "Keep the headings.\n",
    );
    write(
        root,
        "reports/skills/weekly/SKILL.md",
        "---\nname: weekly\ndescription: Weekly report 周报 from a week of notes\ncontext: fork\nagent: writer\n---\nSum up the week's notes.\n",
    );
}

pub struct Harness {
    pub _dir: tempfile::TempDir,
    pub runtime: Runtime,
    /// The runtime's database, as the test looks at it (the runtime keeps its store private).
    pub store: Arc<dyn quiver_store::Store>,
    pub person: Arc<Scripted>,
    pub calls: Arc<Mutex<Vec<(String, Value)>>>,
    pub server: FakeServer,
    pub providers: Arc<Providers>,
}

pub fn provider_config(server: &FakeServer, api: Api) -> ProviderConfig {
    let kind = match api {
        Api::OpenAi => ProviderKind::Openai,
        Api::Anthropic => ProviderKind::Anthropic,
    };
    let mut p = ProviderConfig::new(kind, server.url(), "fake-model");
    p.retry_backoff_ms = 1;
    p.timeout = 5.0;
    p
}

pub fn harness(api: Api, tweak: impl FnOnce(&mut AgentConfig)) -> Harness {
    harness_with(api, ToolMode::Native, tweak)
}

pub fn harness_with(api: Api, mode: ToolMode, tweak: impl FnOnce(&mut AgentConfig)) -> Harness {
    harness_over(api, mode, tweak, |_| {})
}

/// A harness whose packages are the fixture's plus what `more` writes into the same folder.
pub fn harness_over(
    api: Api,
    mode: ToolMode,
    tweak: impl FnOnce(&mut AgentConfig),
    more: impl FnOnce(&Path),
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    more(&packages);
    let catalog = Catalog::load_dirs(&[&packages]);
    // Forks into another package's private agent are linted, and loaded so tests can show
    // that the runtime refuses them.
    assert!(
        catalog
            .diagnostics()
            .iter()
            .all(|d| !d.is_error() || d.code == "skill-agent-private"),
        "{:#?}",
        catalog.diagnostics()
    );
    let store = Arc::new(SqliteStore::open(dir.path().join("state.db")).unwrap());
    let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let mut executor = BuiltinExecutor::new();
    for tool in [
        "weather.forecast",
        "notes.add_note",
        "notes.list_notes",
        "group-admin.kick_member",
    ] {
        let calls = calls.clone();
        let name = tool.to_owned();
        executor.register(
            tool,
            Arc::new(move |args: &Value, ctx| {
                calls.lock().unwrap().push((name.clone(), args.clone()));
                Ok(json!({"tool": name, "session": ctx.session_id, "notes": ["修好登录页", "写周报"]}))
            }),
        );
    }
    let person = Arc::new(Scripted::default());
    let mut config = RuntimeConfig::default();
    for (agent, metas) in quiver_agent::agents::agent_meta_tools(&catalog) {
        config.agent_meta_tools.entry(agent).or_insert(metas);
    }
    let runtime = Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        ApproverSet {
            person: Some(person.clone()),
            console: None,
            reviewer: None,
        },
        config,
    );
    let server = FakeServer::start(api).unwrap();
    let mut provider = provider_config(&server, api);
    provider.tools = mode;
    let mut agent_config = AgentConfig::default();
    agent_config.providers.insert("fake".into(), provider);
    agent_config.default = Some("fake".into());
    tweak(&mut agent_config);
    let providers = Arc::new(Providers::new(agent_config));
    runtime.set_agent_runner(Arc::new(SubAgents::new(providers.clone())));
    Harness {
        store,
        _dir: dir,
        runtime,
        person,
        calls,
        server,
        providers,
    }
}

pub fn owner() -> Principal {
    Principal::user("owner", quiver_package::rules::Role::Master)
}

pub fn session(h: &Harness) -> String {
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

pub fn chat<'r>(h: &'r Harness, session: &str) -> quiver_agent::ChatSession<'r> {
    let (provider, options) = h.providers.for_agent(None, None).unwrap();
    quiver_agent::ChatSession::new(&h.runtime, provider, options, session, owner())
        .with_person(h.person.clone())
}

/// Tool names a recorded request offered.
pub fn tool_names(body: &Value) -> Vec<String> {
    quiver_agent::fake::offered_tools(body)
}
