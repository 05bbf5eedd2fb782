//! A console over a real runtime: fixture packages in a temporary folder, a real SQLite
//! file, built-in tools that record their calls, the console's queue as the approver, and
//! the console served on a loopback port.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quiver_catalog::Catalog;
use quiver_console::{Admin, Console, ConsoleConfig};
use quiver_policy::{Origin, Principal};
use quiver_runtime::approver::{Approver, QueueApprover};
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::{ApproverSet, CallOutcome, Profile, Runtime, RuntimeConfig, SessionRequest};
use quiver_store::SqliteStore;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const TOKEN: &str = "qc_test-token-0123456789abcdefghijklmnopqrstuv";

/// The value of the fixture's secret setting: it must appear on no page.
pub const SECRET_SETTING: &str = "sk-SECRET-9d1e-never-shown";

/// The text of the fixture's prompt section: it must appear on no page.
pub const CANARY: &str = "CANARY-7f3a-never-shown";

pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn fixture(root: &Path) {
    write(
        root,
        "weather/quiver.yaml",
        "id: weather\nname: 天气\ndescription: 天气预报 查询城市天气 Weather forecasts\nconfig:\n  type: object\n  properties:\n    api_key: {type: string, secret: true}\n    units: {type: string}\n",
    );
    write(
        root,
        "weather/tools/forecast/tool.yaml",
        "description: 查询城市天气预报 Get the forecast\ncategory: perception\nexpose: true\ninput: {type: object, properties: {city: {type: string}}, required: [city]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "weather/prompts/house-rules.md",
        &format!("---\ntitle: 天气规则 House rules\nlayer: context\n---\n{CANARY}\n"),
    );
    write(
        root,
        "weather/pages/index.html",
        "<!doctype html><meta charset=utf-8><title>天气</title><link rel=stylesheet href=style.css><p id=hello>天气页面</p><p id=forecast>-</p><script>document.getElementById('hello').dataset.origin = String(window.origin);</script><script src=app.js></script><script src=forecast.js></script>\n",
    );
    write(
        root,
        "weather/pages/style.css",
        "#hello { color: rgb(1, 2, 3); }\n",
    );
    write(
        root,
        "weather/pages/app.js",
        "var hello = document.getElementById('hello');\nhello.dataset.script = 'ran';\nPromise.all(['/approvals', '/packages/notes'].map(function (u) {\n  return fetch(u).then(function () { return 'read'; }, function () { return 'refused'; });\n})).then(function (r) { hello.dataset.reads = r.join(','); });\n",
    );
    write(root, "weather/outside.css", "/* not a page's file */\n");
    bridge_pages(root);
    write(
        root,
        "weather/workflows/report.yaml",
        "description: Forecast after a review\nexpose: true\nsteps:\n  - id: ok\n    approval: Look up Beijing?\n  - id: look\n    tool: forecast\n    with: {city: 北京}\n",
    );
    write(root, "weather/secret.txt", "not a page\n");
    write(
        root,
        "notes/quiver.yaml",
        "id: notes\ndescription: Take notes 记笔记\n",
    );
    write(
        root,
        "notes/tools/add_note/tool.yaml",
        "description: Save a note\ncategory: action\nexpose: true\napproval: always\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "notes/tools/save_note/tool.yaml",
        "description: Save a note without asking\ncategory: action\napproval: never\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [a]}\n",
    );
    write(
        root,
        "notes/workflows/save.yaml",
        "description: Save a note\nexpose: true\nsteps:\n  - id: save\n    tool: save_note\n    with: {text: saved}\n",
    );
    write(
        root,
        "notes/workflows/publish.yaml",
        "description: Publish the notes after a review\nexpose: true\nsteps:\n  - id: ok\n    approval: Publish them?\n  - id: add\n    tool: add_note\n    with: {text: published}\n",
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
}

/// The pages that talk to the console's bridge: weather's page calls its own `forecast`
/// (beside what it already does), group-admin's is hostile: it tries another package's item,
/// a message that is not a call, a read of the console and a form to the control plane. A
/// skill of weather's, for the sessions page.
fn bridge_pages(root: &Path) {
    write(
        root,
        "weather/SKILL.md",
        "---\nname: weather\ndescription: 天气 Weather for a city\n---\nUse forecast.\n",
    );
    write(
        root,
        "weather/pages/forecast.js",
        "function quiverCall(item, args) {\n  return new Promise(function (resolve) {\n    var id = 'c' + Math.random().toString(36).slice(2);\n    window.addEventListener('message', function on(e) {\n      if (e.source !== window.parent || !e.data || e.data.quiver !== 'result' || e.data.id !== id) { return; }\n      window.removeEventListener('message', on);\n      resolve(e.data);\n    });\n    window.parent.postMessage({quiver: 'call', id: id, item: item, arguments: args}, '*');\n  });\n}\nif (window.parent !== window) {\n  quiverCall('forecast', {city: '北京'}).then(function (r) {\n    var out = document.getElementById('forecast');\n    out.textContent = r.ok ? JSON.stringify(r.result) : r.error;\n    out.dataset.status = r.status;\n  });\n}\n",
    );
    write(
        root,
        "group-admin/pages/index.html",
        r#"<!doctype html><meta charset=utf-8><title>hostile</title>
<form id=f method=post action="/control"><input name=mode value=emergency-stop><input name=reason value=hostile></form>
<ul><li id=other>-</li><li id=unknown>-</li><li id=approve>-</li><li id=read>-</li><li id=form>-</li></ul>
<script>
var n = 0, slots = {};
function mark(slot, status, text) { var el = document.getElementById(slot); el.dataset.status = status; el.textContent = text || status; }
window.addEventListener('message', function (e) {
  if (e.source !== window.parent || !e.data || e.data.quiver !== 'result') { return; }
  mark(slots[e.data.id], e.data.status, e.data.error || JSON.stringify(e.data.result));
});
function ask(slot, message) { n += 1; message.id = n; slots[n] = slot; window.parent.postMessage(message, '*'); }
ask('other', {quiver: 'call', item: 'weather.forecast', arguments: {city: 'x'}});
ask('unknown', {quiver: 'call', item: 'forecast', arguments: {city: 'x'}});
ask('approve', {quiver: 'answer', card: 'apr-x', decision: 'approve'});
fetch('/approvals/apr-x', {method: 'POST', body: 'decision=approve'}).then(function () { mark('read', 'sent'); }, function () { mark('read', 'refused'); });
document.getElementById('f').submit();
mark('form', 'tried');
</script>
"#,
    );
}

pub struct Served {
    pub _dir: tempfile::TempDir,
    pub runtime: Arc<Runtime>,
    pub base: String,
    pub addr: std::net::SocketAddr,
    pub shutdown: CancellationToken,
    pub calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// Set: the next tool call records itself, then panics (a process dying mid-step).
    pub crash: Arc<std::sync::atomic::AtomicBool>,
    pub admin: Admin,
    /// The runtime's database, as the test looks at it (the console never does).
    pub store: Arc<SqliteStore>,
    pub server: tokio::task::JoinHandle<()>,
}

/// How long a queued call waits in the tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// The console over a fresh runtime, served on a loopback port.
pub async fn serve() -> Served {
    serve_waiting(WAIT).await
}

/// [`serve`] whose queued calls wait `wait`.
pub async fn serve_waiting(wait: Duration) -> Served {
    serve_with(wait, RuntimeConfig::default().max_loaded, None).await
}

/// [`serve`] whose sessions hold `max_loaded` loaded slots.
pub async fn serve_loading(max_loaded: usize) -> Served {
    serve_with(WAIT, max_loaded, None).await
}

/// [`serve`] over the repository's example packages (`examples/packages`) instead of the
/// fixture; their tools of the fixture's names run as built-ins.
pub async fn serve_examples() -> Served {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
    serve_with(WAIT, RuntimeConfig::default().max_loaded, Some(&examples)).await
}

async fn serve_with(wait: Duration, max_loaded: usize, root: Option<&Path>) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let packages = match root {
        Some(root) => root.to_path_buf(),
        None => {
            let packages = dir.path().join("packages");
            fixture(&packages);
            packages
        }
    };
    let catalog = Catalog::load_dirs(&[&packages]);
    let store = Arc::new(SqliteStore::open(dir.path().join("state.db")).unwrap());
    let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let crash = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let examples = root.is_some();
    let mut executor = BuiltinExecutor::new();
    for tool in [
        "weather.forecast",
        "notes.add_note",
        "notes.save_note",
        "group-admin.kick_member",
    ] {
        let calls = calls.clone();
        let crash = crash.clone();
        let name = tool.to_owned();
        executor.register(
            tool,
            Arc::new(move |args: &Value, _ctx| {
                calls.lock().unwrap().push((name.clone(), args.clone()));
                if crash.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("the process died during `{name}`");
                }
                if examples && name == "weather.forecast" {
                    // The example declares its output: a forecast.
                    return Ok(json!({"city": args["city"], "date": "2026-12-07",
                        "condition": "晴 sunny", "temp_min_c": -3, "temp_max_c": 6,
                        "source": "console test"}));
                }
                Ok(json!({"ran": name, "args": args}))
            }),
        );
    }
    let console_queue: Arc<dyn Approver> = Arc::new(QueueApprover::new(store.clone(), wait));
    let runtime = Arc::new(Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        ApproverSet {
            person: None,
            console: Some(console_queue),
            reviewer: None,
        },
        RuntimeConfig {
            settings: [(
                "weather".to_owned(),
                serde_json::Map::from_iter([("api_key".to_owned(), json!(SECRET_SETTING))]),
            )]
            .into(),
            max_loaded,
            ..RuntimeConfig::default()
        },
    ));
    runtime.set_workflow_store(store.clone());
    let admin = Admin::new(store.clone(), store.clone());
    let mut config = ConsoleConfig::new(TOKEN.into(), wait);
    config.authoring = Some(super::authoring::config(
        &dir.path().join("state"),
        &packages,
        &runtime,
    ));
    let console = Arc::new(Console::new(admin.clone(), Some(runtime.clone()), config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let server = tokio::spawn(async move {
        quiver_console::serve(console, listener, stop)
            .await
            .unwrap();
    });
    Served {
        _dir: dir,
        runtime,
        base: format!("http://{addr}"),
        addr,
        shutdown,
        calls,
        crash,
        admin,
        store,
        server,
    }
}

impl Served {
    /// A session of the owner, with `package` already allowed (so only the call's own card
    /// is asked).
    pub fn session(&self, packages: &[&str]) -> String {
        let session = self
            .runtime
            .create_session(&SessionRequest {
                origin: Origin::default(),
                agent: "chat".into(),
                principal: Principal::user("owner", quiver_package::rules::Role::Master),
                profile: Profile::Interactive,
            })
            .unwrap();
        for package in packages {
            self.runtime
                .grant_consent(&session, package, "test")
                .unwrap();
        }
        session
    }

    /// Starts `tool(arguments)` in `session` on a thread; it waits in the queue.
    pub fn call(
        &self,
        session: &str,
        tool: &str,
        arguments: Value,
    ) -> std::thread::JoinHandle<CallOutcome> {
        let runtime = self.runtime.clone();
        let (session, tool) = (session.to_owned(), tool.to_owned());
        std::thread::spawn(move || {
            let principal = Principal::user("owner", quiver_package::rules::Role::Master);
            let mut turn = runtime.begin_turn(&session, principal, "").unwrap();
            turn.call(&tool, arguments).unwrap()
        })
    }

    /// Waits until `n` cards are pending; returns them.
    pub async fn pending(&self, n: usize) -> Vec<quiver_store::Approval> {
        for _ in 0..200 {
            let pending = self.admin.pending_approvals(None).unwrap();
            if pending.len() >= n {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{n} cards never appeared");
    }

    /// A client that keeps no cookies and follows no redirects.
    pub fn client(&self) -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    /// Signs in like a browser; returns the cookie header and the CSRF token of its forms.
    pub async fn sign_in(&self) -> (String, String) {
        let response = self
            .client()
            .post(format!("{}/login", self.base))
            .header("origin", &self.base)
            .form(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        let cookie = response
            .headers()
            .get("set-cookie")
            .unwrap()
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let page = self
            .client()
            .get(format!("{}/approvals", self.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned();
        (cookie, csrf)
    }
}
