//! The console in a real browser: headless Chromium from Debian's packages
//! (`scripts/install-browser.sh`), driven over WebDriver (chromedriver on a free port) with
//! fantoccini. One browser at a time: every case runs in order in the one test below (and the
//! tests of `browser_bridge` wait for it, [`ONE_BROWSER`]). Without
//! the browser the test says why and skips, unless `QUIVER_REQUIRE_BROWSER=1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use quiver_store::{ApprovalStatus, AuditKind, AuditQuery};
use serde_json::{Value, json};

use super::harness::{Served, TOKEN, serve};

mod attacks;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver, killed when dropped.
pub(super) struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts chromedriver, or says why it cannot (`None`: skip).
pub(super) async fn driver() -> Option<Driver> {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if !missing.is_empty() {
        let why = format!(
            "browser tests skipped: {} not installed (run scripts/install-browser.sh)",
            missing.join(" and ")
        );
        assert!(
            std::env::var("QUIVER_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "{why}, and QUIVER_REQUIRE_BROWSER=1"
        );
        eprintln!("{why}");
        return None;
    }
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Some(driver);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("chromedriver did not start on port {port}");
}

pub(super) async fn browser(driver: &Driver, profile: &Path) -> Client {
    let capabilities = json!({
        "browserName": "chrome",
        "goog:loggingPrefs": {"browser": "ALL"},
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1280,1024",
                format!("--host-resolver-rules=MAP {} 127.0.0.1", attacks::REBINDING_HOST),
                format!("--user-data-dir={}", profile.display()),
            ],
        },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap()
}

/// The browser's console log since the last read (chromedriver's log endpoint).
pub(super) async fn console_log(driver: &Driver, client: &Client) -> Vec<Value> {
    let session = client.session_id().await.unwrap().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response: Value = reqwest::Client::new()
        .post(format!("{}/session/{session}/se/log", driver.url))
        .json(&json!({"type": "browser"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    response["value"].as_array().cloned().unwrap_or_default()
}

/// Waits until `find` is on the page; how long it took.
pub(super) async fn appears(client: &Client, css: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if client.find(Locator::Css(css)).await.is_ok() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "`{css}` did not appear within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until nothing matches `css`.
async fn disappears(client: &Client, css: &str) {
    let started = Instant::now();
    while client.find(Locator::Css(css)).await.is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "`{css}` is still there"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the card `id` is no longer pending in the store; how long it took.
async fn decided(s: &Served, id: &str) -> Duration {
    let started = Instant::now();
    loop {
        let status = s.admin.approval(id).unwrap().unwrap().status;
        if status != ApprovalStatus::Pending {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{id} never decided"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn p95(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let index = (samples.len() * 95).div_ceil(100).saturating_sub(1);
    samples[index.min(samples.len() - 1)]
}

pub(super) fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `step` until it succeeds: a live update may swap the element out between finding it
/// and using it (a stale element reference), after which the step starts over.
pub(super) async fn retried<T, F, Fut>(mut step: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
{
    for _ in 0..40 {
        if let Ok(value) = step().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    match step().await {
        Ok(value) => value,
        Err(e) => panic!("{e}"),
    }
}

pub(super) async fn text_of(client: &Client, css: &str) -> String {
    retried(|| async move {
        client
            .find(Locator::Css(css))
            .await?
            .prop("textContent")
            .await
    })
    .await
    .unwrap_or_default()
}

/// Waits until the text of `css` is `want`.
pub(super) async fn until_text(client: &Client, css: &str, want: &str) {
    let started = Instant::now();
    loop {
        let text = text_of(client, css).await;
        if text == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "`{css}` shows {text:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) async fn click(client: &Client, css: &str) {
    retried(|| async move { client.find(Locator::Css(css)).await?.click().await }).await;
}

/// Types `reason` into card `id`'s reason field and clicks its `button`; when the click was
/// sent.
async fn answer(client: &Client, id: &str, reason: &str, button: &str) -> Instant {
    let card = format!("#card-{id}");
    let card = card.as_str();
    retried(|| async move {
        let element = client.find(Locator::Css(card)).await?;
        element
            .find(Locator::Css(".reason-input"))
            .await?
            .send_keys(reason)
            .await?;
        let button = element.find(Locator::Css(button)).await?;
        let at = Instant::now();
        button.click().await?;
        Ok(at)
    })
    .await
}

/// Held by each browser test while its browser runs: one browser at a time.
pub(super) static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser() {
    let _one = ONE_BROWSER.lock().await;
    let Some(driver) = driver().await else {
        return;
    };
    let s = serve().await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    let result = cases(&s, &driver, &client).await;
    let _ = client.close().await;
    result.unwrap();
}

async fn cases(s: &Served, driver: &Driver, client: &Client) -> Result<(), String> {
    let base = &s.base;

    // Login: nothing without it; the printed link signs in with one click.
    client.goto(&format!("{base}/approvals")).await.unwrap();
    assert!(client.current_url().await.unwrap().path() == "/login");
    client
        .goto(&quiver_console::login_url(s.addr, TOKEN))
        .await
        .unwrap();
    client
        .find(Locator::Css("#sign-in"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    appears(client, "#emergency-stop", Duration::from_secs(5)).await;
    assert_eq!(client.current_url().await.unwrap().path(), "/");

    // Packages with Chinese descriptions (a screenshot is kept).
    client.goto(&format!("{base}/packages")).await.unwrap();
    let table = text_of(client, "#packages").await;
    assert!(
        table.contains("天气预报 查询城市天气") && table.contains("群管理"),
        "{table}"
    );
    let shot = artifacts().join("packages-zh.png");
    std::fs::write(&shot, client.screenshot().await.unwrap()).unwrap();
    eprintln!("screenshot: {}", shot.display());
    client
        .goto(&format!("{base}/packages/weather"))
        .await
        .unwrap();
    assert!(text_of(client, "h1").await.contains("天气"));

    // The approval round trip, ten times for the figures: the card appears without reload,
    // its arguments are the canonical JSON exactly (a 5 KB string, a right-to-left override
    // shown as an escape), approve, the call completes, the audit names the operator.
    let session = s.session(&["notes", "group-admin"]);
    client.goto(&format!("{base}/approvals")).await.unwrap();
    appears(client, "#approvals", Duration::from_secs(5)).await;
    // The page's event stream is open before the first call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut to_screen = Vec::new();
    let mut to_stored = Vec::new();
    for round in 0..10 {
        let arguments =
            json!({"text": format!("{}\u{202e}gnp.exe round {round}", "x".repeat(5 * 1024))});
        let started = Instant::now();
        let call = s.call(&session, "notes__add_note", arguments.clone());
        let card = s.pending(1).await.remove(0);
        let id = card.card.id.clone();
        appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
        to_screen.push(started.elapsed());
        // The frame's count follows too.
        until_text(client, "#pending-count", "1").await;
        let shown = text_of(client, &format!("#card-{id} pre.arguments")).await;
        let want = quiver_console::escape_invisible(&quiver_store::canonical_json(&arguments));
        assert_eq!(shown, want);
        assert!(!shown.contains('\u{202e}') && shown.contains("\\u202e"));
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), arguments);
        // From the click to the decision committed.
        let clicked = answer(client, &id, "fine", "button.approve").await;
        decided(s, &id).await;
        to_stored.push(clicked.elapsed());
        let outcome = tokio::task::spawn_blocking(move || call.join().unwrap())
            .await
            .unwrap();
        assert_eq!(
            outcome.status,
            quiver_runtime::CallStatus::Ok,
            "{outcome:?}"
        );
        // The answered card leaves the pending list without reload (swapped for its answered
        // state, then dropped when the list refreshes on the hint).
        disappears(client, &format!("#card-{id}[data-status=pending]")).await;
        let records = s
            .admin
            .audit(&AuditQuery {
                session: Some(session.clone()),
                kind: Some(AuditKind::Operator),
                ..AuditQuery::default()
            })
            .unwrap();
        assert!(records.iter().any(|r| {
            r.entry
                .detail
                .as_ref()
                .is_some_and(|d| d["card"] == id.as_str())
                && r.entry.principal["user_id"] == "console:owner"
        }));
        client.goto(&format!("{base}/approvals")).await.unwrap();
        appears(client, "#approvals .empty", Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(s.calls.lock().unwrap().len(), 10);

    // Deny with a reason: nothing runs, the reason is kept.
    let call = s.call(&session, "notes__add_note", json!({"text": "deny me"}));
    let id = s.pending(1).await.remove(0).card.id;
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    let _ = answer(client, &id, "不行 not today", "button.deny").await;
    decided(s, &id).await;
    let denied = s.admin.approval(&id).unwrap().unwrap();
    assert_eq!(denied.status, ApprovalStatus::Denied);
    assert_eq!(denied.note.as_deref(), Some("不行 not today"));
    let outcome = tokio::task::spawn_blocking(move || call.join().unwrap())
        .await
        .unwrap();
    assert_ne!(outcome.status, quiver_runtime::CallStatus::Ok);
    assert_eq!(s.calls.lock().unwrap().len(), 10);

    // The dangerous gate: arm, then confirm.
    client.goto(&format!("{base}/approvals")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let call = s.call(&session, "group-admin__kick_member", json!({"user": "42"}));
    let id = s.pending(1).await.remove(0).card.id;
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    assert!(
        text_of(client, &format!("#card-{id} .risk"))
            .await
            .contains("member")
    );
    click(client, &format!("#card-{id} button.approve")).await;
    appears(
        client,
        &format!("#card-{id} form.armed"),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        s.admin.approval(&id).unwrap().unwrap().status,
        ApprovalStatus::Pending
    );
    click(client, &format!("#card-{id} button.approve")).await;
    decided(s, &id).await;
    let outcome = tokio::task::spawn_blocking(move || call.join().unwrap())
        .await
        .unwrap();
    assert_eq!(outcome.status, quiver_runtime::CallStatus::Ok);

    // Two tabs, one card: the first answer wins, the second tab's answer gets the conflict,
    // and nothing runs.
    let call = s.call(&session, "notes__add_note", json!({"text": "two tabs"}));
    let id = s.pending(1).await.remove(0).card.id;
    client
        .goto(&format!("{base}/approvals/{id}"))
        .await
        .unwrap();
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    let first = client.window().await.unwrap();
    let second = client.new_window(true).await.unwrap();
    client
        .switch_to_window(second.handle.clone())
        .await
        .unwrap();
    client
        .goto(&format!("{base}/approvals/{id}"))
        .await
        .unwrap();
    appears(client, &format!("#card-{id}"), Duration::from_secs(5)).await;
    let _ = answer(client, &id, "second tab first", "button.deny").await;
    decided(s, &id).await;
    client.close_window().await.unwrap();
    client.switch_to_window(first).await.unwrap();
    let _ = answer(client, &id, "too late", "button.approve").await;
    appears(
        client,
        &format!("#card-{id}[data-status=conflict]"),
        Duration::from_secs(5),
    )
    .await;
    assert!(
        text_of(client, &format!("#card-{id}"))
            .await
            .contains("already resolved")
    );
    let answered = s.admin.approval(&id).unwrap().unwrap();
    assert_eq!(answered.status, ApprovalStatus::Denied);
    assert_eq!(answered.note.as_deref(), Some("second tab first"));
    let outcome = tokio::task::spawn_blocking(move || call.join().unwrap())
        .await
        .unwrap();
    assert_ne!(outcome.status, quiver_runtime::CallStatus::Ok);
    // The refused answer is the one error the log holds so far (a 409, as it should be).
    let log = console_log(driver, client).await;
    assert!(
        log.iter()
            .all(|e| e["message"].as_str().is_some_and(|m| m.contains("409"))),
        "{log:#?}"
    );

    // Audit filters live in the URL: a reload keeps them.
    client
        .goto(&format!("{base}/audit?kind=operator"))
        .await
        .unwrap();
    client.refresh().await.unwrap();
    let kind = client
        .find(Locator::Css("#audit-filters input[name=kind]"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(kind.as_deref(), Some("operator"));
    let table = text_of(client, "#audit").await;
    assert!(
        table.contains("console:owner") && !table.contains("\ncall\n"),
        "{table}"
    );
    // The newest page follows the log live: a new record shows up without reload.
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.admin
        .record(quiver_runtime::operator::Action::SignIn, "tail-test")
        .unwrap();
    let started = Instant::now();
    while !text_of(client, "#audit").await.contains("tail-test") {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the audit tail did not update"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    attacks::attacks(s, driver, client).await;

    // No CSP violation (nor any other console error) on any page.
    for path in [
        "/",
        "/approvals",
        "/packages",
        "/packages/weather",
        "/prompts",
        "/audit",
        "/audit?kind=operator",
        "/sessions",
        "/runs",
        "/control",
    ] {
        client.goto(&format!("{base}{path}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = console_log(driver, client).await;
    let bad: Vec<&Value> = log
        .iter()
        .filter(|e| {
            e["level"] == "SEVERE"
                || e["message"].as_str().is_some_and(|m| {
                    m.contains("Content Security Policy") || m.contains("Content-Security-Policy")
                })
        })
        .collect();
    assert!(bad.is_empty(), "console errors: {bad:#?}");

    // The emergency stop: one click from any page.
    client.goto(&format!("{base}/packages")).await.unwrap();
    click(client, "#emergency-stop").await;
    appears(client, "#mode", Duration::from_secs(5)).await;
    assert_eq!(text_of(client, "#mode").await, "emergency-stop");
    assert!(s.admin.switches().unwrap().control.emergency_stop);
    assert!(
        text_of(client, "#control-banner")
            .await
            .contains("emergency-stop")
    );

    // The audit page with 500 rows: DOMContentLoaded, ten loads.
    for i in 0..500 {
        let mut entry = quiver_store::AuditEntry::new(AuditKind::Call, format!("ses-{}", i % 20));
        entry.tool = Some(format!("notes.add_note{}", i % 3));
        quiver_store::Store::append_audit(s.store.as_ref(), &entry).unwrap();
    }
    // Measured once the watcher has seen them (its hint makes an open page re-fetch rows).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut loads = Vec::new();
    for _ in 0..10 {
        client
            .goto(&format!("{base}/audit?limit=500"))
            .await
            .unwrap();
        let ms = client
            .execute(
                "const n = performance.getEntriesByType('navigation')[0]; return n.domContentLoadedEventEnd - n.startTime;",
                vec![],
            )
            .await
            .unwrap();
        loads.push(Duration::from_secs_f64(ms.as_f64().unwrap() / 1000.0));
    }
    let rows = client
        .find_all(Locator::Css("#audit tr"))
        .await
        .unwrap()
        .len();
    assert!(rows > 500, "{rows}");
    let page = p95(loads);

    package_page(driver, client, base).await;
    super::browser_author::cases(s, driver, client).await;

    let shutdown = attacks::shutdown_with_open_tabs(s, client).await;
    let (screen, stored) = (p95(to_screen), p95(to_stored));
    eprintln!(
        "figures (10 rounds): pending call -> card on screen p95 {screen:?}; click -> decision stored p95 {stored:?}; audit page with 500 rows, DOMContentLoaded p95 {page:?}; shutdown with three open tabs {shutdown:?}"
    );
    Ok(())
}

/// A package page, sandboxed (an opaque origin): its own CSS and script, files beside it
/// requested without the cookie, load; it cannot read the console's pages or another
/// package's (`connect-src 'none'`), and loading its own files breaks no policy.
async fn package_page(driver: &Driver, client: &Client, base: &str) {
    let _ = console_log(driver, client).await;
    client
        .goto(&format!("{base}/packages/weather/pages/index.html"))
        .await
        .unwrap();
    appears(client, "#hello[data-script='ran']", Duration::from_secs(5)).await;
    appears(client, "#hello[data-reads]", Duration::from_secs(5)).await;
    let hello = client.find(Locator::Css("#hello")).await.unwrap();
    assert_eq!(
        hello.attr("data-origin").await.unwrap().as_deref(),
        Some("null")
    );
    assert_eq!(
        hello.attr("data-reads").await.unwrap().as_deref(),
        Some("refused,refused")
    );
    let color = hello.css_value("color").await.unwrap();
    assert!(color.contains("1, 2, 3"), "the page's own CSS: {color}");
    let log = console_log(driver, client).await;
    let bad: Vec<&Value> = log
        .iter()
        .filter(|e| {
            e["message"].as_str().is_some_and(|m| {
                !(m.contains("Refused to connect")
                    || m.contains("connect-src 'none'")
                    || m.contains("Failed to fetch"))
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "only the refused reads may complain: {bad:#?}"
    );
}
