//! Step 2 and the shape of a decision: unknown names say nothing, private items are refused
//! without asking, a direct call loads a loadable tool and then passes every check; decisions
//! are ordered and the strictest wins.

use quiver_package::tool::Category;
use quiver_policy::{
    Approver, Caller, Check, ControlPlane, Decision, DecisionKind, Evaluation, Presence,
    RefusalReason, Stage, Step, ToolFacts, Visibility,
};

use super::common::{World, asking, consent_ask, evaluate, pass, person_answers, refuse, refused};

#[test]
fn visibility_unknown_tool_says_nothing() {
    let world = World::cli();
    let mut request = world.call(ToolFacts::new("qq", "group_kick"));
    request.presence = Presence::Unloadable;
    request.control = ControlPlane {
        emergency_stop: true,
        ..ControlPlane::default()
    };
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: Decision::Unknown,
            trace: vec![Step::new(
                Check::Presence,
                DecisionKind::Unknown,
                "the caller may not load this name"
            )],
        }
    );
    assert_eq!(evaluation.deciding_stage(), Some(Stage::Visibility));
}

#[test]
fn visibility_private_refused_without_asking() {
    let world = World::cli();
    let mut tool = ToolFacts::new("weather", "refresh_cache");
    tool.visibility = Visibility::Private;
    for caller in [
        Caller::Model,
        Caller::Agent("travel"),
        Caller::Page("travel"),
    ] {
        let mut request = world.call(tool);
        request.caller = caller;
        let evaluation = evaluate(&request);
        assert_eq!(
            evaluation.decision,
            refused(
                RefusalReason::Private {
                    package: "weather".into()
                },
                "weather.refresh_cache",
                &[]
            )
        );
        assert_eq!(evaluation.trace.len(), 1);
        assert_eq!(evaluation.deciding_stage(), Some(Stage::Visibility));
    }
    let mut request = world.call(tool);
    request.presence = Presence::Loadable;
    assert_eq!(
        evaluate(&request).trace[1],
        refuse(
            Check::Private,
            "private to package `weather`; the model is not one of its agents, workflows or pages"
        )
    );
}

/// seed 003: a direct call of a loadable tool loads it, and still asks consent.
#[test]
fn visibility_direct_call_loads_and_still_asks_consent() {
    let world = World::cli();
    let mut tool = ToolFacts::new("weather", "forecast");
    tool.category = Category::Perception;
    tool.hidden = true;
    let mut request = world.call(tool);
    request.presence = Presence::Loadable;
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: asking("weather.forecast", &[], Some(Approver::Person), None),
            trace: vec![
                pass(
                    Check::Presence,
                    "a direct call of a tool the caller may load: the call loads it"
                ),
                consent_ask("weather"),
                pass(
                    Check::ApprovalMode,
                    "`on-risk`: a `perception` tool whose permissions are concrete allowlists"
                ),
                person_answers(true, false),
            ],
        }
    );
    assert_eq!(evaluation.deciding_stage(), None);
}

#[test]
fn decision_kinds_are_ordered_strictest_last() {
    use DecisionKind::*;
    let mut kinds = vec![Refuse, Unknown, Allow, Park, Ask];
    kinds.sort();
    assert_eq!(kinds, vec![Allow, Ask, Park, Refuse, Unknown]);
    assert_eq!(kinds.iter().max(), Some(&Unknown));
    assert!(Stage::Visibility < Stage::Admission && Stage::Admission < Stage::Authorization);
}
