//! Reads a turn makes together (`Store::turn_start`, `Store::stamped_presence`) give what
//! the separate reads give.

use quiver_store::TurnStart;
use serde_json::json;

use crate::backend::Fixture;
use crate::store_cases::session;

pub fn a_turns_reads_together_match_the_separate_reads(f: &Fixture) {
    let store = f.store();
    let empty = store.turn_start("nope").unwrap();
    assert_eq!(empty.session, None);
    assert!(empty.consents.is_empty() && empty.once_approvals.is_empty());
    assert_eq!(store.stamped_presence("nope").unwrap().0, None);

    session(store, "s1");
    session(store, "s2");
    store.set_consent("s1", "weather", true, "u").unwrap();
    store.set_consent("s1", "mail", false, "u").unwrap();
    store.set_consent("s2", "calc", true, "u").unwrap();
    store.grant_once("s1", "mail.send", "u").unwrap();
    store
        .set_operator_value("disabled:mail", &json!(true), "op")
        .unwrap();
    for tool in ["a.t", "b.t", "c.t"] {
        store.load_tool("s1", tool, 2).unwrap();
    }
    store.open_package("s1", "p").unwrap();
    store.open_package("s1", "q").unwrap();
    store.activate_skill("s1", "p/k").unwrap();
    store.load_tool("s2", "z.t", 2).unwrap();

    let start = store.turn_start("s1").unwrap();
    assert_eq!(
        start,
        TurnStart {
            session: store.session("s1").unwrap(),
            operator: store.operator_values().unwrap(),
            consents: store.consents("s1").unwrap(),
            once_approvals: store.once_approvals("s1").unwrap(),
        }
    );
    assert_eq!(start.consents.len(), 2, "only the session's own");
    assert_eq!(start.operator["disabled:mail"], json!(true));

    let (stamp, presence) = store.stamped_presence("s1").unwrap();
    assert_eq!(stamp, store.presence_stamp("s1").unwrap());
    assert_eq!(presence, store.presence("s1").unwrap());
    assert_eq!(presence.loaded, ["c.t", "b.t"], "most recently used first");
    assert_eq!(presence.opened, ["p", "q"]);
    assert_eq!(presence.active_skills, ["p/k"]);
}
