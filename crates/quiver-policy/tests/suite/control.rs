//! The control plane: `emergency_stop` (nothing runs), `read_only` (only perception and
//! decision tools; dangerous refused without asking), `muted` (tools unaffected).

use quiver_package::tool::{Approval, Category, Risk, RiskCategory};
use quiver_policy::{Check, ControlPlane, Decision, Evaluation, RefusalReason, ToolFacts};

use super::common::{World, evaluate, pass, refuse, refused};

fn tool(name: &'static str, category: Category) -> ToolFacts<'static> {
    let mut tool = ToolFacts::new("bot", name);
    tool.category = category;
    tool.approval = Approval::Never;
    tool
}

const ALLOWED: &str = "package `bot` was allowed in this session";

#[test]
fn control_emergency_stop_nothing_runs() {
    let world = World::cli().consented("bot");
    for category in [Category::Perception, Category::Decision, Category::Action] {
        let mut request = world.call(tool("look", category));
        request.control = ControlPlane {
            emergency_stop: true,
            ..ControlPlane::default()
        };
        assert_eq!(
            evaluate(&request),
            Evaluation {
                decision: refused(RefusalReason::EmergencyStop, "bot.look", &[]),
                trace: vec![refuse(Check::ControlPlane, "emergency stop: nothing runs")],
            }
        );
    }
}

#[test]
fn control_read_only() {
    let world = World::cli().consented("bot");
    let read_only = ControlPlane {
        read_only: true,
        ..ControlPlane::default()
    };
    let mut declared = tool("rename_self", Category::Perception);
    declared.risk = Some(Risk::Dangerous);
    declared.risk_category = Some(RiskCategory::Identity);
    let cases = [
        (
            tool("look", Category::Perception),
            Evaluation {
                decision: Decision::Allow,
                trace: vec![
                    pass(
                        Check::ControlPlane,
                        "read-only: `perception` tools still run",
                    ),
                    pass(Check::Consent, ALLOWED),
                    pass(Check::ApprovalMode, "`never`: no confirmation"),
                ],
            },
        ),
        (
            tool("think", Category::Decision),
            Evaluation {
                decision: Decision::Allow,
                trace: vec![
                    pass(Check::ControlPlane, "read-only: `decision` tools still run"),
                    pass(Check::Consent, ALLOWED),
                    pass(Check::ApprovalMode, "`never`: no confirmation"),
                ],
            },
        ),
        (
            tool("post", Category::Action),
            Evaluation {
                decision: refused(RefusalReason::ReadOnly, "bot.post", &[]),
                trace: vec![refuse(
                    Check::ControlPlane,
                    "read-only: `action` tools do not run",
                )],
            },
        ),
        // Dangerous, even when it claims to only read: refused without asking.
        (
            declared,
            Evaluation {
                decision: refused(
                    RefusalReason::ReadOnly,
                    "bot.rename_self",
                    &[RiskCategory::Identity],
                ),
                trace: vec![refuse(
                    Check::ControlPlane,
                    "read-only: dangerous tools are refused without asking",
                )],
            },
        ),
        (
            tool("group_mute", Category::Perception),
            Evaluation {
                decision: refused(
                    RefusalReason::ReadOnly,
                    "bot.group_mute",
                    &[RiskCategory::Member],
                ),
                trace: vec![refuse(
                    Check::ControlPlane,
                    "read-only: dangerous tools are refused without asking",
                )],
            },
        ),
    ];
    for (tool, expected) in cases {
        let mut request = world.call(tool);
        request.control = read_only;
        assert_eq!(evaluate(&request), expected, "{}", tool.name);
    }
}

#[test]
fn control_muted_tools_unaffected() {
    let world = World::cli().consented("bot");
    let mut request = world.call(tool("post", Category::Action));
    request.control = ControlPlane {
        muted: true,
        ..ControlPlane::default()
    };
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: Decision::Allow,
            trace: vec![
                pass(Check::ControlPlane, "muted: tools are unaffected"),
                pass(Check::Consent, ALLOWED),
                pass(Check::ApprovalMode, "`never`: no confirmation"),
            ],
        }
    );
}
