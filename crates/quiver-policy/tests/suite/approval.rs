//! Approval modes: `never`, `on-risk` (the default), `once` (keyed on session and tool),
//! `always` (the configured approver), `human` (a person, every time).

use quiver_package::common::{FilesystemPermissions, Permissions};
use quiver_package::rules::Role;
use quiver_package::tool::{Approval, Category};
use quiver_policy::{
    Approver, Approvers, AskReason, Check, Decision, Evaluation, Principal, RefusalReason, Reuse,
    SessionGrants, ToolFacts, describe_permissions,
};

use super::common::{World, ask, ask_of, asking, evaluate, pass, refuse, refused, strings};

fn consented() -> World {
    World::cli().consented("files")
}

const ALLOWED: &str = "package `files` was allowed in this session";

#[test]
fn approval_never_asks_nobody() {
    let world = consented();
    let mut tool = ToolFacts::new("files", "touch");
    tool.approval = Approval::Never;
    assert_eq!(
        evaluate(&world.call(tool)),
        Evaluation {
            decision: Decision::Allow,
            trace: vec![
                pass(Check::Consent, ALLOWED),
                pass(Check::ApprovalMode, "`never`: no confirmation"),
            ],
        }
    );
}

/// `on-risk` confirms `action` tools and open-ended permissions; a reading or reasoning tool
/// whose every permission is a concrete allowlist passes.
#[test]
fn approval_on_risk_table() {
    let concrete = Permissions {
        network: strings(&["api.weather.cn", "*.example.com"]),
        filesystem: FilesystemPermissions {
            read: strings(&["/usr/share/zoneinfo"]),
            write: vec![],
        },
        env: strings(&["WEATHER_KEY"]),
        shell: false,
    };
    let any_host = Permissions {
        network: strings(&["*"]),
        ..Permissions::default()
    };
    let shell = Permissions {
        shell: true,
        ..Permissions::default()
    };
    let writes = Permissions {
        filesystem: FilesystemPermissions {
            read: vec![],
            write: strings(&["/tmp/out"]),
        },
        ..Permissions::default()
    };
    let reads_root = Permissions {
        filesystem: FilesystemPermissions {
            read: strings(&["/usr/share/zoneinfo", "/"]),
            write: vec![],
        },
        ..Permissions::default()
    };
    let loopback = Permissions {
        network: strings(&["api.weather.cn", "localhost"]),
        ..Permissions::default()
    };
    let none = Permissions::default();
    use AskReason::*;
    let cases: Vec<(Category, &Permissions, Option<&[AskReason]>, &str)> = vec![
        (
            Category::Action,
            &none,
            Some(&[ActionTool]),
            "`on-risk`: an `action` tool",
        ),
        (
            Category::Action,
            &shell,
            Some(&[ActionTool, OpenEndedPermissions]),
            "`on-risk`: an `action` tool with open-ended permissions (shell)",
        ),
        (
            Category::Perception,
            &concrete,
            None,
            "`on-risk`: a `perception` tool whose permissions are concrete allowlists",
        ),
        (
            Category::Decision,
            &none,
            None,
            "`on-risk`: a `decision` tool whose permissions are concrete allowlists",
        ),
        (
            Category::Perception,
            &any_host,
            Some(&[OpenEndedPermissions]),
            "`on-risk`: open-ended permissions (any host)",
        ),
        (
            Category::Perception,
            &shell,
            Some(&[OpenEndedPermissions]),
            "`on-risk`: open-ended permissions (shell)",
        ),
        (
            Category::Decision,
            &writes,
            Some(&[OpenEndedPermissions]),
            "`on-risk`: open-ended permissions (writes to [`/tmp/out`])",
        ),
        (
            Category::Perception,
            &reads_root,
            Some(&[OpenEndedPermissions]),
            "`on-risk`: open-ended permissions (reads of [`/`])",
        ),
        (
            Category::Perception,
            &loopback,
            Some(&[OpenEndedPermissions]),
            "`on-risk`: open-ended permissions (local addresses `localhost`)",
        ),
    ];
    let world = consented();
    for (category, permission, reasons, why) in cases {
        let mut tool = ToolFacts::new("files", "t");
        tool.category = category;
        tool.permission = permission;
        let expected = match reasons {
            None => Evaluation {
                decision: Decision::Allow,
                trace: vec![
                    pass(Check::Consent, ALLOWED),
                    pass(Check::ApprovalMode, why),
                ],
            },
            Some(reasons) => Evaluation {
                decision: {
                    let mut ask = ask_of(
                        "files.t",
                        &[],
                        None,
                        Some((Approver::Person, reasons, Reuse::ThisCall)),
                    );
                    // The card states the permissions; `describe_permissions` has its own table.
                    ask.tool_permissions = describe_permissions(permission);
                    ask.package_permissions = describe_permissions(permission);
                    Decision::Ask(ask)
                },
                trace: vec![
                    pass(Check::Consent, ALLOWED),
                    ask(Check::ApprovalMode, why),
                    ask(Check::Approver, "approval from the person in the session"),
                ],
            },
        };
        assert_eq!(evaluate(&world.call(tool)), expected, "{why}");
    }
}

/// zhin.js: `on-risk` with no approver reachable fails closed.
#[test]
fn approval_on_risk_without_approver_fails_closed() {
    let world = consented();
    let mut request = world.call(ToolFacts::new("files", "touch"));
    request.approvers = Approvers::default();
    let evaluation = evaluate(&request);
    assert_eq!(
        evaluation,
        Evaluation {
            decision: refused(RefusalReason::NoApprover, "files.touch", &[]),
            trace: vec![
                pass(Check::Consent, ALLOWED),
                ask(Check::ApprovalMode, "`on-risk`: an `action` tool"),
                refuse(
                    Check::Approver,
                    "no approver is reachable (no person, no console, no reviewing model): fails closed"
                ),
            ],
        }
    );
    assert_eq!(
        evaluation.refusal().map(|r| r.message.as_str()),
        Some("refused: nobody is available to approve this call; do not retry")
    );
}

/// zhin.js: `once` is keyed on (session, tool).
#[test]
fn approval_once_keyed_on_session_and_tool() {
    let mut world = consented();
    let mut notes = ToolFacts::new("files", "notes");
    notes.approval = Approval::Once;
    let mut todo = ToolFacts::new("files", "todo");
    todo.approval = Approval::Once;

    let first = evaluate(&world.call(notes));
    assert_eq!(
        first,
        Evaluation {
            decision: asking(
                "files.notes",
                &[],
                None,
                Some((
                    Approver::Person,
                    &[AskReason::FirstCallInSession],
                    Reuse::Session
                )),
            ),
            trace: vec![
                pass(Check::Consent, ALLOWED),
                ask(
                    Check::ApprovalMode,
                    "`once`: the first call of `files.notes` in session `s1`"
                ),
                ask(Check::Approver, "approval from the person in the session"),
            ],
        }
    );
    let Decision::Ask(question) = &first.decision else {
        panic!("{first:#?}");
    };
    world.session.record_granted(question);

    // Same session, same tool: no question.
    assert_eq!(
        evaluate(&world.call(notes)),
        Evaluation {
            decision: Decision::Allow,
            trace: vec![
                pass(Check::Consent, ALLOWED),
                pass(
                    Check::ApprovalMode,
                    "`once`: `files.notes` was approved in session `s1`"
                ),
            ],
        }
    );
    // Same session, another tool: asks.
    assert!(matches!(
        evaluate(&world.call(todo)).decision,
        Decision::Ask(_)
    ));
    // Another session, same tool: asks.
    world.session = SessionGrants::new("s2");
    world.session.grant_consent("files");
    assert_eq!(
        evaluate(&world.call(notes)).trace[1],
        ask(
            Check::ApprovalMode,
            "`once`: the first call of `files.notes` in session `s2`"
        )
    );
}

/// `always` goes to the configured approver: the reviewing model where one is configured,
/// else a person, else the console.
#[test]
fn approval_always_goes_to_the_configured_approver() {
    let world = consented();
    let mut tool = ToolFacts::new("files", "publish");
    tool.approval = Approval::Always;
    let cases = [
        (
            (true, false, true),
            Approver::ModelReviewer,
            "approval from the reviewing model",
        ),
        (
            (true, true, false),
            Approver::Person,
            "approval from the person in the session",
        ),
        (
            (false, true, false),
            Approver::Console,
            "approval from an operator in the console",
        ),
    ];
    for ((person, console, model_reviewer), who, why) in cases {
        let mut request = world.call(tool);
        request.approvers = Approvers {
            person,
            console,
            model_reviewer,
        };
        assert_eq!(
            evaluate(&request),
            Evaluation {
                decision: asking(
                    "files.publish",
                    &[],
                    None,
                    Some((who, &[AskReason::EveryCall], Reuse::ThisCall)),
                ),
                trace: vec![
                    pass(Check::Consent, ALLOWED),
                    ask(
                        Check::ApprovalMode,
                        "`always`: every call goes to the configured approver"
                    ),
                    ask(Check::Approver, why),
                ],
            },
            "{why}"
        );
    }
}

/// `human`: a person every call; no reuse, no model review, no owner bypass.
#[test]
fn approval_human_needs_a_person() {
    let mut world = World::cli().consented("bank");
    world.sender = Principal::user("owner", Role::Master);
    let mut tool = ToolFacts::new("bank", "close_account");
    tool.approval = Approval::Human;
    world.session.approve_once("bank.close_account");
    let mode = ask(
        Check::ApprovalMode,
        "`human`: every call needs a person; no reuse, no model review, no owner bypass",
    );
    let consent = pass(Check::Consent, "package `bank` was allowed in this session");

    let mut request = world.call(tool);
    request.approvers = Approvers {
        person: true,
        console: true,
        model_reviewer: true,
    };
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: asking(
                "bank.close_account",
                &[],
                None,
                Some((Approver::Person, &[AskReason::HumanOnly], Reuse::ThisCall)),
            ),
            trace: vec![
                consent.clone(),
                mode.clone(),
                ask(Check::Approver, "approval from the person in the session"),
            ],
        }
    );
    // Only a reviewing model: no person reachable → refused.
    request.approvers = Approvers {
        person: false,
        console: false,
        model_reviewer: true,
    };
    assert_eq!(
        evaluate(&request),
        Evaluation {
            decision: refused(RefusalReason::NoPerson, "bank.close_account", &[]),
            trace: vec![
                consent,
                mode,
                refuse(
                    Check::Approver,
                    "the question needs a person and none is reachable (no person, no console)"
                ),
            ],
        }
    );
}
