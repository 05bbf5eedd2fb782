//! Turn restrictions: a skill's `disallowed-tools` removes tools and its `allowed-tools`
//! pre-approves (within limits) for the rest of the turn; a refusal is final for the turn.

use quiver_package::tool::{Approval, RiskCategory};
use quiver_policy::turn::ArgumentPattern;
use quiver_policy::{
    Approver, Approvers, AskReason, Check, Decision, Evaluation, RefusalReason, Reuse,
    SkillTurnRules, ToolFacts, ToolPattern, TurnState,
};

use super::common::{World, ask, asking, consent_ask, evaluate, pass, refuse, refused, strings};

#[test]
fn turn_tool_patterns() {
    let cases = [
        ("status", None, "status", ArgumentPattern::Any),
        ("git.commit", Some("git"), "commit", ArgumentPattern::Any),
        (
            "run(git diff:*)",
            None,
            "run",
            ArgumentPattern::Prefix("git diff".into()),
        ),
        (
            "git.run(git log*)",
            Some("git"),
            "run",
            ArgumentPattern::Prefix("git log".into()),
        ),
        ("run(*)", None, "run", ArgumentPattern::Any),
        (
            "run(status)",
            None,
            "run",
            ArgumentPattern::Exact("status".into()),
        ),
        (
            "Bash(git diff:*)",
            None,
            "Bash",
            ArgumentPattern::Prefix("git diff".into()),
        ),
    ];
    for (text, package, tool, argument) in cases {
        assert_eq!(
            ToolPattern::parse(text),
            ToolPattern {
                text: text.into(),
                package: package.map(str::to_owned),
                tool: tool.into(),
                argument,
            }
        );
    }
    let diff = ToolPattern::parse("run(git diff:*)");
    assert!(diff.matches("git", "run", Some("git diff HEAD~1")));
    assert!(!diff.matches("git", "run", Some("git push")));
    assert!(!diff.matches("git", "run", None));
    assert!(!diff.matches("git", "exec", Some("git diff")));
    let qualified = ToolPattern::parse("git.commit");
    assert!(qualified.matches("git", "commit", None));
    assert!(!qualified.matches("hg", "commit", None));
}

fn git_skill() -> SkillTurnRules {
    SkillTurnRules::new(
        "git/review",
        "git",
        &strings(&[
            "status",
            "git.commit",
            "run(git diff:*)",
            "shell.exec",
            "push_force",
            "remove_member",
        ]),
        &strings(&["git.reset", "run(rm *)"]),
    )
}

#[test]
fn turn_disallowed_tools_removed_then_restored() {
    let mut world = World::cli().consented("git");
    world.turn.activate_skill(git_skill());
    let reset = ToolFacts::new("git", "reset");
    assert!(world.turn.removes("git", "reset"));
    assert!(!world.turn.removes("git", "run"));
    assert_eq!(
        evaluate(&world.call(reset)),
        Evaluation {
            decision: refused(
                RefusalReason::Disallowed {
                    skill: "git/review".into(),
                    entry: "git.reset".into()
                },
                "git.reset",
                &[]
            ),
            trace: vec![refuse(
                Check::Disallowed,
                "`git.reset` in the `disallowed-tools` of active skill `git/review`"
            )],
        }
    );
    // An argument pattern removes only the calls it matches.
    let mut request = world.call(ToolFacts::new("git", "run"));
    request.first_string_argument = Some("rm -rf .git");
    assert_eq!(
        evaluate(&request).trace,
        vec![refuse(
            Check::Disallowed,
            "`run(rm *)` in the `disallowed-tools` of active skill `git/review`"
        )]
    );

    // The next turn restores it.
    world.turn = TurnState::new();
    assert!(!world.turn.removes("git", "reset"));
    assert_eq!(
        evaluate(&world.call(reset)).decision,
        asking(
            "git.reset",
            &[],
            None,
            Some((Approver::Person, &[AskReason::ActionTool], Reuse::ThisCall)),
        )
    );
}

/// `allowed-tools` skips the approval-mode question for the skill's own package only: never
/// `human`, never the dangerous gate, never consent, never another package.
#[test]
fn turn_allowed_tools_limits() {
    let allowed = "package `git` was allowed in this session";
    let mut world = World::cli().consented("git").consented("shell");
    world.turn.activate_skill(git_skill());
    let on_risk = ask(Check::ApprovalMode, "`on-risk`: an `action` tool");
    let person = ask(Check::Approver, "approval from the person in the session");
    let action = Some((
        Approver::Person,
        &[AskReason::ActionTool][..],
        Reuse::ThisCall,
    ));

    let mut human = ToolFacts::new("git", "push_force");
    human.approval = Approval::Human;
    let cases: Vec<(ToolFacts, Option<&str>, Evaluation)> = vec![
        (
            ToolFacts::new("git", "status"),
            None,
            Evaluation {
                decision: Decision::Allow,
                trace: vec![
                    pass(Check::Consent, allowed),
                    pass(
                        Check::PreApproval,
                        "`status` of skill `git/review` pre-approves the approval-mode question for this turn",
                    ),
                    pass(
                        Check::ApprovalMode,
                        "`on-risk`: an `action` tool; pre-approved",
                    ),
                ],
            },
        ),
        (
            ToolFacts::new("git", "run"),
            Some("git diff --stat"),
            Evaluation {
                decision: Decision::Allow,
                trace: vec![
                    pass(Check::Consent, allowed),
                    pass(
                        Check::PreApproval,
                        "`run(git diff:*)` of skill `git/review` pre-approves the approval-mode question for this turn",
                    ),
                    pass(
                        Check::ApprovalMode,
                        "`on-risk`: an `action` tool; pre-approved",
                    ),
                ],
            },
        ),
        // The argument pattern does not match: asks.
        (
            ToolFacts::new("git", "run"),
            Some("git push --force"),
            Evaluation {
                decision: asking("git.run", &[], None, action),
                trace: vec![
                    pass(Check::Consent, allowed),
                    on_risk.clone(),
                    person.clone(),
                ],
            },
        ),
        // Another package's tool.
        (
            ToolFacts::new("shell", "exec"),
            None,
            Evaluation {
                decision: asking("shell.exec", &[], None, action),
                trace: vec![
                    pass(
                        Check::Consent,
                        "package `shell` was allowed in this session",
                    ),
                    pass(
                        Check::PreApproval,
                        "`shell.exec` of skill `git/review` matches, but that skill is of package `git` and pre-approval never reaches another package's tools",
                    ),
                    on_risk.clone(),
                    person.clone(),
                ],
            },
        ),
        // `human`.
        (
            human,
            None,
            Evaluation {
                decision: asking(
                    "git.push_force",
                    &[],
                    None,
                    Some((Approver::Person, &[AskReason::HumanOnly], Reuse::ThisCall)),
                ),
                trace: vec![
                    pass(Check::Consent, allowed),
                    pass(
                        Check::PreApproval,
                        "`push_force` of skill `git/review` matches, but pre-approval never covers `human` tools",
                    ),
                    ask(
                        Check::ApprovalMode,
                        "`human`: every call needs a person; no reuse, no model review, no owner bypass",
                    ),
                    person.clone(),
                ],
            },
        ),
        // The dangerous gate.
        (
            ToolFacts::new("git", "remove_member"),
            None,
            Evaluation {
                decision: asking(
                    "git.remove_member",
                    &[RiskCategory::Member],
                    None,
                    Some((Approver::Person, &[AskReason::Dangerous], Reuse::ThisCall)),
                ),
                trace: vec![
                    ask(
                        Check::DangerousGate,
                        "`remove_member` matches the built-in dangerous name `remove_member` (`member`): every call needs a fresh human approval",
                    ),
                    pass(Check::Consent, allowed),
                    pass(
                        Check::PreApproval,
                        "`remove_member` of skill `git/review` pre-approves the approval-mode question for this turn; the dangerous gate still asks",
                    ),
                    pass(
                        Check::ApprovalMode,
                        "`on-risk`: an `action` tool; pre-approved",
                    ),
                    person.clone(),
                ],
            },
        ),
    ];
    for (tool, argument, expected) in cases {
        let mut request = world.call(tool);
        request.first_string_argument = argument;
        assert_eq!(evaluate(&request), expected, "{} {argument:?}", tool.name);
    }

    // Consent is never granted by pre-approval.
    world.session = quiver_policy::SessionGrants::new("s2");
    assert_eq!(
        evaluate(&world.call(ToolFacts::new("git", "status"))),
        Evaluation {
            decision: asking("git.status", &[], Some(Approver::Person), None),
            trace: vec![
                consent_ask("git"),
                pass(
                    Check::PreApproval,
                    "`status` of skill `git/review` pre-approves the approval-mode question for this turn; consent is still asked",
                ),
                pass(
                    Check::ApprovalMode,
                    "`on-risk`: an `action` tool; pre-approved"
                ),
                ask(Check::Approver, "consent from the person in the session"),
            ],
        }
    );

    // The next turn restores the question.
    world.session.grant_consent("git");
    world.turn = TurnState::new();
    assert_eq!(
        evaluate(&world.call(ToolFacts::new("git", "status"))).decision,
        asking("git.status", &[], None, action)
    );
}

/// A policy refusal is final: later calls of that tool in the same turn are refused at once,
/// without asking, even when an approver has become reachable; other tools are unaffected.
#[test]
fn turn_refusal_is_final() {
    let mut world = World::cli().consented("files");
    let touch = ToolFacts::new("files", "touch");
    let mut request = world.call(touch);
    request.approvers = Approvers::default();
    let first = evaluate(&request);
    assert_eq!(
        first.decision,
        refused(RefusalReason::NoApprover, "files.touch", &[])
    );
    world.turn.record(&first);

    assert_eq!(
        evaluate(&world.call(touch)),
        Evaluation {
            decision: refused(RefusalReason::ToolLocked, "files.touch", &[]),
            trace: vec![refuse(
                Check::Lockout,
                "`files.touch` was refused earlier in this turn: refused at once"
            )],
        }
    );
    // A non-dangerous refusal locks no category and no other tool.
    assert!(matches!(
        evaluate(&world.call(ToolFacts::new("files", "mkdir"))).decision,
        Decision::Ask(_)
    ));
    world.turn = TurnState::new();
    assert!(matches!(
        evaluate(&world.call(touch)).decision,
        Decision::Ask(_)
    ));
}

/// Two requests of one turn that ran at once: whatever order their states are taken in, every
/// lockout and every skill's restriction of both is kept, and a skill both activated keeps the
/// absorbing state's lists.
#[test]
fn turn_absorb_keeps_both_requests_lockouts_and_restrictions() {
    use quiver_policy::{Lockout, Refusal};
    let refusal = |tool: &str, categories: Vec<RiskCategory>| {
        Refusal::new(
            RefusalReason::NeedsHumanApproval,
            Lockout {
                tool: tool.into(),
                categories,
            },
        )
    };
    let skill = |id: &str, allowed: &[&str], disallowed: &[&str]| {
        SkillTurnRules::new(id, "pkg", &strings(allowed), &strings(disallowed))
    };
    let mut kick = TurnState::new();
    kick.record_refusal(&refusal("guild.kick_member", vec![RiskCategory::Member]));
    kick.activate_skill(skill("pkg/careful", &[], &["post"]));
    let mut pay = TurnState::new();
    pay.record_refusal(&refusal("bank.pay", vec![RiskCategory::Funds]));
    pay.activate_skill(skill("pkg/careful", &["post"], &[]));
    pay.activate_skill(skill("pkg/other", &[], &["delete"]));
    let cases: [(&TurnState, &TurnState, &str); 3] = [
        (&kick, &pay, "kick"),
        (&pay, &kick, "pay"),
        (&kick, &TurnState::new(), "alone"),
    ];
    for (into, from, name) in cases {
        let mut merged = into.clone();
        merged.absorb(from);
        for tool in ["guild.kick_member", "bank.pay"] {
            let expected = into.is_tool_locked(tool) || from.is_tool_locked(tool);
            assert_eq!(merged.is_tool_locked(tool), expected, "{name}: {tool}");
        }
        for category in [RiskCategory::Member, RiskCategory::Funds] {
            let expected = into.is_category_locked(category) || from.is_category_locked(category);
            assert_eq!(merged.is_category_locked(category), expected, "{name}");
        }
        for rules in into.skills() {
            assert!(merged.skills().contains(rules), "{name}: {}", rules.skill);
        }
        for rules in from.skills() {
            assert!(
                merged.skills().iter().any(|s| s.skill == rules.skill),
                "{name}: {}",
                rules.skill
            );
        }
        // Absorbing again changes nothing.
        let again = {
            let mut again = merged.clone();
            again.absorb(from);
            again
        };
        assert_eq!(again, merged, "{name}");
    }
    // A restriction only one request read is never lost, whichever absorbs which.
    let mut merged = kick.clone();
    merged.absorb(&pay);
    assert!(merged.disallowing("pkg", "delete", None).is_some());
    assert!(merged.disallowing("pkg", "post", None).is_some());
}
