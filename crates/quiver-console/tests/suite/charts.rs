//! `/charts` over a real socket: the figures come from a seeded audit (calls and refusals per
//! package, counted turns' tokens) and a workflow run's attempts, and are drawn as SVG.

use quiver_store::{AuditEntry, AuditKind, AuditStatus, Store};
use serde_json::{Value, json};

use super::harness::{Served, TOKEN, serve};

fn seed(s: &Served) {
    let calls = [
        ("weather.forecast", AuditStatus::Ok),
        ("weather.forecast", AuditStatus::Ok),
        ("weather.forecast", AuditStatus::Refused),
        ("notes.add_note", AuditStatus::Refused),
    ];
    for (tool, status) in calls {
        let mut entry = AuditEntry::new(AuditKind::Call, "ses-charts");
        entry.tool = Some(tool.into());
        entry.status = status;
        s.store.append_audit(&entry).unwrap();
    }
    // A call of last month is outside the default window.
    let mut old = AuditEntry::new(AuditKind::Call, "ses-charts");
    old.tool = Some("group-admin.kick_member".into());
    old.time -= 40 * 24 * 3_600_000;
    s.store.append_audit(&old).unwrap();
    s.runtime
        .record_turn_tokens("ses-charts", 321, Some(4321))
        .unwrap();
    s.runtime
        .record_turn_tokens("ses-charts", 654, None)
        .unwrap();
}

async fn get(s: &Served, path: &str, json: bool) -> (u16, String) {
    let mut request = s
        .client()
        .get(format!("{}{path}", s.base))
        .bearer_auth(TOKEN);
    if json {
        request = request.header("accept", "application/json");
    }
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_draw_the_seeded_figures() {
    let s = serve().await;
    seed(&s);
    // One workflow run: its step's attempt gives a latency.
    let session = s.session(&["notes"]);
    let outcome = s.call(&session, "notes__save", json!({})).join().unwrap();
    assert_eq!(
        outcome.status,
        quiver_runtime::CallStatus::Ok,
        "{outcome:?}"
    );

    let (status, body) = get(&s, "/charts", true).await;
    assert_eq!(status, 200, "{body}");
    let figures: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(figures["window"], "24h");
    assert_eq!(figures["slots"].as_array().unwrap().len(), 24);
    let package = |id: &str| {
        figures["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["package"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let sum = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .sum::<f64>()
    };
    let weather = package("weather");
    assert_eq!(weather["name"], "天气");
    assert_eq!(sum(&weather["calls"]), 3.0, "{figures:#}");
    assert_eq!(sum(&weather["refusals"]), 1.0);
    assert_eq!(sum(&package("notes")["refusals"]), 1.0);
    assert_eq!(
        package("group-admin"),
        Value::Null,
        "last month's call is outside"
    );
    let turns = figures["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(
        (
            turns[0]["prompt_tokens"].as_u64(),
            turns[0]["eager_tokens"].as_u64()
        ),
        (Some(321), Some(4321))
    );
    assert_eq!(turns[1]["eager_tokens"], Value::Null);
    let steps = figures["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|st| st["step"] == "notes.save · save" && st["attempts"] == 1),
        "{figures:#}"
    );

    // The page: SVG figures, Chinese names, no script and no inline style.
    let (status, page) = get(&s, "/charts", false).await;
    assert_eq!(status, 200);
    assert!(page.matches("<svg").count() >= 4, "{page}");
    assert!(
        page.contains("weather · 天气: calls and refusals"),
        "{page}"
    );
    assert!(page.contains("<title>calls · "), "{page}");
    assert!(
        page.contains("<title>prompt (progressive): 321</title>"),
        "{page}"
    );
    assert!(
        page.contains("<title>eager baseline: 4321</title>"),
        "{page}"
    );
    assert!(page.contains("notes.save · save"), "{page}");
    assert!(
        !page.contains("style=") && !page.contains("<script>"),
        "{page}"
    );
    assert!(page.contains("id=\"window-current\">24h<"), "{page}");

    // The window is kept in the URL; a bad one is refused.
    let (_, body) = get(&s, "/charts?window=1h", true).await;
    let hour: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            hour["window"].as_str(),
            hour["slots"].as_array().unwrap().len()
        ),
        (Some("1h"), 12)
    );
    let (_, page) = get(&s, "/charts?window=7d", false).await;
    assert!(
        page.contains("id=\"window-current\">7d<") && page.contains("href=\"/charts?window=30d\""),
        "{page}"
    );
    let (status, _) = get(&s, "/charts?window=1y", false).await;
    assert_eq!(status, 400);
    let (_, body) = get(&s, "/charts?window=30d", true).await;
    let month: Value = serde_json::from_str(&body).unwrap();
    assert!(
        month["packages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["package"] != "group-admin")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_with_nothing_to_show_say_so() {
    let s = serve().await;
    let (status, page) = get(&s, "/charts", false).await;
    assert_eq!(status, 200);
    assert!(
        page.matches("no data in this window").count() >= 3,
        "{page}"
    );
}

/// Figures (ignored, as `figures.rs`): the charts page over a day of 100,000 call records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures: fills 100,000 audit records"]
async fn figures_charts_over_100k_calls() {
    use std::time::{Duration, Instant};
    let s = serve().await;
    let filled = Instant::now();
    let now = quiver_store::AuditEntry::new(AuditKind::Call, "x").time;
    for i in 0..100_000i64 {
        let mut entry = AuditEntry::new(AuditKind::Call, format!("ses-{}", i % 1_000));
        entry.tool = Some(format!("pkg{}.tool{}", i % 40, i % 7));
        entry.time = now - (i * 800) % (23 * 3_600_000);
        if i % 9 == 0 {
            entry.status = AuditStatus::Refused;
        }
        s.store.append_audit(&entry).unwrap();
    }
    eprintln!("filled 100000 call records in {:?}", filled.elapsed());
    for (accept_json, what) in [(true, "JSON"), (false, "HTML")] {
        let mut samples = Vec::new();
        for _ in 0..10 {
            let started = Instant::now();
            let (status, _) = get(&s, "/charts", accept_json).await;
            assert_eq!(status, 200);
            samples.push(started.elapsed());
        }
        samples.sort();
        let p95: Duration = samples[9];
        eprintln!("figures: /charts ({what}) over 100,000 calls in the window: p95 {p95:?}");
    }
}
