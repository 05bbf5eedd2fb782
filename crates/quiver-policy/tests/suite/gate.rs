//! The dangerous-tool gate: the built-in list with its categories, suffix matching of at least
//! two segments, `safe` never lowers a listed name, operators add names, `funds` is off by
//! default, and nothing skips the fresh human approval.

use quiver_package::common::Permissions;
use quiver_package::rules::Role;
use quiver_package::tool::{Approval, Category, Risk, RiskCategory};
use quiver_policy::danger::{DangerMatch, DangerSource};
use quiver_policy::{
    Approver, Approvers, AskReason, BUILTIN_DANGEROUS, Check, Danger, DangerousName, Denial,
    Evaluation, Principal, RefusalReason, Reuse, SkillTurnRules, ToolFacts, classify, name_matches,
};

use super::common::{World, ask, asking, evaluate, pass, refuse, refused, strings};

#[test]
fn dangerous_gate_builtin_list_with_categories() {
    use RiskCategory::*;
    let design: &[(RiskCategory, &[&str])] = &[
        (
            Member,
            &[
                "group_kick",
                "kick_member",
                "remove_member",
                "ban_member",
                "set_mute",
                "group_mute",
                "mute_member",
                "timeout_member",
                "set_admin",
                "set_group_admin",
                "set_group_card",
                "set_nickname",
            ],
        ),
        (
            Publish,
            &[
                "send_group_notice",
                "group_notice",
                "channel_post",
                "create_post",
                "send_channel_post",
                "create_comment",
                "send_comment",
            ],
        ),
        (
            Funds,
            &[
                "send_red_packet",
                "red_packet",
                "transfer_money",
                "send_transfer",
            ],
        ),
        (
            Identity,
            &[
                "set_self_nickname",
                "set_bot_nickname",
                "set_avatar",
                "set_bot_profile",
                "set_profile",
            ],
        ),
    ];
    let expected: Vec<(&str, RiskCategory)> = design
        .iter()
        .flat_map(|(category, names)| names.iter().map(move |n| (*n, *category)))
        .collect();
    assert_eq!(BUILTIN_DANGEROUS, expected.as_slice());
    for (name, category) in BUILTIN_DANGEROUS {
        // `classify` matches the entries as written: they must be normalized already.
        let normalized = name.trim().to_ascii_lowercase().replace('-', "_");
        assert_eq!(*name, normalized, "{name} is not written normalized");
        let danger = classify(name, None, None, &[]);
        assert_eq!(
            danger.map(|d| d.categories),
            Some(vec![*category]),
            "{name}"
        );
    }
}

#[test]
fn dangerous_gate_suffix_matching() {
    let cases = [
        ("discord_remove_member", "remove_member", true),
        ("remove_member", "remove_member", true),
        ("qq_group_kick", "group_kick", true),
        ("onebot_v11_set_group_card", "set_group_card", true),
        // `-` counts as `_`.
        ("discord-remove-member", "remove_member", true),
        // A suffix of one segment never matches: `member` alone.
        ("member", "remove_member", false),
        ("discord_member", "remove_member", false),
        // Only whole segments.
        ("xremove_member", "remove_member", false),
        ("remove_member_list", "remove_member", false),
        ("remove_members", "remove_member", false),
        // A one-segment entry (an operator's) matches the whole name only.
        ("kick", "kick", true),
        ("qq_kick", "kick", false),
    ];
    for (name, entry, matches) in cases {
        assert_eq!(name_matches(name, entry), matches, "{name} ~ {entry}");
    }
    assert_eq!(classify("member", None, None, &[]), None);
    assert_eq!(classify("get_member_list", None, None, &[]), None);
    assert_eq!(
        classify("discord_remove_member", None, None, &[]),
        Some(Danger {
            matches: vec![DangerMatch {
                source: DangerSource::BuiltIn {
                    entry: "remove_member".into()
                },
                category: Some(RiskCategory::Member),
            }],
            categories: vec![RiskCategory::Member],
        })
    );
}

#[test]
fn dangerous_gate_safe_cannot_lower_a_listed_name() {
    let danger = classify("qq_group_kick", Some(Risk::Safe), None, &[]);
    assert_eq!(
        danger.map(|d| d.categories),
        Some(vec![RiskCategory::Member])
    );
    // Nor can a declared category move it out of `funds`.
    let danger = classify(
        "send_red_packet",
        Some(Risk::Safe),
        Some(RiskCategory::Publish),
        &[],
    );
    assert_eq!(
        danger.map(|d| d.categories),
        Some(vec![RiskCategory::Publish, RiskCategory::Funds])
    );

    // And in a call: a `safe`, `never` tool with a listed name still needs a human.
    let world = World::qq_group(Principal::user("owner", Role::Master)).consented("qq");
    let mut tool = ToolFacts::new("qq", "group_kick");
    tool.risk = Some(Risk::Safe);
    tool.approval = Approval::Never;
    assert_eq!(
        evaluate(&world.call(tool)),
        Evaluation {
            decision: asking(
                "qq.group_kick",
                &[RiskCategory::Member],
                None,
                Some((Approver::Person, &[AskReason::Dangerous], Reuse::ThisCall)),
            ),
            trace: vec![
                ask(
                    Check::DangerousGate,
                    "`group_kick` matches the built-in dangerous name `group_kick` (`member`): every call needs a fresh human approval"
                ),
                pass(Check::Consent, "package `qq` was allowed in this session"),
                pass(Check::ApprovalMode, "`never`: no confirmation"),
                ask(Check::Approver, "approval from the person in the session"),
            ],
        }
    );
}

#[test]
fn dangerous_gate_declared_risk_uses_risk_category() {
    let cases = [
        (
            Some(Risk::Dangerous),
            Some(RiskCategory::Identity),
            Some(vec![RiskCategory::Identity]),
        ),
        (Some(Risk::Dangerous), None, Some(vec![])),
        // A declared category alone declares the tool dangerous (fail closed).
        (
            None,
            Some(RiskCategory::Publish),
            Some(vec![RiskCategory::Publish]),
        ),
        (None, None, None),
        (Some(Risk::Safe), None, None),
    ];
    for (risk, category, expected) in cases {
        assert_eq!(
            classify("rename_bot", risk, category, &[]).map(|d| d.categories),
            expected,
            "{risk:?} {category:?}"
        );
    }
}

#[test]
fn dangerous_gate_operators_add_names() {
    let extra = [
        DangerousName {
            name: "delete_repo".into(),
            category: None,
        },
        DangerousName {
            name: "pay_invoice".into(),
            category: Some(RiskCategory::Funds),
        },
    ];
    assert_eq!(
        classify("github_delete_repo", None, None, &extra),
        Some(Danger {
            matches: vec![DangerMatch {
                source: DangerSource::Operator {
                    entry: "delete_repo".into()
                },
                category: None,
            }],
            categories: vec![],
        })
    );
    assert_eq!(
        classify("pay_invoice", None, None, &extra).map(|d| d.categories),
        Some(vec![RiskCategory::Funds])
    );
    // Additions never remove a built-in name.
    assert!(classify("group_kick", None, None, &extra).is_some());
}

#[test]
fn dangerous_gate_funds_off_by_default() {
    let mut world = World::qq_group(Principal::user("owner", Role::Master)).consented("wallet");
    let tool = ToolFacts::new("wallet", "send_red_packet");
    let why = "`send_red_packet` matches the built-in dangerous names `send_red_packet` (`funds`), `red_packet` (`funds`); `funds` is off unless the operator turns it on";
    assert_eq!(
        evaluate(&world.call(tool)),
        Evaluation {
            decision: refused(
                RefusalReason::FundsOff,
                "wallet.send_red_packet",
                &[RiskCategory::Funds]
            ),
            trace: vec![refuse(Check::DangerousGate, why)],
        }
    );

    world.operator.funds_enabled = true;
    assert_eq!(
        evaluate(&world.call(tool)),
        Evaluation {
            decision: asking(
                "wallet.send_red_packet",
                &[RiskCategory::Funds],
                None,
                Some((
                    Approver::Person,
                    &[AskReason::Dangerous, AskReason::ActionTool],
                    Reuse::ThisCall
                )),
            ),
            trace: vec![
                ask(
                    Check::DangerousGate,
                    "`send_red_packet` matches the built-in dangerous names `send_red_packet` (`funds`), `red_packet` (`funds`): every call needs a fresh human approval"
                ),
                pass(
                    Check::Consent,
                    "package `wallet` was allowed in this session"
                ),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                ask(Check::Approver, "approval from the person in the session"),
            ],
        }
    );
}

/// `never`, pre-approval, model review and owner identity cannot skip the gate; without a
/// person or the console it is refused with the gate's own message.
#[test]
fn dangerous_gate_nothing_skips_it() {
    let mut world = World::qq_group(Principal::user("owner", Role::Master)).consented("qq");
    world.turn.activate_skill(SkillTurnRules::new(
        "qq/admin",
        "qq",
        &strings(&["group_kick"]),
        &[],
    ));
    let mut tool = ToolFacts::new("qq", "group_kick");
    tool.approval = Approval::Never;
    let gate = ask(
        Check::DangerousGate,
        "`group_kick` matches the built-in dangerous name `group_kick` (`member`): every call needs a fresh human approval",
    );
    let trace_head = vec![
        gate,
        pass(Check::Consent, "package `qq` was allowed in this session"),
        pass(
            Check::PreApproval,
            "`group_kick` of skill `qq/admin` pre-approves the approval-mode question for this turn; the dangerous gate still asks",
        ),
        pass(Check::ApprovalMode, "`never`: no confirmation"),
    ];

    // A reviewing model is configured and a person is present: the person answers.
    let mut request = world.call(tool);
    request.approvers = Approvers {
        person: true,
        console: false,
        model_reviewer: true,
    };
    let mut trace = trace_head.clone();
    trace.push(ask(
        Check::Approver,
        "approval from the person in the session",
    ));
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: asking(
                "qq.group_kick",
                &[RiskCategory::Member],
                None,
                Some((Approver::Person, &[AskReason::Dangerous], Reuse::ThisCall)),
            ),
            trace,
        }
    );

    // Only the console: an operator's approval of that exact call.
    request.approvers = Approvers {
        person: false,
        console: true,
        model_reviewer: true,
    };
    let mut trace = trace_head.clone();
    trace.push(ask(
        Check::Approver,
        "approval from an operator in the console",
    ));
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: asking(
                "qq.group_kick",
                &[RiskCategory::Member],
                None,
                Some((Approver::Console, &[AskReason::Dangerous], Reuse::ThisCall)),
            ),
            trace,
        }
    );

    // Only the reviewing model: nobody to ask.
    request.approvers = Approvers {
        person: false,
        console: false,
        model_reviewer: true,
    };
    let mut trace = trace_head;
    trace.push(refuse(
        Check::Approver,
        "nobody can give a human approval (no person, no console)",
    ));
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: refused(
                RefusalReason::NeedsHumanApproval,
                "qq.group_kick",
                &[RiskCategory::Member]
            ),
            trace,
        }
    );
    assert_eq!(
        evaluation.refusal().map(|r| r.message.as_str()),
        Some("refused; needs human approval; do not retry")
    );
}

/// A person says no (or does not answer): the model reads the gate's message, and the tool and
/// its category are locked for the rest of the turn.
#[test]
fn dangerous_gate_refusal_locks_tool_and_category() {
    let mut world = World::qq_group(Principal::user("owner", Role::Master)).consented("qq");
    let kick = ToolFacts::new("qq", "group_kick");
    let first = evaluate(&world.call(kick));
    let quiver_policy::Decision::Ask(ask) = &first.decision else {
        panic!("{first:#?}");
    };
    for denial in [Denial::Approval, Denial::TimedOut] {
        assert_eq!(
            quiver_policy::Decision::Refuse(ask.refusal(denial)),
            refused(
                RefusalReason::NeedsHumanApproval,
                "qq.group_kick",
                &[RiskCategory::Member]
            )
        );
    }
    world.turn.record_refusal(&ask.refusal(Denial::Approval));

    assert_eq!(
        evaluate(&world.call(kick)),
        Evaluation {
            decision: refused(
                RefusalReason::ToolLocked,
                "qq.group_kick",
                &[RiskCategory::Member]
            ),
            trace: vec![refuse(
                Check::Lockout,
                "`qq.group_kick` was refused earlier in this turn: refused at once"
            )],
        }
    );
    // Another `member` tool, even of another package: refused at once, without asking.
    let mute = ToolFacts::new("discord", "timeout_member");
    let locked = evaluate(&world.call(mute));
    assert_eq!(
        locked,
        Evaluation {
            decision: refused(
                RefusalReason::CategoryLocked {
                    category: RiskCategory::Member
                },
                "discord.timeout_member",
                &[RiskCategory::Member]
            ),
            trace: vec![refuse(
                Check::Lockout,
                "a `member` tool was refused earlier in this turn: refused at once"
            )],
        }
    );
    assert_eq!(
        locked.refusal().map(|r| r.message.as_str()),
        Some(
            "refused: a `member` tool was refused in this turn, so `member` tools are locked until the next turn; do not retry"
        )
    );
    // Another category is not locked; nor is a reading tool.
    assert!(matches!(
        evaluate(&world.call(ToolFacts::new("qq", "send_group_notice"))).decision,
        quiver_policy::Decision::Ask(_)
    ));
    let mut list = ToolFacts::new("qq", "get_member_list");
    list.category = Category::Perception;
    let permission = Permissions {
        network: strings(&["api.qq.com"]),
        ..Permissions::default()
    };
    list.permission = &permission;
    assert_eq!(
        evaluate(&world.call(list)).decision,
        quiver_policy::Decision::Allow
    );
    // The next turn restores everything.
    world.turn = quiver_policy::TurnState::new();
    assert!(matches!(
        evaluate(&world.call(kick)).decision,
        quiver_policy::Decision::Ask(_)
    ));
}
