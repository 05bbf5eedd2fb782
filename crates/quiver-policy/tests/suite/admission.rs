//! Admission: an item is offered only if the origin and this turn's sender meet all of its
//! `platforms`, `scopes` and `permissions`.

use quiver_package::rules::Role;
use quiver_package::skill::SkillMeta;
use quiver_policy::{
    Admission, Check, Decision, Origin, Principal, RefusalReason, Restrictions, ScopeKind,
    ToolFacts, admit,
};

use super::common::{
    World, ask, asking, evaluate, pass, person_answers, refuse, refused, rule, strings,
};
use quiver_policy::{Approver, AskReason, Evaluation, Reuse};

#[test]
fn admission_cli_never_gets_a_tool_limited_to_group_scope() {
    let scopes = strings(&["group"]);
    let platforms = strings(&["qq"]);
    let group_only = Restrictions {
        scopes: Some(&scopes),
        ..Restrictions::NONE
    };
    let qq_only = Restrictions {
        platforms: Some(&platforms),
        ..Restrictions::NONE
    };
    // Even the local owner, on the CLI.
    let owner = Principal::user("owner", Role::Master);
    assert_eq!(
        admit(&group_only, &Origin::local(), &owner),
        Admission {
            admitted: false,
            trace: vec![refuse(
                Check::Scopes,
                "limited to scopes [`group`]; this conversation has no scope (CLI, HTTP or MCP)"
            )],
        }
    );
    assert_eq!(
        admit(&qq_only, &Origin::local(), &owner),
        Admission {
            admitted: false,
            trace: vec![refuse(
                Check::Platforms,
                "limited to platforms [`qq`]; this conversation has no platform (CLI, HTTP or MCP)"
            )],
        }
    );

    // The call is refused at step 3, before anything asks.
    let world = World::cli();
    let mut tool = ToolFacts::new("group-admin", "pin_message");
    tool.restrictions = group_only;
    let why = "limited to scopes [`group`]; this conversation has no scope (CLI, HTTP or MCP)";
    let evaluation = evaluate(&world.call(tool));
    assert_eq!(
        evaluation.decision,
        refused(
            RefusalReason::NotAdmitted { why: why.into() },
            "group-admin.pin_message",
            &[]
        )
    );
    assert_eq!(evaluation.trace, vec![refuse(Check::Scopes, why)]);
    assert_eq!(
        evaluation.refusal().map(|r| r.message.as_str()),
        Some(
            "refused: not available here: limited to scopes [`group`]; this conversation has no scope (CLI, HTTP or MCP); do not retry"
        )
    );
}

#[test]
fn admission_platforms_and_scopes() {
    let platforms = strings(&["qq", "onebot"]);
    let scopes = strings(&["group", "channel"]);
    let restrictions = Restrictions {
        platforms: Some(&platforms),
        scopes: Some(&scopes),
        permissions: &[],
    };
    let user = Principal::user("42", Role::User);
    let cases = [
        (
            Origin::on("qq", ScopeKind::Group, "10001"),
            true,
            vec![
                pass(
                    Check::Platforms,
                    "the platform `qq` is one of [`qq`, `onebot`]",
                ),
                pass(
                    Check::Scopes,
                    "the scope `group` is one of [`group`, `channel`]",
                ),
            ],
        ),
        (
            Origin::on("qq", ScopeKind::Private, "42"),
            false,
            vec![
                pass(
                    Check::Platforms,
                    "the platform `qq` is one of [`qq`, `onebot`]",
                ),
                refuse(
                    Check::Scopes,
                    "limited to scopes [`group`, `channel`]; this conversation is a `private`",
                ),
            ],
        ),
        (
            Origin::on("discord", ScopeKind::Channel, "c9"),
            false,
            vec![
                refuse(
                    Check::Platforms,
                    "limited to platforms [`qq`, `onebot`]; this conversation is on `discord`",
                ),
                pass(
                    Check::Scopes,
                    "the scope `channel` is one of [`group`, `channel`]",
                ),
            ],
        ),
    ];
    for (origin, admitted, trace) in cases {
        assert_eq!(
            admit(&restrictions, &origin, &user),
            Admission { admitted, trace },
            "{origin:?}"
        );
    }
    // Nothing declared: admitted everywhere, with nothing to trace.
    assert_eq!(
        admit(
            &Restrictions::NONE,
            &Origin::local(),
            &Principal::anonymous()
        ),
        Admission {
            admitted: true,
            trace: vec![],
        }
    );
}

#[test]
fn admission_skills_use_the_same_restrictions() {
    let meta = SkillMeta {
        scopes: Some(strings(&["group"])),
        permissions: strings(&["platform(qq,admin)"]),
        ..SkillMeta::default()
    };
    let admin = Principal {
        platform_roles: strings(&["admin"]),
        ..Principal::user("42", Role::User)
    };
    let origin = Origin::on("qq", ScopeKind::Group, "10001");
    assert_eq!(
        admit(&Restrictions::of_skill(&meta), &origin, &admin),
        Admission {
            admitted: true,
            trace: vec![
                pass(Check::Scopes, "the scope `group` is one of [`group`]"),
                rule("platform(qq,admin)", true, "the sender is `admin` on `qq`"),
            ],
        }
    );
}

/// In a group the sender changes from turn to turn; a `role(master)` tool offered to the owner
/// in one turn is refused to the next sender, even though it is still loaded.
#[test]
fn admission_is_per_sender_group_loses_master_tool_next_turn() {
    let permissions = strings(&["role(master)"]);
    let mut tool = ToolFacts::new("group-admin", "set_welcome");
    tool.restrictions.permissions = &permissions;

    let turn1 = World::qq_group(Principal::user("owner", Role::Master)).consented("group-admin");
    assert_eq!(
        evaluate(&turn1.call(tool)),
        Evaluation {
            decision: asking(
                "group-admin.set_welcome",
                &[],
                None,
                Some((Approver::Person, &[AskReason::ActionTool], Reuse::ThisCall)),
            ),
            trace: vec![
                rule("role(master)", true, "the sender is `master`"),
                pass(
                    Check::Consent,
                    "package `group-admin` was allowed in this session"
                ),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                person_answers(false, true),
            ],
        }
    );

    // Same session, same loaded tool, next turn: another member speaks.
    let turn2 = World::qq_group(Principal::user("guest", Role::User)).consented("group-admin");
    let why = "the sender is `user`, below `master`";
    let evaluation = evaluate(&turn2.call(tool));
    assert_eq!(
        evaluation.decision,
        refused(
            RefusalReason::NotAdmitted { why: why.into() },
            "group-admin.set_welcome",
            &[]
        )
    );
    assert_eq!(evaluation.trace, vec![rule("role(master)", false, why)]);

    // An anonymous sender in the group is not the owner either.
    let turn3 = World::qq_group(Principal::anonymous());
    assert!(matches!(
        evaluate(&turn3.call(tool)).decision,
        Decision::Refuse(_)
    ));
}
