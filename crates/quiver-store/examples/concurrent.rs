//! The store under the call pipeline's load: N concurrent sessions (one thread each) making M
//! calls against one SQLite file. Per call, the store work of the pipeline: read the session,
//! check the package consent, load the tool (LRU), append the audit record.
//!
//! ```text
//! cargo run --release -p quiver-store --example concurrent -- --sessions 1000 --calls 100
//!     [--sync full|normal] [--readers 4] [--tools 20] [--db PATH | --db postgres://URL]
//! ```
//!
//! With a PostgreSQL URL the sessions go into a new schema `bench_<pid>` of that database,
//! left there afterwards (drop it with `DROP SCHEMA bench_<pid> CASCADE`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use quiver_store::{
    AuditDecision, AuditEntry, AuditKind, AuditQuery, AuditStatus, AuditStep, DEFAULT_LOADED_TOOLS,
    NewSession, PostgresOptions, PostgresStore, SqliteStore, Store, StoreError, StoreOptions,
    Synchronous, argument_digest, is_postgres_url,
};

struct Args {
    sessions: usize,
    calls: usize,
    tools: usize,
    readers: usize,
    sync: Synchronous,
    db: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sessions: 1000,
        calls: 100,
        tools: 20,
        readers: StoreOptions::default().readers,
        sync: Synchronous::Full,
        db: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |text: String| text.parse::<usize>().map_err(|e| format!("{text}: {e}"));
        match flag.as_str() {
            "--sessions" => args.sessions = number(value()?)?,
            "--calls" => args.calls = number(value()?)?,
            "--tools" => args.tools = number(value()?)?.max(1),
            "--readers" => args.readers = number(value()?)?,
            "--db" => args.db = Some(PathBuf::from(value()?)),
            "--sync" => {
                args.sync = match value()?.as_str() {
                    "full" => Synchronous::Full,
                    "normal" => Synchronous::Normal,
                    other => return Err(format!("--sync full|normal, not {other}")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// One call's store work, as the pipeline does it.
fn call(store: &dyn Store, session: &str, tool: &str, n: usize) -> Result<(), StoreError> {
    let found = store
        .session(session)?
        .ok_or_else(|| StoreError::NotFound {
            what: "session",
            id: session.to_owned(),
        })?;
    let consent = store.consent(session, "bench")?;
    let granted = consent.is_some_and(|c| c.granted);
    store.load_tool(session, tool, DEFAULT_LOADED_TOOLS)?;
    let args = json!({"city": "北京", "day": n, "token": "secret"});
    let mut entry = AuditEntry::new(AuditKind::Call, session);
    entry.call_id = Some(format!("{session}-{n}"));
    entry.principal = found.principal;
    entry.origin = found.origin;
    entry.tool = Some(tool.to_owned());
    entry.argument_digest = Some(argument_digest(&args, &["token"]));
    entry.decisions = vec![
        AuditDecision {
            step: AuditStep::Scopes,
            decision: "allow".into(),
            reason: "the scope `group` is one of [`group`]".into(),
        },
        AuditDecision {
            step: AuditStep::Consent,
            decision: if granted { "allow" } else { "refuse" }.into(),
            reason: "package consent".into(),
        },
    ];
    entry.status = AuditStatus::Ok;
    entry.duration_ms = 1;
    store.append_audit(&entry)?;
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let tmp = match tempfile::tempdir() {
        Ok(tmp) => tmp,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| tmp.path().join("bench.db"));
    let options = StoreOptions {
        readers: args.readers,
        synchronous: args.sync,
        ..StoreOptions::default()
    };
    let url = db.to_string_lossy().into_owned();
    let opened: Result<Arc<dyn Store>, StoreError> = if is_postgres_url(&url) {
        let schema = format!("bench_{}", std::process::id());
        eprintln!("PostgreSQL, schema {schema}");
        let options = PostgresOptions {
            schema: Some(schema),
            ..PostgresOptions::default()
        };
        PostgresStore::open_with(&url, &options).map(|s| Arc::new(s) as Arc<dyn Store>)
    } else {
        SqliteStore::open_with(&db, &options).map(|s| Arc::new(s) as Arc<dyn Store>)
    };
    let store: Arc<dyn Store> = match opened {
        Ok(store) => store,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };

    let errors = Arc::new(AtomicUsize::new(0));
    let start_line = Arc::new(Barrier::new(args.sessions + 1));
    let setup = Instant::now();
    let mut handles = Vec::with_capacity(args.sessions);
    for s in 0..args.sessions {
        let store = Arc::clone(&store);
        let errors = Arc::clone(&errors);
        let start_line = Arc::clone(&start_line);
        let (calls, tools) = (args.calls, args.tools);
        let spawned = thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let session = format!("bench-{s:05}");
                let mut new = NewSession::new(&session, "chat");
                new.origin = json!({"platform": "qq", "scope": "group", "channel": s});
                new.principal = json!({"user": format!("u{s}"), "role": "user"});
                let ready = store
                    .create_session(&new)
                    .and_then(|_| store.set_consent(&session, "bench", true, "u"));
                if let Err(error) = ready {
                    errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("{session} setup: {error}");
                }
                start_line.wait();
                let mut latencies = Vec::with_capacity(calls);
                for n in 0..calls {
                    let tool = format!("bench.tool{:02}", (n * 7 + s) % tools);
                    let t0 = Instant::now();
                    if let Err(error) = call(store.as_ref(), &session, &tool, n)
                        && errors.fetch_add(1, Ordering::Relaxed) < 10
                    {
                        eprintln!("{session} call {n}: {error}");
                    }
                    latencies.push(t0.elapsed());
                }
                latencies
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(error) => {
                eprintln!("error: cannot spawn thread {s}: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    start_line.wait();
    let setup_time = setup.elapsed();
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(args.sessions * args.calls);
    for handle in handles {
        match handle.join() {
            Ok(mut own) => latencies.append(&mut own),
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let wall = started.elapsed();
    latencies.sort_unstable();

    let stored: Result<i64, String> = if is_postgres_url(&url) {
        store
            .query_audit(&AuditQuery::default())
            .map(|records| i64::try_from(records.len()).unwrap_or(i64::MAX))
            .map_err(|e| e.to_string())
    } else {
        rusqlite::Connection::open(&db)
            .and_then(|conn| {
                conn.query_row("SELECT count(*) FROM audit", [], |row| row.get::<_, i64>(0))
            })
            .map_err(|e| e.to_string())
    };
    let calls = latencies.len();
    let errors = errors.load(Ordering::Relaxed);
    let per_second = calls as f64 / wall.as_secs_f64();
    println!("sessions          {}", args.sessions);
    println!("calls per session {}", args.calls);
    println!(
        "sync              {}",
        match args.sync {
            Synchronous::Full => "FULL (every write durable before it returns)",
            Synchronous::Normal => "NORMAL",
        }
    );
    println!("setup             {setup_time:.2?} (create session + consent, concurrent)");
    println!("calls             {calls} in {wall:.2?}");
    println!("calls per second  {per_second:.0}");
    println!(
        "store ops/s       {:.0} (2 reads + 2 durable writes per call)",
        per_second * 4.0
    );
    println!("latency p50       {:.2?}", percentile(&latencies, 0.50));
    println!("latency p99       {:.2?}", percentile(&latencies, 0.99));
    println!("latency max       {:.2?}", percentile(&latencies, 1.0));
    match &stored {
        Ok(count) => println!("audit records     {count}"),
        Err(error) => println!("audit records     unreadable: {error}"),
    }
    println!("errors            {errors}");
    if errors == 0 && stored.ok() == i64::try_from(calls).ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
