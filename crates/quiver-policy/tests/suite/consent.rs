//! Package consent: the first call of any exposed item of package P in session S asks about the
//! whole package; granted, no more questions for P in S; refused, not run.

use quiver_package::tool::{Approval, Category};
use quiver_policy::{
    Approver, Caller, Check, Decision, Denial, Evaluation, RefusalReason, SessionGrants, ToolFacts,
    Visibility,
};

use super::common::{World, asking, consent_ask, evaluate, pass, person_answers, refuse, refused};

fn reading(package: &'static str, name: &'static str) -> ToolFacts<'static> {
    let mut tool = ToolFacts::new(package, name);
    tool.category = Category::Perception;
    tool
}

#[test]
fn consent_first_call_asks_about_the_whole_package() {
    let mut world = World::cli();
    let forecast = reading("weather", "forecast");
    let alerts = reading("weather", "alerts");
    let concrete = pass(
        Check::ApprovalMode,
        "`on-risk`: a `perception` tool whose permissions are concrete allowlists",
    );

    let first = evaluate(&world.call(forecast));
    assert_eq!(
        first,
        Evaluation {
            decision: asking("weather.forecast", &[], Some(Approver::Person), None),
            trace: vec![
                consent_ask("weather"),
                concrete.clone(),
                person_answers(true, false),
            ],
        }
    );
    let Decision::Ask(question) = &first.decision else {
        panic!("{first:#?}");
    };
    world.session.record_granted(question);

    // Another item of the same package: no more questions in this session.
    assert_eq!(
        evaluate(&world.call(alerts)),
        Evaluation {
            decision: Decision::Allow,
            trace: vec![
                pass(
                    Check::Consent,
                    "package `weather` was allowed in this session"
                ),
                concrete.clone(),
            ],
        }
    );
    // Another package asks for itself.
    assert_eq!(
        evaluate(&world.call(reading("maps", "geocode"))).trace[0],
        consent_ask("maps")
    );
    // A new session asks again.
    world.session = SessionGrants::new("s2");
    assert_eq!(
        evaluate(&world.call(alerts)).trace[0],
        consent_ask("weather")
    );
}

#[test]
fn consent_refused_is_not_run_for_the_session() {
    let mut world = World::cli();
    let forecast = reading("weather", "forecast");
    let first = evaluate(&world.call(forecast));
    let Decision::Ask(question) = &first.decision else {
        panic!("{first:#?}");
    };
    let refusal = question.refusal(Denial::Consent);
    assert_eq!(
        refusal.message,
        "refused: the user did not allow package `weather` in this session; do not retry"
    );
    world.session.refuse_consent("weather");
    world.turn.record_refusal(&refusal);

    // The next turn of the same session: every item of the package is refused without asking.
    world.turn = quiver_policy::TurnState::new();
    assert_eq!(
        evaluate(&world.call(reading("weather", "alerts"))),
        Evaluation {
            decision: refused(
                RefusalReason::ConsentRefused {
                    package: "weather".into()
                },
                "weather.alerts",
                &[]
            ),
            trace: vec![refuse(
                Check::Consent,
                "the user refused package `weather` in this session"
            )],
        }
    );
}

#[test]
fn consent_is_not_asked_inside_the_own_package() {
    let world = World::cli();
    let mut tool = reading("weather", "cache_purge");
    tool.visibility = Visibility::Private;
    tool.approval = Approval::Never;
    let mut request = world.call(tool);
    request.caller = Caller::Agent("weather");
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: Decision::Allow,
            trace: vec![
                pass(
                    Check::Private,
                    "private to package `weather`, called by its own agent"
                ),
                pass(
                    Check::Consent,
                    "called from inside package `weather` by its agent: no consent question"
                ),
                pass(Check::ApprovalMode, "`never`: no confirmation"),
            ],
        }
    );
    // An agent of another package calling an exposed tool of `weather` is outside it.
    let mut request = world.call(reading("weather", "forecast"));
    request.caller = Caller::Agent("travel");
    assert_eq!(evaluate(&request).trace[0], consent_ask("weather"));
}
