//! Operator cards: one exact call approved ahead, used at most once before it expires.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::thread;

use serde_json::{Value, json};

use quiver_store::{OPERATOR_CARDS_KEPT_MS, OperatorCard, SqliteStore, Store, StoreError};

fn open() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("quiver.db")).unwrap();
    (dir, store)
}

fn card(id: &str, session: Option<&str>, created_at: i64) -> OperatorCard {
    OperatorCard {
        id: id.into(),
        tool: "qq.kick_member".into(),
        arguments: json!({"group": 1, "user": 2}),
        session: session.map(str::to_owned),
        created_by: "owner".into(),
        created_at,
        expires_at: created_at + 1000,
        used_at: None,
        used_session: None,
        used_call: None,
    }
}

#[test]
fn a_card_matches_its_exact_call_once_and_before_it_expires() {
    let args = json!({"user": 2, "group": 1});
    // (the call: tool, arguments, session, now) -> whether the card `any` matches
    let cases: Vec<(&str, Value, &str, i64, bool)> = vec![
        ("qq.kick_member", args.clone(), "s1", 500, true),
        (
            "qq.kick_member",
            json!({"group":1,"user":2}),
            "s9",
            500,
            true,
        ),
        (
            "qq.kick_member",
            json!({"group": 1, "user": 3}),
            "s1",
            500,
            false,
        ),
        ("qq.kick_member", json!({"group": 1}), "s1", 500, false),
        ("qq.group_mute", args.clone(), "s1", 500, false),
        ("qq.kick_member", args.clone(), "s1", 1100, false),
        ("qq.kick_member", args.clone(), "s1", 1099, true),
    ];
    for (tool, arguments, session, now, want) in cases {
        let (_dir, store) = open();
        store.create_operator_card(&card("any", None, 100)).unwrap();
        let used = store
            .use_operator_card(tool, &arguments, session, "call-1", now)
            .unwrap();
        assert_eq!(used.is_some(), want, "{tool} {arguments} {session} {now}");
        if let Some(used) = used {
            assert_eq!(used.used_at, Some(now));
            assert_eq!(used.used_session.as_deref(), Some(session));
            assert_eq!(used.used_call.as_deref(), Some("call-1"));
            // Once: the same call again finds nothing.
            let again = store
                .use_operator_card(tool, &arguments, session, "call-2", now)
                .unwrap();
            assert_eq!(again, None);
        }
    }
}

#[test]
fn a_card_for_one_session_matches_only_there() {
    let (_dir, store) = open();
    store
        .create_operator_card(&card("s1-only", Some("s1"), 100))
        .unwrap();
    let args = json!({"group": 1, "user": 2});
    let other = store.use_operator_card("qq.kick_member", &args, "s2", "c", 200);
    assert_eq!(other.unwrap(), None);
    let own = store.use_operator_card("qq.kick_member", &args, "s1", "c", 200);
    assert_eq!(own.unwrap().unwrap().id, "s1-only");
}

#[test]
fn two_cards_for_one_call_are_two_uses_oldest_first() {
    let (_dir, store) = open();
    store.create_operator_card(&card("b", None, 200)).unwrap();
    store.create_operator_card(&card("a", None, 100)).unwrap();
    let args = json!({"group": 1, "user": 2});
    let ids: Vec<Option<String>> = (0..3)
        .map(|i| {
            store
                .use_operator_card("qq.kick_member", &args, "s", &format!("c{i}"), 300)
                .unwrap()
                .map(|c| c.id)
        })
        .collect();
    assert_eq!(ids, vec![Some("a".into()), Some("b".into()), None]);
}

#[test]
fn of_racing_calls_exactly_one_uses_the_card() {
    let (_dir, store) = open();
    let store: Arc<dyn Store> = Arc::new(store);
    store.create_operator_card(&card("one", None, 100)).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let args = json!({"group": 1, "user": 2});
                store
                    .use_operator_card("qq.kick_member", &args, "s", &format!("c{i}"), 200)
                    .unwrap()
                    .is_some()
            })
        })
        .collect();
    let used = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|used| *used)
        .count();
    assert_eq!(used, 1);
}

#[test]
fn invalid_cards_are_refused() {
    let (_dir, store) = open();
    let bad = [
        OperatorCard {
            id: String::new(),
            ..card("x", None, 100)
        },
        OperatorCard {
            tool: String::new(),
            ..card("x", None, 100)
        },
        OperatorCard {
            created_by: String::new(),
            ..card("x", None, 100)
        },
        OperatorCard {
            expires_at: 100,
            ..card("x", None, 100)
        },
        OperatorCard {
            used_at: Some(150),
            ..card("x", None, 100)
        },
    ];
    for bad in bad {
        let refused = store.create_operator_card(&bad);
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{bad:?}");
    }
    store.create_operator_card(&card("x", None, 100)).unwrap();
    let taken = store.create_operator_card(&card("x", None, 100));
    assert!(matches!(taken, Err(StoreError::AlreadyExists { .. })));
}

#[test]
fn the_list_shows_live_cards_and_recently_ended_ones() {
    let (_dir, store) = open();
    store.create_operator_card(&card("old", None, 100)).unwrap();
    store
        .create_operator_card(&card("new", None, 5000))
        .unwrap();
    let ids = |now| -> Vec<String> {
        store
            .operator_cards(now)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect()
    };
    assert_eq!(ids(600), vec!["new", "old"]);
    // `old` expired at 1100: listed for an hour after, then gone.
    assert_eq!(ids(1100 + OPERATOR_CARDS_KEPT_MS - 1), vec!["new", "old"]);
    assert_eq!(ids(1100 + OPERATOR_CARDS_KEPT_MS), vec!["new"]);
}
