//! Every table of the store, case by case: sessions, the per-session sets, consents, `once`
//! approvals, kept outputs, the perception cache, the approval queue and the audit log.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use quiver_store::{
    ApprovalCard, ApprovalStatus, AuditDecision, AuditEntry, AuditKind, AuditQuery, AuditStatus,
    AuditStep, Decision, NewSession, SessionFilter, SessionStatus, Store, StoreError,
    argument_digest,
};

use crate::backend::Fixture;

pub fn session(store: &dyn Store, id: &str) {
    store.create_session(&NewSession::new(id, "chat")).unwrap();
}

pub fn the_store_is_object_safe_and_shareable(f: &Fixture) {
    let shared: Arc<dyn Store> = f.shared();
    let other = Arc::clone(&shared);
    thread::spawn(move || session(other.as_ref(), "s1"))
        .join()
        .unwrap();
    assert!(shared.session("s1").unwrap().is_some());
}

pub fn sessions(f: &Fixture) {
    let store = f.store();
    let new = NewSession {
        id: "s1".into(),
        parent: None,
        origin: json!({"platform": "qq", "scope": "group", "channel": "123"}),
        agent: "chat".into(),
        principal: json!({"user": "u1", "role": "user", "platform_roles": ["admin"]}),
        catalog_version: "7".into(),
        prompt_versions: json!({"persona": 3}),
        state: json!({"turn": 0}),
    };
    let created = store.create_session(&new).unwrap();
    assert_eq!(store.session("s1").unwrap().as_ref(), Some(&created));
    assert_eq!(created.origin, new.origin);
    assert!(created.is_active());
    assert!(created.created_at > 0 && created.created_at == created.updated_at);

    let mut child = NewSession::new("s1.child", "helper");
    child.parent = Some("s1".into());
    assert_eq!(
        store.create_session(&child).unwrap().parent.as_deref(),
        Some("s1")
    );
    session(store, "s3");

    store.set_session_state("s1", &json!({"turn": 1})).unwrap();
    assert_eq!(
        store.session("s1").unwrap().unwrap().state,
        json!({"turn": 1})
    );
    store.touch_session("s3").unwrap();
    assert!(store.end_session("s3").unwrap());
    assert!(
        !store.end_session("s3").unwrap(),
        "ending twice reports false"
    );
    let ended = store.session("s3").unwrap().unwrap();
    assert!(ended.ended_at.is_some() && !ended.is_active());

    let ids = |filter: SessionFilter| -> Vec<String> {
        let mut ids: Vec<String> = store
            .list_sessions(&filter)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        ids.sort();
        ids
    };
    let cases: [(SessionFilter, &[&str]); 5] = [
        (SessionFilter::default(), &["s1", "s1.child", "s3"]),
        (
            SessionFilter {
                status: SessionStatus::Active,
                ..SessionFilter::default()
            },
            &["s1", "s1.child"],
        ),
        (
            SessionFilter {
                status: SessionStatus::Ended,
                ..SessionFilter::default()
            },
            &["s3"],
        ),
        (
            SessionFilter {
                agent: Some("helper".into()),
                ..SessionFilter::default()
            },
            &["s1.child"],
        ),
        (
            SessionFilter {
                limit: Some(0),
                ..SessionFilter::default()
            },
            &[],
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(ids(filter.clone()), want, "{filter:?}");
    }
    let limited = store
        .list_sessions(&SessionFilter {
            limit: Some(2),
            ..SessionFilter::default()
        })
        .unwrap();
    assert_eq!(limited.len(), 2);
    assert!(
        limited[0].updated_at >= limited[1].updated_at,
        "newest first"
    );

    assert!(store.session("nope").unwrap().is_none());
}

pub fn idle_sessions_of_one_agent_are_purged_with_what_they_hold(f: &Fixture) {
    let store = f.store();
    let mcp = |id: &str| store.create_session(&NewSession::new(id, "mcp")).unwrap();
    mcp("old");
    mcp("old2");
    session(store, "chat-old");
    store.load_tool("old", "weather.forecast", 12).unwrap();
    store.open_package("old", "weather").unwrap();
    store.activate_skill("old", "weather").unwrap();
    thread::sleep(Duration::from_millis(20));
    let cutoff = store.session("old").unwrap().unwrap().updated_at + 10;
    thread::sleep(Duration::from_millis(20));
    mcp("new");
    store.touch_session("old2").unwrap();
    // (agent, before, limit) -> deleted, then which sessions remain
    let purged = store.purge_idle_sessions("mcp", cutoff, 10).unwrap();
    assert_eq!(purged.sessions, 1);
    // The skill still active in it is handed back, for its `skill_ended` record.
    assert_eq!(
        purged.ended_skills,
        [quiver_store::EndedSkill {
            session: "old".into(),
            skill: "weather".into()
        }]
    );
    let left: Vec<String> = store
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(!left.contains(&"old".to_owned()), "{left:?}");
    // What it held went with it: a new session of that id starts empty.
    mcp("old");
    assert!(store.loaded_tools("old").unwrap().is_empty());
    assert!(store.opened_packages("old").unwrap().is_empty());
    // Another agent's sessions and the limit are respected.
    assert_eq!(
        store
            .purge_idle_sessions("mcp", i64::MAX, 1)
            .unwrap()
            .sessions,
        1
    );
    assert_eq!(
        store
            .purge_idle_sessions("mcp", i64::MAX, 10)
            .unwrap()
            .sessions,
        2
    );
    assert!(store.session("chat-old").unwrap().is_some());
}

pub fn session_errors(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    let mut orphan = NewSession::new("s2", "chat");
    orphan.parent = Some("missing".into());
    let cases: Vec<(&str, Result<(), StoreError>, &str)> = vec![
        (
            "duplicate id",
            store
                .create_session(&NewSession::new("s1", "chat"))
                .map(drop),
            "session s1 already exists",
        ),
        (
            "empty id",
            store.create_session(&NewSession::new("", "chat")).map(drop),
            "invalid argument",
        ),
        (
            "missing parent",
            store.create_session(&orphan).map(drop),
            "no such session: missing",
        ),
        (
            "touch unknown",
            store.touch_session("x"),
            "no such session: x",
        ),
        (
            "end unknown",
            store.end_session("x").map(drop),
            "no such session: x",
        ),
        (
            "state of unknown",
            store.set_session_state("x", &json!({})),
            "no such session: x",
        ),
        (
            "load into unknown",
            store.load_tool("x", "t", 12).map(drop),
            "no such session: x",
        ),
        (
            "consent in unknown",
            store.set_consent("x", "p", true, "u").map(drop),
            "no such session: x",
        ),
        (
            "skill in unknown",
            store.activate_skill("x", "k").map(drop),
            "no such session: x",
        ),
    ];
    for (name, result, want) in cases {
        let error = result.expect_err(name);
        assert!(error.to_string().contains(want), "{name}: {error}");
    }
    assert!(store.session("s2").unwrap().is_none(), "nothing half-made");
    // Reads of an unknown session are empty, not errors.
    assert!(store.loaded_tools("x").unwrap().is_empty());
    assert!(store.consent("x", "p").unwrap().is_none());
}

enum Op {
    Load(&'static str, &'static [&'static str]),
    Touch(&'static str, bool),
    Unload(&'static str, bool),
}

pub fn loaded_tools_are_an_lru_set(f: &Fixture) {
    use Op::{Load, Touch, Unload};
    let cases: [(&str, usize, Vec<Op>, &[&str]); 6] = [
        (
            "fills without evicting",
            3,
            vec![Load("a", &[]), Load("b", &[]), Load("c", &[])],
            &["c", "b", "a"],
        ),
        (
            "evicts the least recently loaded",
            3,
            vec![
                Load("a", &[]),
                Load("b", &[]),
                Load("c", &[]),
                Load("d", &["a"]),
                Load("e", &["b"]),
            ],
            &["e", "d", "c"],
        ),
        (
            "reloading refreshes instead of duplicating",
            3,
            vec![
                Load("a", &[]),
                Load("b", &[]),
                Load("c", &[]),
                Load("a", &[]),
                Load("d", &["b"]),
            ],
            &["d", "a", "c"],
        ),
        (
            "touch refreshes, unload frees a slot",
            3,
            vec![
                Load("a", &[]),
                Load("b", &[]),
                Load("c", &[]),
                Touch("a", true),
                Touch("zz", false),
                Unload("b", true),
                Unload("b", false),
                Load("d", &[]),
                Load("e", &["c"]),
            ],
            &["e", "d", "a"],
        ),
        (
            "capacity one",
            1,
            vec![Load("a", &[]), Load("b", &["a"]), Load("b", &[])],
            &["b"],
        ),
        (
            "twelve by default, the thirteenth evicts the first",
            quiver_store::DEFAULT_LOADED_TOOLS,
            vec![
                Load("t01", &[]),
                Load("t02", &[]),
                Load("t03", &[]),
                Load("t04", &[]),
                Load("t05", &[]),
                Load("t06", &[]),
                Load("t07", &[]),
                Load("t08", &[]),
                Load("t09", &[]),
                Load("t10", &[]),
                Load("t11", &[]),
                Load("t12", &[]),
                Load("t13", &["t01"]),
            ],
            &[
                "t13", "t12", "t11", "t10", "t09", "t08", "t07", "t06", "t05", "t04", "t03", "t02",
            ],
        ),
    ];
    let store = f.store();
    for (i, (name, capacity, ops, want)) in cases.into_iter().enumerate() {
        let id = format!("s{i}");
        session(store, &id);
        for op in ops {
            match op {
                Load(tool, evicted) => {
                    assert_eq!(
                        store.load_tool(&id, tool, capacity).unwrap(),
                        evicted,
                        "{name}"
                    )
                }
                Touch(tool, found) => {
                    assert_eq!(store.touch_tool(&id, tool).unwrap(), found, "{name}")
                }
                Unload(tool, found) => {
                    assert_eq!(store.unload_tool(&id, tool).unwrap(), found, "{name}")
                }
            }
        }
        assert_eq!(store.loaded_tools(&id).unwrap(), want, "{name}");
    }
}

pub fn a_shrunk_capacity_evicts_down_to_it_and_sessions_never_share(f: &Fixture) {
    let store = f.store();
    session(store, "parent");
    session(store, "child");
    for tool in ["a", "b", "c", "d", "e"] {
        store.load_tool("parent", tool, 12).unwrap();
    }
    assert_eq!(
        store.load_tool("parent", "f", 3).unwrap(),
        ["a", "b", "c"],
        "least recently used first"
    );
    store.load_tool("child", "x", 12).unwrap();
    assert_eq!(store.loaded_tools("parent").unwrap(), ["f", "e", "d"]);
    assert_eq!(store.loaded_tools("child").unwrap(), ["x"]);
    assert!(matches!(
        store.load_tool("parent", "g", 0),
        Err(StoreError::Invalid(_))
    ));
}

pub fn opened_packages_and_active_skills(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    let cases = [
        (store.open_package("s1", "weather").unwrap(), true),
        (store.open_package("s1", "weather").unwrap(), false),
        (store.open_package("s1", "calendar").unwrap(), true),
        (store.close_package("s1", "calendar").unwrap(), true),
        (store.close_package("s1", "calendar").unwrap(), false),
        (store.open_package("s1", "mail").unwrap(), true),
        (store.activate_skill("s1", "weather").unwrap(), true),
        (store.activate_skill("s1", "weather").unwrap(), false),
        (store.activate_skill("s1", "mail/compose").unwrap(), true),
        (store.activate_skill("s1", "notes").unwrap(), true),
        (store.end_skill("s1", "notes").unwrap(), true),
        (store.end_skill("s1", "notes").unwrap(), false),
        (store.activate_skill("s2", "weather").unwrap(), true),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        assert_eq!(got, want, "case {i}");
    }
    assert_eq!(store.opened_packages("s1").unwrap(), ["weather", "mail"]);
    assert_eq!(
        store.active_skills("s1").unwrap(),
        ["weather", "mail/compose"]
    );
    assert_eq!(
        store.end_all_skills("s1").unwrap(),
        ["weather", "mail/compose"],
        "/reset reports what it ended"
    );
    assert!(store.active_skills("s1").unwrap().is_empty());
    assert!(store.end_all_skills("s1").unwrap().is_empty());
    assert_eq!(store.active_skills("s2").unwrap(), ["weather"]);
    assert!(
        store.activate_skill("s1", "weather").unwrap(),
        "readable again"
    );
}

pub fn every_presence_change_moves_the_stamp_and_nothing_else_does(f: &Fixture) {
    let store = f.store();
    assert_eq!(store.presence_stamp("nope").unwrap(), None);
    session(store, "s1");
    session(store, "s2");
    let stamp = |s: &str| store.presence_stamp(s).unwrap().unwrap();
    type Change = fn(&dyn Store);
    // (what, a write, whether it changes s1's presence)
    let cases: [(&str, Change, bool); 14] = [
        ("load", |s| drop(s.load_tool("s1", "a.t", 2)), true),
        (
            "load again (lru order)",
            |s| drop(s.load_tool("s1", "b.t", 2)),
            true,
        ),
        (
            "load the most recently used again (nothing changes)",
            |s| drop(s.load_tool("s1", "b.t", 2)),
            false,
        ),
        ("touch", |s| drop(s.touch_tool("s1", "a.t")), true),
        ("evict", |s| drop(s.load_tool("s1", "c.t", 2)), true),
        ("unload", |s| drop(s.unload_tool("s1", "c.t")), true),
        ("open", |s| drop(s.open_package("s1", "p")), true),
        ("close", |s| drop(s.close_package("s1", "p")), true),
        ("activate", |s| drop(s.activate_skill("s1", "p/k")), true),
        ("end", |s| drop(s.end_skill("s1", "p/k")), true),
        (
            "end all",
            |s| {
                s.activate_skill("s1", "p/k").unwrap();
                s.end_all_skills("s1").unwrap();
            },
            true,
        ),
        (
            "another session",
            |s| drop(s.load_tool("s2", "a.t", 2)),
            false,
        ),
        (
            "consent",
            |s| drop(s.set_consent("s1", "p", true, "u")),
            false,
        ),
        (
            "state",
            |s| s.set_session_state("s1", &json!({"x": 1})).unwrap(),
            false,
        ),
    ];
    for (what, change, moves) in cases {
        let before = stamp("s1");
        change(store);
        assert_eq!(stamp("s1") != before, moves, "{what}");
    }
}

pub fn consents(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    // (session, package, granted, by): each answer replaces the earlier one.
    let answers = [
        ("s1", "weather", true, "u1"),
        ("s1", "mail", false, "u1"),
        ("s2", "weather", false, "u2"),
        ("s1", "mail", true, "owner"),
    ];
    for (s, package, granted, by) in answers {
        let consent = store.set_consent(s, package, granted, by).unwrap();
        assert_eq!(
            (consent.granted, consent.by.as_str()),
            (granted, by),
            "{s} {package}"
        );
    }
    let cases = [
        ("s1", "weather", Some((true, "u1"))),
        ("s1", "mail", Some((true, "owner"))),
        ("s2", "weather", Some((false, "u2"))),
        ("s2", "mail", None),
        ("s3", "weather", None),
    ];
    for (s, package, want) in cases {
        let got = store.consent(s, package).unwrap();
        assert_eq!(
            got.as_ref().map(|c| (c.granted, c.by.as_str())),
            want,
            "{s} {package}"
        );
        if let Some(consent) = got {
            assert!(consent.at > 0);
        }
    }
    let listed: Vec<String> = store
        .consents("s1")
        .unwrap()
        .into_iter()
        .map(|c| c.package)
        .collect();
    assert_eq!(listed, ["mail", "weather"]);
}

pub fn once_approvals_are_keyed_on_session_and_tool(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    let first = store.grant_once("s1", "mail.send", "u1").unwrap();
    let again = store.grant_once("s1", "mail.send", "u2").unwrap();
    assert_eq!(first, again, "the first approval is kept");
    let cases = [
        ("s1", "mail.send", true),
        ("s1", "mail.delete", false),
        ("s2", "mail.send", false),
    ];
    for (s, tool, want) in cases {
        assert_eq!(
            store.once_approval(s, tool).unwrap().is_some(),
            want,
            "{s} {tool}"
        );
    }
}

pub fn once_approvals_of_a_session_are_listed_together(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    store.grant_once("s1", "b.t", "alice").unwrap();
    store.grant_once("s1", "a.t", "alice").unwrap();
    store.grant_once("s2", "c.t", "bob").unwrap();
    let tools: Vec<String> = store
        .once_approvals("s1")
        .unwrap()
        .into_iter()
        .map(|a| a.tool)
        .collect();
    assert_eq!(tools, ["a.t", "b.t"]);
    assert!(store.once_approvals("nope").unwrap().is_empty());
}

pub fn kept_outputs_are_per_session_and_bounded(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    let total = quiver_store::KEPT_OUTPUTS + 3;
    for i in 0..total {
        store
            .keep_output("s1", &format!("c{i}"), &format!("text {i}"))
            .unwrap();
    }
    // The oldest are dropped first; the latest stay.
    assert_eq!(store.kept_output("s1", "c0").unwrap(), None);
    assert_eq!(store.kept_output("s1", "c2").unwrap(), None);
    assert_eq!(
        store.kept_output("s1", "c3").unwrap().as_deref(),
        Some("text 3")
    );
    let last = format!("c{}", total - 1);
    assert_eq!(
        store.kept_output("s1", &last).unwrap(),
        Some(format!("text {}", total - 1))
    );
    // Another session never reads them; keeping again replaces the text.
    assert_eq!(store.kept_output("s2", &last).unwrap(), None);
    store.keep_output("s1", &last, "again").unwrap();
    assert_eq!(
        store.kept_output("s1", &last).unwrap().as_deref(),
        Some("again")
    );
    assert!(matches!(
        store.keep_output("missing", "c1", "x"),
        Err(StoreError::NotFound { .. })
    ));
}

/// A perception cache key as the runtime makes it: the digest of everything the result
/// depends on.
pub fn cache_key(tool: &str, principal: &str, origin: &str) -> String {
    argument_digest(
        &json!([tool, {"city": "北京"}, {"user": principal}, {"platform": origin}]),
        &[],
    )
}

pub fn the_perception_cache_answers_fresh_results_under_their_own_key_only(f: &Fixture) {
    let store = f.store();
    let key = cache_key("weather.forecast", "u1", "cli");
    store
        .cache_result(&key, &json!({"temp": 21}), 1_000, 61_000)
        .unwrap();
    let cases = [
        ("hit", key.clone(), 1_000, Some(json!({"temp": 21}))),
        (
            "hit just before expiry",
            key.clone(),
            60_999,
            Some(json!({"temp": 21})),
        ),
        ("expired at its expiry", key.clone(), 61_000, None),
        ("expired", key.clone(), 90_000, None),
        (
            "another principal",
            cache_key("weather.forecast", "u2", "cli"),
            1_000,
            None,
        ),
        (
            "another origin",
            cache_key("weather.forecast", "u1", "qq"),
            1_000,
            None,
        ),
        (
            "another tool",
            cache_key("weather.other", "u1", "cli"),
            1_000,
            None,
        ),
    ];
    for (name, key, now, want) in cases {
        assert_eq!(store.cached_result(&key, now).unwrap(), want, "{name}");
    }
    // Caching again replaces the result and its expiry.
    store
        .cache_result(&key, &json!({"temp": 22}), 2_000, 100_000)
        .unwrap();
    assert_eq!(
        store.cached_result(&key, 90_000).unwrap(),
        Some(json!({"temp": 22}))
    );
    assert!(matches!(
        store.cache_result("", &json!(1), 1, 2),
        Err(StoreError::Invalid(_))
    ));
}

pub fn the_perception_cache_is_bounded_expired_rows_first_then_the_oldest(f: &Fixture) {
    let store = f.store();
    let bound = quiver_store::CACHED_RESULTS;
    // One result that expires early, then more than the bound of long-lived ones.
    store.cache_result("short", &json!("s"), 0, 10).unwrap();
    for i in 0..bound + 5 {
        let now = 100 + i64::try_from(i).unwrap();
        store
            .cache_result(&format!("k{i}"), &json!(i), now, 1_000_000)
            .unwrap();
    }
    assert_eq!(f.rows("perception_cache"), i64::try_from(bound).unwrap());
    let now = 5_000;
    let cases = [
        ("the expired row went first", "short".to_owned(), None),
        ("then the oldest", "k0".to_owned(), None),
        ("the oldest kept", "k5".to_owned(), Some(json!(5))),
        (
            "the newest",
            format!("k{}", bound + 4),
            Some(json!(bound + 4)),
        ),
    ];
    for (name, key, want) in cases {
        assert_eq!(store.cached_result(&key, now).unwrap(), want, "{name}");
    }
    // A result stored again counts as new: it outlives those stored before it.
    store
        .cache_result("k5", &json!("again"), 6_000, 1_000_000)
        .unwrap();
    store
        .cache_result("extra", &json!("x"), 6_001, 1_000_000)
        .unwrap();
    assert_eq!(store.cached_result("k6", now).unwrap(), None);
    assert_eq!(
        store.cached_result("k5", now).unwrap(),
        Some(json!("again"))
    );
}

pub fn unfinished_calls_are_started_records_without_an_end(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    let record = |kind: AuditKind, call: &str| {
        let mut entry = AuditEntry::new(kind, "s1");
        entry.call_id = Some(call.to_owned());
        store.append_audit(&entry).unwrap();
    };
    record(AuditKind::CallStarted, "done");
    record(AuditKind::Call, "done");
    record(AuditKind::CallStarted, "open");
    record(AuditKind::Call, "never-started");
    let open: Vec<String> = store
        .unfinished_calls()
        .unwrap()
        .into_iter()
        .filter_map(|r| r.entry.call_id)
        .collect();
    assert_eq!(open, ["open"]);
    record(AuditKind::Call, "open");
    assert!(store.unfinished_calls().unwrap().is_empty());
}

pub fn card(id: &str, session: &str, created_at: i64) -> ApprovalCard {
    ApprovalCard {
        id: id.into(),
        session: session.into(),
        package: "qq".into(),
        tool: "qq.group_kick".into(),
        arguments: json!({"group": 1, "user": 2}),
        reason: "dangerous: member".into(),
        risk_category: Some("member".into()),
        created_at,
        permissions: Vec::new(),
        waiter: None,
        question: Default::default(),
    }
}

/// A client that cannot ask retries the call: the retry finds the card asked for that very
/// call, and uses its answer once.
pub fn a_retried_call_finds_its_card_and_uses_the_answer_once(f: &Fixture) {
    use quiver_store::CardQuestion;
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    store.enqueue_approval(&card("old", "s1", 10)).unwrap();
    store.enqueue_approval(&card("new", "s1", 20)).unwrap();
    let found = |call: &ApprovalCard| store.card_for_call(call).unwrap().map(|a| a.card.id);
    let same = card("probe", "s1", 0);
    // (the call as retried, the card found)
    let cases: Vec<(ApprovalCard, Option<&str>)> = vec![
        (same.clone(), Some("new")),
        (card("probe", "s2", 0), None),
        (
            ApprovalCard {
                arguments: json!({"user": 2, "group": 1}),
                ..same.clone()
            },
            Some("new"),
        ),
        (
            ApprovalCard {
                arguments: json!({"group": 1, "user": 3}),
                ..same.clone()
            },
            None,
        ),
        (
            ApprovalCard {
                question: CardQuestion::Consent,
                ..same.clone()
            },
            None,
        ),
        (
            ApprovalCard {
                tool: "qq.group_mute".into(),
                ..same.clone()
            },
            None,
        ),
    ];
    for (call, want) in &cases {
        assert_eq!(found(call).as_deref(), *want, "{call:?}");
    }
    // A pending answer cannot be used; an answered one once.
    assert!(!store.use_answer("new").unwrap());
    store
        .answer_approval("new", Decision::Approve, "owner", None)
        .unwrap();
    let answered = store.card_for_call(&same).unwrap().unwrap();
    assert_eq!(answered.status, ApprovalStatus::Approved);
    assert!(store.use_answer("new").unwrap());
    assert!(!store.use_answer("new").unwrap());
    // Used: the older card of the same call is what is left; expired, nothing is.
    assert_eq!(found(&same).as_deref(), Some("old"));
    store.expire_approval("old").unwrap();
    assert_eq!(found(&same), None);
    // The question survives the round trip.
    let consent = ApprovalCard {
        question: CardQuestion::Consent,
        ..card("c1", "s2", 30)
    };
    store.enqueue_approval(&consent).unwrap();
    let stored = store.approval("c1").unwrap().unwrap();
    assert_eq!(stored.card.question, CardQuestion::Consent);
}

pub fn approvals_are_answered_exactly_once(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    session(store, "s2");
    for (id, s, at) in [("a1", "s1", 10), ("a2", "s2", 20), ("a3", "s1", 30)] {
        let queued = store.enqueue_approval(&card(id, s, at)).unwrap();
        assert_eq!(queued.status, ApprovalStatus::Pending);
    }
    assert!(matches!(
        store.enqueue_approval(&card("a1", "s1", 40)),
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.enqueue_approval(&card("a9", "gone", 40)),
        Err(StoreError::NotFound { .. })
    ));
    let ids = |session: Option<&str>| -> Vec<String> {
        store
            .pending_approvals(session)
            .unwrap()
            .into_iter()
            .map(|a| a.card.id)
            .collect()
    };
    assert_eq!(ids(None), ["a1", "a2", "a3"], "oldest first");
    assert_eq!(ids(Some("s1")), ["a1", "a3"]);

    let answered = store
        .answer_approval("a1", Decision::Approve, "operator", Some("looks right"))
        .unwrap();
    assert_eq!(answered.status, ApprovalStatus::Approved);
    assert_eq!(answered.answered_by.as_deref(), Some("operator"));
    assert_eq!(answered.note.as_deref(), Some("looks right"));
    assert_eq!(
        answered.card,
        card("a1", "s1", 10),
        "the card is kept as is"
    );
    assert_eq!(
        store
            .answer_approval("a2", Decision::Deny, "operator", None)
            .unwrap()
            .status,
        ApprovalStatus::Denied
    );
    assert_eq!(
        store.expire_approval("a3").unwrap().status,
        ApprovalStatus::Expired
    );

    // Every second resolution fails and names the first.
    let cases: [(&str, Result<_, _>, Option<ApprovalStatus>); 5] = [
        (
            "approve twice",
            store.answer_approval("a1", Decision::Approve, "x", None),
            Some(ApprovalStatus::Approved),
        ),
        (
            "deny after approve",
            store.answer_approval("a1", Decision::Deny, "x", None),
            Some(ApprovalStatus::Approved),
        ),
        (
            "expire after deny",
            store.expire_approval("a2"),
            Some(ApprovalStatus::Denied),
        ),
        (
            "approve after expiry",
            store.answer_approval("a3", Decision::Approve, "x", None),
            Some(ApprovalStatus::Expired),
        ),
        (
            "unknown id",
            store.answer_approval("zz", Decision::Approve, "x", None),
            None,
        ),
    ];
    for (name, result, first) in cases {
        match (result, first) {
            (Err(StoreError::AlreadyAnswered { status, .. }), Some(want)) => {
                assert_eq!(status, want, "{name}")
            }
            (Err(StoreError::NotFound { what, .. }), None) => assert_eq!(what, "approval"),
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
    assert!(ids(None).is_empty());
    let polled = store.approval("a1").unwrap().unwrap();
    assert_eq!(polled.answered_by.as_deref(), Some("operator"));
}

pub fn a_card_whose_waiter_is_gone_is_withdrawn_and_cannot_be_approved(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    let me = quiver_store::waiter::current().unwrap();
    let (head, _) = me.rsplit_once(':').unwrap();
    // This process with another start time: a pid reused after the waiter died.
    let dead = format!("{head}:0");
    let cases = [
        ("live", Some(me.clone()), ApprovalStatus::Pending),
        ("dead", Some(dead), ApprovalStatus::Withdrawn),
        ("unknown", None, ApprovalStatus::Pending),
    ];
    for (id, waiter, _) in &cases {
        let mut card = card(id, "s1", 1);
        card.waiter = waiter.clone();
        card.permissions = vec!["read `/` [open-ended: the whole file system]".into()];
        store.enqueue_approval(&card).unwrap();
    }
    let withdrawn: Vec<String> = store
        .withdraw_orphaned_approvals()
        .unwrap()
        .into_iter()
        .map(|a| a.card.id)
        .collect();
    assert_eq!(withdrawn, ["dead"]);
    assert!(store.withdraw_orphaned_approvals().unwrap().is_empty());
    for (id, _, want) in &cases {
        let stored = store.approval(id).unwrap().unwrap();
        assert_eq!(stored.status, *want, "{id}");
        assert_eq!(stored.card.permissions.len(), 1, "{id}");
    }
    match store.answer_approval("dead", Decision::Approve, "op", None) {
        Err(StoreError::AlreadyAnswered { status, .. }) => {
            assert_eq!(status, ApprovalStatus::Withdrawn)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store.approval("dead").unwrap().unwrap().answered_by,
        None,
        "nobody is recorded as having approved it"
    );
}

pub fn racing_answers_resolve_once(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    store.enqueue_approval(&card("a1", "s1", 1)).unwrap();
    let store = f.shared();
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                if i % 2 == 0 {
                    store
                        .answer_approval("a1", Decision::Approve, &format!("op{i}"), None)
                        .is_ok()
                } else {
                    store.expire_approval("a1").is_ok()
                }
            })
        })
        .collect();
    let winners = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|won| *won)
        .count();
    assert_eq!(winners, 1);
}

pub fn waiting_for_an_approval(f: &Fixture) {
    let store = f.store();
    session(store, "s1");
    store.enqueue_approval(&card("a1", "s1", 1)).unwrap();
    store.enqueue_approval(&card("a2", "s1", 2)).unwrap();
    let store = f.shared();

    let start = Instant::now();
    let timed_out = store
        .wait_approval("a2", Duration::from_millis(150))
        .unwrap();
    assert_eq!(timed_out.status, ApprovalStatus::Pending);
    assert!(start.elapsed() >= Duration::from_millis(150));

    let answerer = Arc::clone(&store);
    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        answerer
            .answer_approval("a1", Decision::Deny, "op", None)
            .unwrap();
    });
    let start = Instant::now();
    let answered = store.wait_approval("a1", Duration::from_secs(30)).unwrap();
    handle.join().unwrap();
    assert_eq!(answered.status, ApprovalStatus::Denied);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(matches!(
        store.wait_approval("zz", Duration::from_secs(1)),
        Err(StoreError::NotFound { .. })
    ));
}

pub fn call(session: &str, tool: &str, time: i64, status: AuditStatus) -> AuditEntry {
    let mut entry = AuditEntry::new(AuditKind::Call, session);
    entry.time = time;
    entry.tool = Some(tool.into());
    entry.principal = json!({"user": "u1", "role": "user"});
    entry.origin = json!({"platform": "qq", "scope": "group"});
    entry.argument_digest = Some(argument_digest(&json!({"city": "北京"}), &[]));
    entry.decisions = vec![
        AuditDecision {
            step: AuditStep::Scopes,
            decision: "allow".into(),
            reason: "the scope `group` is one of [`group`]".into(),
        },
        AuditDecision {
            step: AuditStep::Consent,
            decision: "allow".into(),
            reason: "granted".into(),
        },
    ];
    entry.status = status;
    entry.duration_ms = 12;
    entry
}

pub fn audit_records_are_queried_newest_first(f: &Fixture) {
    let store = f.store();
    let entries = [
        call("s1", "weather.forecast", 100, AuditStatus::Ok),
        call("s1", "mail.send", 200, AuditStatus::Refused),
        call("s2", "weather.forecast", 300, AuditStatus::TimedOut),
        {
            let mut e = AuditEntry::new(AuditKind::SkillActivated, "s1");
            e.time = 400;
            e.skill = Some("weather".into());
            e
        },
        {
            let mut e = call("s1", "weather.forecast", 500, AuditStatus::Ok);
            e.cached = true;
            e.detail = Some(json!({"cache_age_s": 3}));
            e
        },
        {
            let mut e = AuditEntry::new(AuditKind::Other("workflow_step".into()), "s3");
            e.time = 600;
            e.status = AuditStatus::Other("parked".into());
            e
        },
    ];
    let mut ids = Vec::new();
    for entry in &entries {
        ids.push(store.append_audit(entry).unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");

    let times = |query: AuditQuery| -> Vec<i64> {
        store
            .query_audit(&query)
            .unwrap()
            .into_iter()
            .map(|r| r.entry.time)
            .collect()
    };
    let cases: [(&str, AuditQuery, &[i64]); 9] = [
        (
            "all",
            AuditQuery::default(),
            &[600, 500, 400, 300, 200, 100],
        ),
        (
            "by session",
            AuditQuery {
                session: Some("s1".into()),
                ..AuditQuery::default()
            },
            &[500, 400, 200, 100],
        ),
        (
            "by tool",
            AuditQuery {
                tool: Some("weather.forecast".into()),
                ..AuditQuery::default()
            },
            &[500, 300, 100],
        ),
        (
            "by session and tool",
            AuditQuery {
                session: Some("s1".into()),
                tool: Some("weather.forecast".into()),
                ..AuditQuery::default()
            },
            &[500, 100],
        ),
        (
            "by kind",
            AuditQuery {
                kind: Some(AuditKind::SkillActivated),
                ..AuditQuery::default()
            },
            &[400],
        ),
        (
            "time range, since inclusive, until exclusive",
            AuditQuery {
                since: Some(200),
                until: Some(500),
                ..AuditQuery::default()
            },
            &[400, 300, 200],
        ),
        (
            "limit",
            AuditQuery {
                limit: Some(2),
                ..AuditQuery::default()
            },
            &[600, 500],
        ),
        (
            "page back",
            AuditQuery {
                before_id: Some(ids[2]),
                ..AuditQuery::default()
            },
            &[200, 100],
        ),
        (
            "nothing",
            AuditQuery {
                session: Some("nobody".into()),
                ..AuditQuery::default()
            },
            &[],
        ),
    ];
    for (name, query, want) in cases {
        assert_eq!(times(query), want, "{name}");
    }

    let all = store.query_audit(&AuditQuery::default()).unwrap();
    let round_trip: Vec<AuditEntry> = all.iter().rev().map(|r| r.entry.clone()).collect();
    assert_eq!(round_trip, entries, "every field round-trips");
}

pub fn audit_lists_in_commit_order_when_the_clock_steps_back(f: &Fixture) {
    let store = f.store();
    // The host's clock stepped back between the second and third record.
    let ids: Vec<i64> = [(1000, "s1"), (2000, "s2"), (1500, "s1"), (1600, "s2")]
        .iter()
        .map(|(time, session)| {
            store
                .append_audit(&call(session, "weather.forecast", *time, AuditStatus::Ok))
                .unwrap()
        })
        .collect();
    let listed = |query: AuditQuery| -> Vec<i64> {
        store
            .query_audit(&query)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    let newest_first: Vec<i64> = ids.iter().rev().copied().collect();
    assert_eq!(listed(AuditQuery::default()), newest_first);
    assert_eq!(
        listed(AuditQuery {
            session: Some("s1".into()),
            ..AuditQuery::default()
        }),
        [ids[2], ids[0]]
    );
    assert_eq!(
        listed(AuditQuery {
            tool: Some("weather.forecast".into()),
            ..AuditQuery::default()
        }),
        newest_first
    );
    // Paging back by id meets every record once, whatever their times.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = listed(AuditQuery {
            before_id: before,
            limit: Some(1),
            ..AuditQuery::default()
        });
        let Some(last) = page.last().copied() else {
            break;
        };
        paged.extend(page);
        before = Some(last);
    }
    assert_eq!(paged, newest_first);
}

pub fn every_audit_step_round_trips_through_serde_and_the_store(f: &Fixture) {
    let store = f.store();
    let mut entry = AuditEntry::new(AuditKind::Call, "s1");
    entry.decisions = AuditStep::ALL
        .into_iter()
        .map(|step| AuditDecision {
            step,
            decision: "allow".into(),
            reason: format!("because of {step}"),
        })
        .collect();
    for step in AuditStep::ALL {
        let text = step.as_str();
        assert_eq!(serde_json::to_value(step).unwrap(), json!(text), "{step:?}");
        assert_eq!(
            serde_json::from_value::<AuditStep>(json!(text)).unwrap(),
            step,
            "{text}"
        );
        assert_eq!(text.parse::<AuditStep>(), Ok(step), "{text}");
        assert_eq!(step.to_string(), text);
    }
    store.append_audit(&entry).unwrap();
    let read = store.query_audit(&AuditQuery::default()).unwrap();
    assert_eq!(read[0].entry.decisions, entry.decisions);
    // The spellings the docs promise.
    assert_eq!(AuditStep::DangerousGate.as_str(), "dangerous-gate");
    assert_eq!(AuditStep::ApprovalMode.as_str(), "approval-mode");
}
