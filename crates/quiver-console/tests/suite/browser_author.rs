//! The browser cases of charts and package authoring (run in order by the one browser test
//! of `browser.rs`): the charts' SVG shows, with Chinese labels (a screenshot is kept), and
//! its window stays in the URL; a package made from the template, a lint error shown inline,
//! fixed, installed after its summary, and listed on the packages page.

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use quiver_store::{AuditEntry, AuditKind, AuditStatus, Store};
use serde_json::Value;

use super::authoring::{BROKEN, fixed};
use super::browser::{Driver, appears, artifacts, click, console_log, text_of};
use super::harness::Served;

fn anchor(path: &str) -> String {
    let hex: String = path.bytes().map(|b| format!("{b:02x}")).collect();
    format!("#file-{hex}")
}

async fn fill(client: &Client, css: &str, text: &str) {
    let field = client.find(Locator::Css(css)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

pub(super) async fn cases(s: &Served, driver: &Driver, client: &Client) {
    let base = &s.base;
    let _ = console_log(driver, client).await;

    // Charts: calls and refusals of 天气 (weather), drawn as SVG.
    for status in [AuditStatus::Ok, AuditStatus::Ok, AuditStatus::Refused] {
        let mut entry = AuditEntry::new(AuditKind::Call, "ses-browser-charts");
        entry.tool = Some("weather.forecast".into());
        entry.status = status;
        s.store.append_audit(&entry).unwrap();
    }
    s.runtime
        .record_turn_tokens("ses-browser-charts", 410, Some(3900))
        .unwrap();
    client.goto(&format!("{base}/charts")).await.unwrap();
    appears(client, "svg.chart", Duration::from_secs(5)).await;
    let charts = client.find_all(Locator::Css("svg.chart")).await.unwrap();
    assert!(charts.len() >= 3, "{}", charts.len());
    // The SVG is laid out: its title text has a width, Chinese included.
    let width = client
        .execute(
            "const t = [...document.querySelectorAll('svg.chart text')].find(e => e.textContent.includes('天气')); return t ? t.getBBox().width : -1;",
            vec![],
        )
        .await
        .unwrap();
    assert!(width.as_f64().unwrap() > 20.0, "{width}");
    let bars = client
        .find_all(Locator::Css("svg.chart rect.bar"))
        .await
        .unwrap();
    assert!(!bars.is_empty());
    let shot = artifacts().join("charts-zh.png");
    std::fs::write(&shot, client.screenshot().await.unwrap()).unwrap();
    eprintln!("screenshot: {}", shot.display());
    // The window is kept in the URL, through a reload.
    click(client, "nav.windows a[href='/charts?window=7d']").await;
    appears(client, "#window-current", Duration::from_secs(5)).await;
    client.refresh().await.unwrap();
    assert_eq!(text_of(client, "#window-current").await, "7d");
    assert_eq!(
        client.current_url().await.unwrap().query(),
        Some("window=7d")
    );

    // Authoring: a package from the template.
    client.goto(&format!("{base}/drafts")).await.unwrap();
    fill(client, "#new-draft input[name=id]", "hello-zh").await;
    fill(
        client,
        "#new-draft input[name=description]",
        "你好 greetings",
    )
    .await;
    click(client, "#new-draft button[type=submit]").await;
    appears(client, "#lint-summary", Duration::from_secs(5)).await;
    assert_eq!(
        client.current_url().await.unwrap().path(),
        "/drafts/hello-zh"
    );
    assert!(text_of(client, "#lint-summary").await.contains("0 errors"));

    // A lint error, shown beside its file.
    let tool = anchor("tools/hello/tool.yaml");
    fill(client, &format!("{tool} textarea"), BROKEN).await;
    click(client, &format!("{tool} button[type=submit]")).await;
    appears(
        client,
        &format!("{tool} .lint.error"),
        Duration::from_secs(5),
    )
    .await;
    let lint = text_of(client, &format!("{tool} .lint.error")).await;
    assert!(lint.contains("tools/hello/tool.yaml:"), "{lint}");
    assert!(!text_of(client, "#lint-summary").await.contains(" 0 errors"));

    // Fixed, it lints clean.
    fill(client, &format!("{tool} textarea"), &fixed()).await;
    click(client, &format!("{tool} button[type=submit]")).await;
    let started = Instant::now();
    while !text_of(client, "#lint-summary").await.contains(" 0 errors") {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the fix did not lint clean"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Installed after its summary, listed on the packages page.
    click(client, "#review-install").await;
    appears(client, "#install-summary", Duration::from_secs(5)).await;
    let summary = text_of(client, "#install-summary").await;
    assert!(
        summary.contains("UNSIGNED") && summary.contains("你好 greetings"),
        "{summary}"
    );
    click(client, "#confirm-install").await;
    appears(client, "#install-done", Duration::from_secs(5)).await;
    assert!(
        text_of(client, "#install-done")
            .await
            .starts_with("installed hello-zh 0.1.0")
    );
    client.goto(&format!("{base}/packages")).await.unwrap();
    let table = text_of(client, "#packages").await;
    assert!(
        table.contains("hello-zh") && table.contains("你好 greetings"),
        "{table}"
    );

    // No CSP violation or other console error on these pages.
    for path in [
        "/charts",
        "/charts?window=1h",
        "/drafts",
        "/drafts/hello-zh",
    ] {
        client.goto(&format!("{base}{path}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = console_log(driver, client).await;
    let bad: Vec<&Value> = log
        .iter()
        .filter(|e| {
            e["level"] == "SEVERE"
                || e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Content Security Policy"))
        })
        .collect();
    assert!(bad.is_empty(), "console errors: {bad:#?}");
}
