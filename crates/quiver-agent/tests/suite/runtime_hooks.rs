//! What the loop tells the runtime: the turn's model (skills bound to a model), and calls of
//! tools outside an agent's declared set (answered unknown and audited by the runtime).

use quiver_agent::Quiet;
use quiver_agent::fake::{Api, Move};
use quiver_catalog::Catalog;
use quiver_runtime::CallStatus;
use quiver_runtime::approver::Answer;
use quiver_store::{AuditKind, AuditQuery, AuditStatus};
use serde_json::json;

use super::common::*;

#[test]
fn a_skill_bound_to_a_model_is_read_only_by_that_model() {
    for (model, want) in [
        ("fake-model", CallStatus::Ok),
        ("other-model", CallStatus::Error),
    ] {
        let h = harness(Api::OpenAi, |c| {
            if let Some(p) = c.providers.get_mut("fake") {
                p.model = model.to_owned();
            }
        });
        let packages = h._dir.path().join("packages");
        write(
            &packages,
            "weather/skills/tuned/SKILL.md",
            "---\nname: tuned\ndescription: Hints for one model.\nmodel: fake-model\n---\ntuned hints\n",
        );
        h.runtime.swap_catalog(Catalog::load_dirs(&[&packages]));
        h.server.push([
            Move::call("read_skill", json!({"id": "weather/tuned"})),
            Move::text("好的"),
        ]);
        let s = session(&h);
        let report = chat(&h, &s).send("天气", &mut Quiet).unwrap();
        let call = &report.calls[0];
        assert_eq!(call.status, want, "{model}: {call:#?}");
        if want == CallStatus::Ok {
            assert_eq!(call.result["instructions"], "tuned hints\n");
        } else {
            assert_eq!(call.result["error"], "no such skill: weather/tuned");
        }
    }
}

#[test]
fn a_sub_agent_calling_a_tool_it_did_not_declare_is_audited_as_unknown() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("reports__writer", json!({"task": "写日报"})),
        Move::call("weather__forecast", json!({"city": "北京"})),
        Move::text("写不了"),
        Move::text("完成。"),
    ]);
    h.person.answer(&[Answer::AllowForSession]);
    let s = session(&h);
    let report = chat(&h, &s).send("帮我写日报", &mut Quiet).unwrap();
    let child = report.calls[0].result["session"]
        .as_str()
        .expect("a child session")
        .to_owned();
    assert!(h.calls.lock().unwrap().is_empty(), "nothing ran");
    let records = h
        .store
        .query_audit(&AuditQuery {
            session: Some(child),
            kind: Some(AuditKind::Call),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(records.len(), 1, "{records:#?}");
    let entry = &records[0].entry;
    assert_eq!(entry.tool.as_deref(), Some("weather__forecast"));
    assert_eq!(entry.status, AuditStatus::Refused);
    assert!(
        entry
            .decisions
            .iter()
            .any(|d| d.decision == "unknown" && d.reason == "outside this agent's declared tools"),
        "{:?}",
        entry.decisions
    );
    // The child's model read the same answer as for a name that does not exist.
    let requests = h.server.requests();
    let child_messages = requests[2].body["messages"].as_array().unwrap();
    let last = child_messages.last().unwrap();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("unknown tool: weather__forecast"),
        "{last}"
    );
}
