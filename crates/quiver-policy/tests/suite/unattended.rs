//! Unattended turns (schedules, workflows with nobody present): no `ask_user`; anything that
//! needs a person is refused, or parks a workflow run until an operator answers in the console.

use quiver_package::tool::{Approval, RiskCategory};
use quiver_policy::{
    Approver, Approvers, AskReason, Caller, Check, Decision, Evaluation, RefusalReason, Reuse,
    ToolFacts, offers_ask_user,
};

use super::common::{
    World, ask, ask_of, asking, consent_ask, evaluate, park, pass, refuse, refused,
};

#[test]
fn unattended_has_no_ask_user() {
    assert!(offers_ask_user(false));
    assert!(!offers_ask_user(true));
}

/// A scheduled turn: the person flag is ignored; nothing that needs a person runs.
#[test]
fn unattended_schedule_refuses_what_needs_a_person() {
    let world = World::cli();
    let mut request = world.call(ToolFacts::new("news", "post_digest"));
    request.unattended = true;
    request.approvers = Approvers {
        person: true,
        console: true,
        model_reviewer: false,
    };
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: refused(RefusalReason::NoPerson, "news.post_digest", &[]),
            trace: vec![
                consent_ask("news"),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                refuse(
                    Check::Approver,
                    "unattended turn: no person in the session; only a workflow run can wait for the console"
                ),
            ],
        }
    );
    assert_eq!(
        evaluation.refusal().map(|r| r.message.as_str()),
        Some("refused: this call needs a person's answer and no person is present; do not retry")
    );
}

/// A workflow run with the console available parks until an operator answers.
#[test]
fn unattended_workflow_parks_for_the_console() {
    let world = World::cli();
    let mut request = world.call(ToolFacts::new("news", "post_digest"));
    request.unattended = true;
    request.caller = Caller::Workflow("daily");
    request.approvers = Approvers {
        person: false,
        console: true,
        model_reviewer: false,
    };
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: Decision::Park(ask_of(
                "news.post_digest",
                &[],
                Some(Approver::Console),
                Some((Approver::Console, &[AskReason::ActionTool], Reuse::ThisCall)),
            )),
            trace: vec![
                consent_ask("news"),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                park(
                    Check::Approver,
                    "unattended turn: no person in the session; the workflow run waits for an operator (consent from an operator in the console; approval from an operator in the console)"
                ),
            ],
        }
    );
    // Without the console the run cannot wait: refused.
    request.approvers = Approvers::default();
    assert_eq!(
        evaluate(&request).decision,
        refused(RefusalReason::NoPerson, "news.post_digest", &[])
    );
}

/// A reviewing model may answer an ordinary approval in an unattended turn; it never answers
/// the dangerous gate.
#[test]
fn unattended_model_review_only_for_ordinary_approvals() {
    let world = World::cli().consented("news");
    let mut request = world.call(ToolFacts::new("news", "post_digest"));
    request.unattended = true;
    request.approvers = Approvers {
        person: false,
        console: false,
        model_reviewer: true,
    };
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: asking(
                "news.post_digest",
                &[],
                None,
                Some((
                    Approver::ModelReviewer,
                    &[AskReason::ActionTool],
                    Reuse::ThisCall
                )),
            ),
            trace: vec![
                pass(Check::Consent, "package `news` was allowed in this session"),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                ask(
                    Check::Approver,
                    "unattended turn: no person in the session; approval from the reviewing model"
                ),
            ],
        }
    );

    let mut notice = ToolFacts::new("news", "send_group_notice");
    notice.approval = Approval::Never;
    let mut request = world.call(notice);
    request.unattended = true;
    request.caller = Caller::Workflow("news");
    request.approvers = Approvers {
        person: false,
        console: false,
        model_reviewer: true,
    };
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: refused(
                RefusalReason::NeedsHumanApproval,
                "news.send_group_notice",
                &[RiskCategory::Publish]
            ),
            trace: vec![
                ask(
                    Check::DangerousGate,
                    "`send_group_notice` matches the built-in dangerous names `send_group_notice` (`publish`), `group_notice` (`publish`): every call needs a fresh human approval"
                ),
                pass(
                    Check::Consent,
                    "called from inside package `news` by its workflow: no consent question"
                ),
                pass(Check::ApprovalMode, "`never`: no confirmation"),
                refuse(
                    Check::Approver,
                    "unattended turn: no person in the session; nobody can give a human approval (no person, no console)"
                ),
            ],
        }
    );
}
