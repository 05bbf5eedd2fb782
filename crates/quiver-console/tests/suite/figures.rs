//! Figures (ignored: run with `cargo nextest run -p quiver-console --run-ignored only
//! -E 'test(figures)' --no-capture`): audit search over 100,000 records through the
//! console's JSON API, as the server answers it on loopback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_console::{Admin, Console, ConsoleConfig};
use quiver_store::{AuditEntry, AuditKind, SqliteStore, Store, StoreOptions, Synchronous};
use tokio_util::sync::CancellationToken;

use super::harness::TOKEN;

const RECORDS: usize = 100_000;

fn p95(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 95).div_ceil(100) - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures: fills 100,000 audit records"]
async fn figures_audit_search_over_100k_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open_with(
            dir.path().join("state.db"),
            &StoreOptions {
                synchronous: Synchronous::Normal,
                ..StoreOptions::default()
            },
        )
        .unwrap(),
    );
    let filled = Instant::now();
    for i in 0..RECORDS {
        let mut entry = AuditEntry::new(
            if i % 50 == 0 {
                AuditKind::Operator
            } else {
                AuditKind::Call
            },
            format!("ses-{}", i % 1_000),
        );
        entry.tool = Some(format!("pkg{}.tool{}", i % 40, i % 7));
        store.append_audit(&entry).unwrap();
    }
    eprintln!("filled {RECORDS} audit records in {:?}", filled.elapsed());
    let admin = Admin::new(store.clone(), store);
    let console = Arc::new(Console::new(
        admin,
        None,
        ConsoleConfig::new(TOKEN.into(), Duration::from_secs(60)),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(quiver_console::serve(console, listener, shutdown.clone()));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    for (name, query) in [
        ("newest page", "".to_owned()),
        ("by tool", "tool=pkg7.tool3".to_owned()),
        ("by session", "session=ses-421".to_owned()),
        ("by kind", "kind=operator".to_owned()),
        ("paged back", format!("before={}", RECORDS / 2)),
    ] {
        let mut samples = Vec::new();
        for _ in 0..50 {
            let started = Instant::now();
            let response = client
                .get(format!("{base}/audit?{query}"))
                .bearer_auth(TOKEN)
                .header("accept", "application/json")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let rows: Vec<serde_json::Value> = response.json().await.unwrap();
            assert!(!rows.is_empty(), "{name}");
            samples.push(started.elapsed());
        }
        eprintln!(
            "audit search over {RECORDS} records, {name}: p95 {:?}",
            p95(samples)
        );
    }
    shutdown.cancel();
}
