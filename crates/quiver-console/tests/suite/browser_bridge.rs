//! The package-page bridge and the sessions page in a real browser (after `browser`'s test:
//! one browser at a time). Weather's page, hosted by the console, calls its own `forecast`
//! through the bridge (its package's consent asked first, as for any call) and shows the
//! result; group-admin's hostile page tries another package's item, a message that is not a
//! call, a post to an approval and a form to the control plane, and gets nowhere. The sessions
//! page marks a skill `read_skill` made active and lists the loaded slots least recently used
//! first, through evictions and a touch.

use std::time::Duration;

use fantoccini::{Client, Locator};
use quiver_policy::Principal;
use quiver_runtime::CallStatus;
use quiver_store::{ApprovalStatus, CardQuestion, Decision};
use serde_json::{Value, json};

use super::browser::{Driver, ONE_BROWSER, appears, browser, click, console_log, driver, text_of};
use super::harness::{Served, TOKEN, serve, serve_examples, serve_loading};

async fn sign_in(s: &Served, client: &Client) {
    client
        .goto(&quiver_console::login_url(s.addr, TOKEN))
        .await
        .unwrap();
    click(client, "#sign-in").await;
    appears(client, "#emergency-stop", Duration::from_secs(5)).await;
}

/// Runs `cases` on a fresh browser signed in to `s`, when there is a browser.
async fn in_browser<F>(s: &Served, cases: F)
where
    F: AsyncFnOnce(&Driver, &Client),
{
    let _one = ONE_BROWSER.lock().await;
    let Some(driver) = driver().await else {
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    sign_in(s, &client).await;
    cases(&driver, &client).await;
    let _ = client.close().await;
}

/// The status a slot of the framed page shows, once it shows one.
async fn status_of(client: &Client, slot: &str) -> String {
    let css = format!("#{slot}[data-status]");
    appears(client, &css, Duration::from_secs(10)).await;
    client
        .find(Locator::Css(&css))
        .await
        .unwrap()
        .attr("data-status")
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_page_calls_its_own_tool_through_the_bridge_and_nothing_else() {
    let s = serve().await;
    in_browser(&s, async |driver, client| {
        let _ = console_log(driver, client).await;
        // From the package's page in the console, to its own page hosted with the bridge.
        client
            .goto(&format!("{}/packages/weather", s.base))
            .await
            .unwrap();
        click(client, "#package-page").await;
        appears(client, "#package-frame", Duration::from_secs(5)).await;
        assert_eq!(
            client.current_url().await.unwrap().path(),
            "/packages/weather/app"
        );
        // The page's call asks its package's consent first, as any first use does.
        let card = s.pending(1).await.remove(0);
        assert_eq!(card.card.question, CardQuestion::Consent);
        assert_eq!(card.card.package, "weather");
        s.admin
            .answer_approval(&card.card.id, Decision::Approve, "test", None)
            .unwrap();
        client.enter_frame(0).await.unwrap();
        assert_eq!(status_of(client, "forecast").await, "ok");
        let shown: Value = serde_json::from_str(&text_of(client, "#forecast").await).unwrap();
        assert_eq!(
            shown,
            json!({"ran": "weather.forecast", "args": {"city": "北京"}})
        );
        // Still an opaque origin that can read nothing itself.
        appears(client, "#hello[data-reads]", Duration::from_secs(5)).await;
        let hello = client.find(Locator::Css("#hello")).await.unwrap();
        assert_eq!(
            hello.attr("data-reads").await.unwrap().as_deref(),
            Some("refused,refused")
        );
        client.enter_parent_frame().await.unwrap();
        assert!(
            text_of(client, "#bridge-status")
                .await
                .contains("forecast: ok")
        );
        assert_eq!(s.calls.lock().unwrap().len(), 1);

        // A hostile page (group-admin's) while a card waits: another package's item, an item
        // its package lacks, a message that is not a call, a post to an approval, a form to
        // the control plane. None gets anywhere.
        let session = s.session(&["notes"]);
        let waiting = s.call(&session, "notes__add_note", json!({"text": "keep"}));
        let pending = s.pending(1).await.remove(0);
        client
            .goto(&format!("{}/packages/group-admin/app", s.base))
            .await
            .unwrap();
        appears(client, "#package-frame", Duration::from_secs(5)).await;
        client.enter_frame(0).await.unwrap();
        for slot in ["other", "unknown", "approve", "read"] {
            assert_eq!(status_of(client, slot).await, "refused", "{slot}");
        }
        assert!(text_of(client, "#other").await.contains("local name"));
        assert!(
            text_of(client, "#unknown")
                .await
                .contains("no item `forecast`")
        );
        assert!(text_of(client, "#approve").await.contains("only calls"));
        assert_eq!(status_of(client, "form").await, "tried");
        client.enter_parent_frame().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The form went nowhere: the frame still shows the page that tried it (the sandbox
        // has no `allow-forms`), and the control plane below is untouched.
        client.enter_frame(0).await.unwrap();
        assert_eq!(status_of(client, "form").await, "tried");
        client.enter_parent_frame().await.unwrap();
        assert_eq!(
            s.admin.approval(&pending.card.id).unwrap().unwrap().status,
            ApprovalStatus::Pending
        );
        assert!(!s.admin.switches().unwrap().control.emergency_stop);
        assert_eq!(s.calls.lock().unwrap().len(), 1);
        assert_eq!(s.admin.pending_approvals(None).unwrap().len(), 1);
        // The console's page still works: the card is the person's to answer.
        s.admin
            .answer_approval(&pending.card.id, Decision::Deny, "test", None)
            .unwrap();
        let outcome = tokio::task::spawn_blocking(move || waiting.join().unwrap())
            .await
            .unwrap();
        assert_eq!(outcome.status, CallStatus::Refused);

        // Under the emergency stop the page's call reaches the pipeline, which refuses it: the
        // page gets the refusal and its reason.
        s.admin
            .set_control(
                quiver_policy::ControlPlane {
                    emergency_stop: true,
                    ..Default::default()
                },
                "test",
            )
            .unwrap();
        client
            .goto(&format!("{}/packages/weather/app", s.base))
            .await
            .unwrap();
        appears(client, "#package-frame", Duration::from_secs(5)).await;
        client.enter_frame(0).await.unwrap();
        assert_eq!(status_of(client, "forecast").await, "refused");
        let why = text_of(client, "#forecast").await;
        assert!(why.contains("the operator stopped all tools"), "{why}");
        client.enter_parent_frame().await.unwrap();
        assert_eq!(s.calls.lock().unwrap().len(), 1);

        // The console's own page never complained of framing its package's page (the frames'
        // own refusals are not in this log).
        let log = console_log(driver, client).await;
        let framing: Vec<&Value> = log
            .iter()
            .filter(|e| {
                e["message"].as_str().is_some_and(|m| {
                    m.contains("frame-ancestors")
                        || m.contains("frame-src")
                        || m.contains("Refused to frame")
                        || m.contains("bridge.js")
                })
            })
            .collect();
        assert!(framing.is_empty(), "{framing:#?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_page_marks_active_skills_and_lists_loaded_tools_lru_first() {
    let s = serve_loading(2).await;
    let session = s.session(&[]);
    let runtime = s.runtime.clone();
    let id = session.clone();
    // read_skill, then three loads into two slots (the first evicted), then a touch.
    let steps = tokio::task::spawn_blocking(move || {
        let owner = Principal::user("owner", quiver_package::rules::Role::Master);
        let mut turn = runtime.begin_turn(&id, owner, "").unwrap();
        let mut call = |name: &str, arguments: Value| {
            let out = turn.call(name, arguments).unwrap();
            assert_eq!(out.status, CallStatus::Ok, "{name}: {out:?}");
        };
        call("read_skill", json!({"id": "weather"}));
        call("load_tool", json!({"name": "notes__add_note"}));
        call("load_tool", json!({"name": "group-admin__kick_member"}));
    });
    steps.await.unwrap();
    let held = s.admin.session(&session).unwrap().unwrap();
    assert_eq!(held.active_skills, ["weather"]);
    assert_eq!(held.loaded_tools, ["notes", "group-admin"]);

    in_browser(&s, async |_driver, client| {
        let section = format!("[id='session-{session}']");
        let loaded = async |client: &Client| -> Vec<String> {
            let mut names = Vec::new();
            for slot in client
                .find_all(Locator::Css(&format!("{section} .loaded-tool")))
                .await
                .unwrap()
            {
                names.push(slot.text().await.unwrap());
            }
            names
        };
        client.goto(&format!("{}/sessions", s.base)).await.unwrap();
        appears(client, &section, Duration::from_secs(5)).await;
        assert_eq!(
            text_of(client, &format!("{section} strong.active-skill")).await,
            "weather"
        );
        assert_eq!(
            text_of(client, &format!("{section} .opened-package")).await,
            "weather"
        );
        // Least recently used first: weather, loaded by read_skill, was evicted.
        assert_eq!(loaded(client).await, ["notes", "group-admin"]);

        // Weather loaded again evicts notes; notes loaded again then evicts group-admin,
        // the least recently used.
        let (runtime, id) = (s.runtime.clone(), session.clone());
        tokio::task::spawn_blocking(move || {
            let owner = Principal::user("owner", quiver_package::rules::Role::Master);
            let mut turn = runtime.begin_turn(&id, owner, "").unwrap();
            for name in ["weather__forecast", "notes__add_note"] {
                let out = turn.call("load_tool", json!({"name": name})).unwrap();
                assert_eq!(out.status, CallStatus::Ok, "{out:?}");
            }
        })
        .await
        .unwrap();
        client.refresh().await.unwrap();
        appears(client, &section, Duration::from_secs(5)).await;
        assert_eq!(loaded(client).await, ["weather", "notes"]);
        // The skill stays active after its package's slot was evicted and loaded again.
        assert_eq!(
            text_of(client, &format!("{section} strong.active-skill")).await,
            "weather"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_weather_examples_page_asks_its_forecast_through_the_bridge() {
    let s = serve_examples().await;
    in_browser(&s, async |_driver, client| {
        client
            .goto(&format!("{}/packages/weather/app", s.base))
            .await
            .unwrap();
        appears(client, "#package-frame", Duration::from_secs(5)).await;
        client.enter_frame(0).await.unwrap();
        appears(client, "#ask", Duration::from_secs(5)).await;
        click(client, "#ask").await;
        // Its package's consent is asked first; the answer lets the call run.
        let card = s.pending(1).await.remove(0);
        assert_eq!(card.card.question, CardQuestion::Consent);
        assert_eq!(card.card.package, "weather");
        s.admin
            .answer_approval(&card.card.id, Decision::Approve, "test", None)
            .unwrap();
        // The answer shows, as the page shows it.
        appears(client, "#out[class]", Duration::from_secs(10)).await;
        let class = client
            .find(Locator::Css("#out"))
            .await
            .unwrap()
            .attr("class")
            .await
            .unwrap();
        let out = text_of(client, "#out").await;
        assert_eq!(class.as_deref(), Some("ok"), "{out}");
        let shown: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(shown["city"], "北京", "{out}");
        assert_eq!(shown["condition"], "晴 sunny");
        assert_eq!(s.calls.lock().unwrap().len(), 1);
    })
    .await;
}
