//! Fixtures shared by the table tests.

use quiver_package::rules::Role;
use quiver_package::tool::RiskCategory;
use quiver_policy::{
    ApprovalQuestion, Approver, Ask, AskReason, CallRequest, Check, Decision, DecisionKind,
    Evaluation, Lockout, OperatorSettings, Origin, Principal, Refusal, RefusalReason, Reuse,
    ScopeKind, SessionGrants, Step, ToolFacts, TurnState, evaluate_call,
};

/// A conversation and the state a call sees.
pub struct World {
    pub origin: Origin,
    pub sender: Principal,
    pub session: SessionGrants,
    pub turn: TurnState,
    pub operator: OperatorSettings,
}

impl World {
    /// The CLI: no platform, no scope, the local owner.
    pub fn cli() -> World {
        World::new(Origin::local(), Principal::user("owner", Role::Master))
    }

    /// QQ group `10001`, sender `user`.
    pub fn qq_group(sender: Principal) -> World {
        World::new(Origin::on("qq", ScopeKind::Group, "10001"), sender)
    }

    pub fn new(origin: Origin, sender: Principal) -> World {
        World {
            origin,
            sender,
            session: SessionGrants::new("s1"),
            turn: TurnState::new(),
            operator: OperatorSettings::default(),
        }
    }

    /// The same world with the package already consented.
    pub fn consented(mut self, package: &str) -> World {
        self.session.grant_consent(package);
        self
    }

    /// A call of `tool` by the model, attended, with a person reachable.
    pub fn call<'a>(&'a self, tool: ToolFacts<'a>) -> CallRequest<'a> {
        let mut request =
            CallRequest::new(tool, &self.origin, &self.sender, &self.session, &self.turn);
        request.operator = &self.operator;
        request
    }
}

/// Evaluates and checks the invariant: the decision is of the strictest kind among the steps.
pub fn evaluate(request: &CallRequest<'_>) -> Evaluation {
    let evaluation = evaluate_call(request);
    assert_strictest_wins(&evaluation);
    evaluation
}

pub fn assert_strictest_wins(evaluation: &Evaluation) {
    let strictest = evaluation
        .trace
        .iter()
        .map(|s| s.effect)
        .max()
        .unwrap_or(DecisionKind::Allow);
    assert_eq!(evaluation.decision.kind(), strictest, "{evaluation:#?}");
}

pub fn pass(check: Check, why: &str) -> Step {
    Step::new(check, DecisionKind::Allow, why)
}

pub fn ask(check: Check, why: &str) -> Step {
    Step::new(check, DecisionKind::Ask, why)
}

pub fn park(check: Check, why: &str) -> Step {
    Step::new(check, DecisionKind::Park, why)
}

pub fn refuse(check: Check, why: &str) -> Step {
    Step::new(check, DecisionKind::Refuse, why)
}

pub fn rule(text: &str, holds: bool, why: &str) -> Step {
    let effect = if holds {
        DecisionKind::Allow
    } else {
        DecisionKind::Refuse
    };
    Step::new(Check::Rule(text.to_owned()), effect, why)
}

/// A refusal decision locking `tool` and `categories`.
pub fn refused(reason: RefusalReason, tool: &str, categories: &[RiskCategory]) -> Decision {
    Decision::Refuse(Refusal::new(
        reason,
        Lockout {
            tool: tool.to_owned(),
            categories: categories.to_vec(),
        },
    ))
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The consent step of the model's first call of `package` in a session.
pub fn consent_ask(package: &str) -> Step {
    ask(
        Check::Consent,
        &format!("first call of package `{package}` in this session: ask about the whole package"),
    )
}

/// The usual tail: a person answers.
pub fn person_answers(consent: bool, approval: bool) -> Step {
    let mut parts = Vec::new();
    if consent {
        parts.push("consent from the person in the session");
    }
    if approval {
        parts.push("approval from the person in the session");
    }
    ask(Check::Approver, &parts.join("; "))
}

/// An ask decision for `tool` (`<package>.<tool>`).
pub fn asking(
    tool: &str,
    categories: &[RiskCategory],
    consent: Option<Approver>,
    approval: Option<(Approver, &[AskReason], Reuse)>,
) -> Decision {
    Decision::Ask(ask_of(tool, categories, consent, approval))
}

/// The questions of an ask or park decision.
pub fn ask_of(
    tool: &str,
    categories: &[RiskCategory],
    consent: Option<Approver>,
    approval: Option<(Approver, &[AskReason], Reuse)>,
) -> Ask {
    let (package, name) = tool.split_once('.').unwrap_or(("", tool));
    Ask {
        package: package.to_owned(),
        tool: name.to_owned(),
        risk_categories: categories.to_vec(),
        tool_permissions: Vec::new(),
        package_permissions: Vec::new(),
        consent,
        approval: approval.map(|(who, reasons, reuse)| ApprovalQuestion {
            who,
            reasons: reasons.to_vec(),
            reuse,
        }),
    }
}
