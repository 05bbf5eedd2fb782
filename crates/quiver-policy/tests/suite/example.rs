//! The worked example of docs/policy.md: 群管理 (`group-admin`) kicks a member of a QQ group.

use quiver_package::rules::Role;
use quiver_package::tool::{Risk, RiskCategory};
use quiver_policy::{
    Approver, AskReason, Check, Decision, Denial, Evaluation, Origin, Principal, RefusalReason,
    Restrictions, Reuse, ToolFacts,
};

use super::common::{World, ask, asking, evaluate, pass, refuse, refused, rule, strings};

#[test]
fn example_qun_guanli_group_kick() {
    let platforms = strings(&["qq"]);
    let scopes = strings(&["group"]);
    let permissions = strings(&["platform(qq,admin)"]);
    let mut kick = ToolFacts::new("group-admin", "group_kick");
    kick.risk = Some(Risk::Dangerous);
    kick.risk_category = Some(RiskCategory::Member);
    kick.restrictions = Restrictions {
        platforms: Some(&platforms),
        scopes: Some(&scopes),
        permissions: &permissions,
    };
    let mut mute = kick;
    mute.name = "mute_member";

    // Turn 1: a group admin asks 「把 @张三 踢出去」.
    let admin = Principal {
        platform_roles: strings(&["admin"]),
        ..Principal::user("10086", Role::User)
    };
    let mut world = World::qq_group(admin);
    let admitted = vec![
        pass(Check::Platforms, "the platform `qq` is one of [`qq`]"),
        pass(Check::Scopes, "the scope `group` is one of [`group`]"),
        rule("platform(qq,admin)", true, "the sender is `admin` on `qq`"),
    ];
    let mut trace = admitted.clone();
    trace.extend([
        ask(
            Check::DangerousGate,
            "`group_kick` matches the built-in dangerous name `group_kick` (`member`); `group_kick` is declared dangerous (`member`): every call needs a fresh human approval",
        ),
        ask(
            Check::Consent,
            "first call of package `group-admin` in this session: ask about the whole package",
        ),
        ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
        ask(
            Check::Approver,
            "consent from the person in the session; approval from the person in the session",
        ),
    ]);
    let first = evaluate(&world.call(kick));
    assert_eq!(
        first,
        Evaluation {
            decision: asking(
                "group-admin.group_kick",
                &[RiskCategory::Member],
                Some(Approver::Person),
                Some((
                    Approver::Person,
                    &[AskReason::Dangerous, AskReason::ActionTool],
                    Reuse::ThisCall
                )),
            ),
            trace,
        }
    );

    // The admin allows the package but declines the kick.
    let Decision::Ask(question) = &first.decision else {
        panic!("{first:#?}");
    };
    world.session.grant_consent("group-admin");
    let refusal = question.refusal(Denial::Approval);
    assert_eq!(
        refusal.message,
        "refused; needs human approval; do not retry"
    );
    world.turn.record_refusal(&refusal);

    // The model tries to mute instead: refused at once, nobody is asked.
    let trace = vec![refuse(
        Check::Lockout,
        "a `member` tool was refused earlier in this turn: refused at once",
    )];
    assert_eq!(
        evaluate(&world.call(mute)),
        Evaluation {
            decision: refused(
                RefusalReason::CategoryLocked {
                    category: RiskCategory::Member
                },
                "group-admin.mute_member",
                &[RiskCategory::Member]
            ),
            trace,
        }
    );

    // Turn 2: an ordinary member says 「踢了他」.
    world.sender = Principal::user("20000", Role::User);
    world.turn = quiver_policy::TurnState::new();
    let evaluation = evaluate(&world.call(kick));
    assert_eq!(
        evaluation.refusal().map(|r| r.message.as_str()),
        Some("refused: not available here: the sender has no role on `qq`; do not retry")
    );

    // The CLI never gets it, not even as the local owner.
    world.origin = Origin::local();
    world.sender = Principal::user("owner", Role::Master);
    assert_eq!(
        evaluate(&world.call(kick))
            .refusal()
            .map(|r| r.message.as_str()),
        Some(
            "refused: not available here: limited to platforms [`qq`]; this conversation has no platform (CLI, HTTP or MCP); do not retry"
        )
    );
}
