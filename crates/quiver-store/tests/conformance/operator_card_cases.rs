//! Operator cards on every backend: one exact call approved ahead, used at most once before it
//! expires, unless an operator revokes it first; of racing calls (and revokes), in one store or
//! two, exactly one gets the card.

use std::sync::{Arc, Barrier};
use std::thread;

use serde_json::{Value, json};

use quiver_store::{OPERATOR_CARDS_KEPT_MS, OperatorCard, OperatorCardState, StoreError};

use crate::backend::Fixture;

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
        revoked_at: None,
        revoked_by: None,
    }
}

fn args() -> Value {
    json!({"group": 1, "user": 2})
}

pub fn a_card_matches_its_exact_call_once_and_before_it_expires(f: &Fixture) {
    let store = f.store();
    let same = json!({"user": 2, "group": 1});
    // (the call: tool, arguments, session, now) -> whether the card `any` matches. Each case
    // has its own tool name (a suffix), so the cases of one store never meet.
    let cases: Vec<(&str, Value, &str, i64, bool)> = vec![
        ("qq.kick_member", same.clone(), "s1", 500, true),
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
        ("qq.group_mute", same.clone(), "s1", 500, false),
        ("qq.kick_member", same.clone(), "s1", 1100, false),
        ("qq.kick_member", same.clone(), "s1", 1099, true),
    ];
    for (i, (tool, arguments, session, now, want)) in cases.into_iter().enumerate() {
        let made = OperatorCard {
            tool: format!("qq.kick_member#{i}"),
            ..card(&format!("any-{i}"), None, 100)
        };
        store.create_operator_card(&made).unwrap();
        let tool = format!("{tool}#{i}");
        let used = store
            .use_operator_card(&tool, &arguments, session, "call-1", now)
            .unwrap();
        assert_eq!(used.is_some(), want, "{tool} {arguments} {session} {now}");
        if let Some(used) = used {
            assert_eq!(used.used_at, Some(now));
            assert_eq!(used.used_session.as_deref(), Some(session));
            assert_eq!(used.used_call.as_deref(), Some("call-1"));
            assert_eq!(used.state(now), OperatorCardState::Used);
            // Once: the same call again finds nothing.
            let again = store
                .use_operator_card(&tool, &arguments, session, "call-2", now)
                .unwrap();
            assert_eq!(again, None);
        }
    }
}

pub fn a_card_for_one_session_matches_only_there(f: &Fixture) {
    let store = f.store();
    store
        .create_operator_card(&card("s1-only", Some("s1"), 100))
        .unwrap();
    let other = store.use_operator_card("qq.kick_member", &args(), "s2", "c", 200);
    assert_eq!(other.unwrap(), None);
    let own = store.use_operator_card("qq.kick_member", &args(), "s1", "c", 200);
    assert_eq!(own.unwrap().unwrap().id, "s1-only");
}

pub fn two_cards_for_one_call_are_two_uses_oldest_first(f: &Fixture) {
    let store = f.store();
    store.create_operator_card(&card("b", None, 200)).unwrap();
    store.create_operator_card(&card("a", None, 100)).unwrap();
    let ids: Vec<Option<String>> = (0..3)
        .map(|i| {
            store
                .use_operator_card("qq.kick_member", &args(), "s", &format!("c{i}"), 300)
                .unwrap()
                .map(|c| c.id)
        })
        .collect();
    assert_eq!(ids, vec![Some("a".into()), Some("b".into()), None]);
}

pub fn invalid_cards_are_refused(f: &Fixture) {
    let store = f.store();
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
        OperatorCard {
            revoked_at: Some(150),
            revoked_by: Some("op".into()),
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

pub fn the_list_shows_live_cards_and_recently_ended_ones(f: &Fixture) {
    let store = f.store();
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

pub fn a_revoked_card_matches_no_call_and_is_listed_as_revoked(f: &Fixture) {
    let store = f.store();
    store.create_operator_card(&card("r", None, 100)).unwrap();
    let revoked = store
        .revoke_operator_card("r", "console:owner", 300)
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(300));
    assert_eq!(revoked.revoked_by.as_deref(), Some("console:owner"));
    assert_eq!(revoked.state(300), OperatorCardState::Revoked);
    // Before it would have expired (1100), the exact call no longer finds it.
    let used = store.use_operator_card("qq.kick_member", &args(), "s", "c", 400);
    assert_eq!(used.unwrap(), None);
    // Listed, as revoked, for an hour after the revoke (not after its expiry).
    let listed = store.operator_cards(400).unwrap();
    assert_eq!(listed, vec![revoked.clone()]);
    assert_eq!(
        store
            .operator_cards(300 + OPERATOR_CARDS_KEPT_MS - 1)
            .unwrap(),
        vec![revoked]
    );
    assert!(
        store
            .operator_cards(300 + OPERATOR_CARDS_KEPT_MS)
            .unwrap()
            .is_empty()
    );
    // A revoked card is read back the same from another store (another process).
    let other = f.reopen();
    assert_eq!(other.operator_cards(400).unwrap()[0].revoked_at, Some(300));
}

pub fn only_a_live_card_is_revoked(f: &Fixture) {
    let store = f.store();
    store
        .create_operator_card(&card("used", None, 100))
        .unwrap();
    let twice = OperatorCard {
        tool: "qq.twice".into(),
        ..card("twice", None, 100)
    };
    store.create_operator_card(&twice).unwrap();
    let expired = OperatorCard {
        tool: "qq.other".into(),
        ..card("expired", None, 100)
    };
    store.create_operator_card(&expired).unwrap();
    store
        .use_operator_card("qq.kick_member", &args(), "s", "c", 200)
        .unwrap()
        .unwrap();
    store.revoke_operator_card("twice", "op", 200).unwrap();
    // (card, revoker, now) -> the error
    let cases = [
        ("used", "op", 300, "it is used"),
        ("twice", "op", 300, "it is revoked"),
        ("expired", "op", 1100, "it is expired"),
    ];
    for (id, by, now, want) in cases {
        match store.revoke_operator_card(id, by, now) {
            Err(StoreError::Conflict(message)) => assert!(message.contains(want), "{message}"),
            other => panic!("{id}: {other:?}"),
        }
    }
    assert!(matches!(
        store.revoke_operator_card("nope", "op", 300),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.revoke_operator_card("expired", "", 300),
        Err(StoreError::Invalid(_))
    ));
    // Nothing the refusals touched changed: `used` keeps its use, `twice` its first revoke.
    let cards = store.operator_cards(300).unwrap();
    let of = |id: &str| cards.iter().find(|c| c.id == id).unwrap().clone();
    assert_eq!(of("used").state(300), OperatorCardState::Used);
    assert_eq!(of("used").revoked_at, None);
    assert_eq!(of("twice").revoked_at, Some(200));
    assert_eq!(of("expired").revoked_at, None);
}

pub fn of_racing_calls_exactly_one_uses_the_card(f: &Fixture) {
    let store = f.shared();
    store.create_operator_card(&card("one", None, 100)).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                store
                    .use_operator_card("qq.kick_member", &args(), "s", &format!("c{i}"), 200)
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

pub fn of_a_use_and_a_revoke_racing_from_two_stores_one_wins(f: &Fixture) {
    for round in 0..10 {
        let id = format!("race-{round}");
        let tool = format!("qq.kick_member#{round}");
        let made = OperatorCard {
            tool: tool.clone(),
            ..card(&id, None, 100)
        };
        f.store().create_operator_card(&made).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let user = {
            let (store, barrier, tool) = (f.reopen(), Arc::clone(&barrier), tool.clone());
            thread::spawn(move || {
                barrier.wait();
                store
                    .use_operator_card(&tool, &args(), "s", "c", 200)
                    .unwrap()
                    .is_some()
            })
        };
        let revoker = {
            let (store, barrier, id) = (f.shared(), Arc::clone(&barrier), id.clone());
            thread::spawn(move || {
                barrier.wait();
                match store.revoke_operator_card(&id, "op", 200) {
                    Ok(_) => true,
                    Err(StoreError::Conflict(_)) => false,
                    Err(e) => panic!("{e}"),
                }
            })
        };
        let (used, revoked) = (user.join().unwrap(), revoker.join().unwrap());
        assert!(
            used != revoked,
            "round {round}: used {used}, revoked {revoked}"
        );
        let stored = f.store().operator_cards(200).unwrap();
        let stored = stored.iter().find(|c| c.id == id).unwrap();
        let want = if used {
            OperatorCardState::Used
        } else {
            OperatorCardState::Revoked
        };
        assert_eq!(stored.state(200), want);
        assert!(stored.used_at.is_none() || stored.revoked_at.is_none());
    }
}
