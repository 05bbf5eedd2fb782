//! Decisions and their traces: [`Evaluation`], [`Decision`], [`Step`].
//!
//! Every check contributes a [`Step`] whose `effect` is a [`DecisionKind`]; the kinds are
//! ordered from the most permissive to the strictest, and an evaluation's decision is always of
//! the strictest kind among its steps.

use std::fmt;

use crate::permissions::PermissionLine;
use quiver_package::tool::RiskCategory;
use serde::Serialize;

/// The kinds of decision, ordered: the strictest wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// Run it.
    Allow,
    /// Run it once someone answers yes.
    Ask,
    /// Suspend the workflow run until an operator answers in the console.
    Park,
    /// Do not run it; final for the turn.
    Refuse,
    /// Answer "unknown tool", saying nothing more.
    Unknown,
}

/// What the runtime does with a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the questions of [`Ask`], in order (consent first, then approval); run only if
    /// every answer is yes, else give the model [`Ask::refusal`].
    Ask(Ask),
    /// An unattended workflow run waits for an operator to answer these questions in the
    /// console; the call returns the run id meanwhile.
    Park(Ask),
    /// Do not run it; give the model [`Refusal::message`] and record the refusal in the turn.
    Refuse(Refusal),
    /// Answer "unknown tool", with no hint that the tool exists.
    Unknown,
}

impl Decision {
    /// The kind of this decision.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Allow => DecisionKind::Allow,
            Decision::Ask(_) => DecisionKind::Ask,
            Decision::Park(_) => DecisionKind::Park,
            Decision::Refuse(_) => DecisionKind::Refuse,
            Decision::Unknown => DecisionKind::Unknown,
        }
    }
}

/// Who answers a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approver {
    /// The person in the session (terminal, chat, MCP elicitation).
    Person,
    /// An operator, through the console's queue of pending approvals.
    Console,
    /// The configured reviewing model (never for `human` tools, the dangerous gate or consent).
    ModelReviewer,
}

impl fmt::Display for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Approver::Person => "the person in the session",
            Approver::Console => "an operator in the console",
            Approver::ModelReviewer => "the reviewing model",
        })
    }
}

/// Why an approval card asks (shown on the card).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskReason {
    /// The dangerous gate: every call needs a fresh human approval.
    Dangerous,
    /// `on-risk`: the tool changes the world (`action`, or no category).
    ActionTool,
    /// `on-risk`: the tool's permissions are open-ended (any host, shell, writes).
    OpenEndedPermissions,
    /// `once`: the first call of this tool in this session.
    FirstCallInSession,
    /// `always`: every call goes to the approver.
    EveryCall,
    /// `human`: every call needs a person.
    HumanOnly,
}

impl fmt::Display for AskReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AskReason::Dangerous => "a dangerous tool: every call needs a fresh human approval",
            AskReason::ActionTool => "the tool changes things (`action`)",
            AskReason::OpenEndedPermissions => "the tool has open-ended permissions",
            AskReason::FirstCallInSession => "the first call of this tool in this session",
            AskReason::EveryCall => "every call of this tool is approved",
            AskReason::HumanOnly => "every call of this tool needs a person",
        })
    }
}

/// Whether a yes may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reuse {
    /// The answer covers this call only.
    ThisCall,
    /// `once`: a yes covers the tool for the rest of the session (keyed on session and tool);
    /// record it with [`crate::SessionGrants::record_granted`].
    Session,
}

/// The approval question of an [`Ask`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalQuestion {
    /// Who must answer.
    pub who: Approver,
    /// Why it asks, in check order.
    pub reasons: Vec<AskReason>,
    /// Whether a yes may be reused.
    pub reuse: Reuse,
}

/// The questions of an [`Decision::Ask`] or [`Decision::Park`], with the approval card's facts.
/// The runtime adds the exact arguments to the card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ask {
    /// The tool's package.
    pub package: String,
    /// The tool's local name.
    pub tool: String,
    /// The tool's risk categories (empty unless it is dangerous), shown on every card.
    pub risk_categories: Vec<RiskCategory>,
    /// The tool's permissions in words, open-ended ones flagged: the approval card shows them.
    pub tool_permissions: Vec<PermissionLine>,
    /// The package's permissions (its ceiling) in words: the consent card shows them, since a
    /// yes lets the model use every tool of the package.
    pub package_permissions: Vec<PermissionLine>,
    /// Ask about the whole package first (package consent), and whom.
    pub consent: Option<Approver>,
    /// Then ask for approval of this call.
    pub approval: Option<ApprovalQuestion>,
}

/// How a question of an [`Ask`] ended without a yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Denial {
    /// The user refused the package (record it with [`crate::SessionGrants::refuse_consent`]).
    Consent,
    /// The approver said no.
    Approval,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody could answer: no person was there to ask, the question was dismissed, or the
    /// channel failed.
    Unanswered,
    /// Only a person may answer, and this turn's sender is anonymous.
    Anonymous,
}

impl Ask {
    /// `<package>.<tool>`.
    pub fn tool_id(&self) -> String {
        format!("{}.{}", self.package, self.tool)
    }

    /// Whether the approval question carries the dangerous gate.
    pub fn is_dangerous(&self) -> bool {
        self.approval
            .as_ref()
            .is_some_and(|a| a.reasons.contains(&AskReason::Dangerous))
    }

    /// The refusal to give the model (and record in the turn) when a question ends without a
    /// yes. A dangerous tool's refusal reads "refused; needs human approval; do not retry" and
    /// locks its risk categories too.
    pub fn refusal(&self, denial: Denial) -> Refusal {
        let reason = match denial {
            Denial::Consent => RefusalReason::ConsentRefused {
                package: self.package.clone(),
            },
            Denial::Anonymous => RefusalReason::AnonymousSender,
            _ if self.is_dangerous() => RefusalReason::NeedsHumanApproval,
            Denial::Approval => RefusalReason::Declined,
            Denial::TimedOut => RefusalReason::TimedOut,
            Denial::Unanswered => RefusalReason::Unanswered,
        };
        Refusal::new(
            reason,
            Lockout {
                tool: self.tool_id(),
                categories: self.risk_categories.clone(),
            },
        )
    }
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum RefusalReason {
    /// A private item, and the caller is not the package's own agent, workflow or page.
    Private {
        /// The package it belongs to.
        package: String,
    },
    /// The origin or this turn's sender does not meet its `platforms`, `scopes` or
    /// `permissions`.
    NotAdmitted {
        /// The first restriction not met.
        why: String,
    },
    /// An active skill's `disallowed-tools` removed it for this turn.
    Disallowed {
        /// The skill.
        skill: String,
        /// The matching entry.
        entry: String,
    },
    /// The tool was refused earlier in this turn.
    ToolLocked,
    /// A dangerous tool of this risk category was refused earlier in this turn.
    CategoryLocked {
        /// The locked category.
        category: RiskCategory,
    },
    /// The operator stopped everything.
    EmergencyStop,
    /// Read-only mode: only `perception` and `decision` tools run, dangerous tools never.
    ReadOnly,
    /// A `funds` tool while the operator has not turned `funds` on.
    FundsOff,
    /// The user refused the package in this session.
    ConsentRefused {
        /// The package.
        package: String,
    },
    /// No approver is reachable for an approval question (`on-risk` fails closed).
    NoApprover,
    /// The question needs a person (consent, `human`) and none is present.
    NoPerson,
    /// The dangerous gate: refused, timed out, or nobody to ask.
    NeedsHumanApproval,
    /// The approver said no.
    Declined,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody could answer (no person to ask, the question dismissed, the channel failed).
    Unanswered,
    /// Only a person may answer (a dangerous or `human` tool), and the sender is anonymous.
    AnonymousSender,
    /// An operator's hook blocked the call.
    HookBlocked {
        /// The hook's name.
        hook: String,
        /// The reason it gave.
        why: String,
    },
    /// An operator's hook failed (error, crash, timeout, unreadable answer): hooks fail closed.
    HookFailed {
        /// The hook's name.
        hook: String,
        /// What went wrong.
        why: String,
    },
    /// The sandbox refused an action the package's permissions do not declare (a host not in
    /// `network`, say).
    SandboxDenied {
        /// What the sandbox refused, e.g. "network access to HOST denied: not in the
        /// package's permissions".
        why: String,
    },
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::Private { package } => {
                write!(
                    f,
                    "this tool is private to package `{package}` and only its own agents, workflows and pages may call it"
                )
            }
            RefusalReason::NotAdmitted { why } => write!(f, "not available here: {why}"),
            RefusalReason::Disallowed { skill, entry } => {
                write!(
                    f,
                    "the active skill `{skill}` removed this tool for this turn (`{entry}`)"
                )
            }
            RefusalReason::ToolLocked => f.write_str("this tool was already refused in this turn"),
            RefusalReason::CategoryLocked { category } => write!(
                f,
                "a `{}` tool was refused in this turn, so `{}` tools are locked until the next turn",
                category_name(*category),
                category_name(*category)
            ),
            RefusalReason::EmergencyStop => f.write_str("the operator stopped all tools"),
            RefusalReason::ReadOnly => f.write_str(
                "the runtime is read-only: only perception and decision tools run, dangerous tools never",
            ),
            RefusalReason::FundsOff => {
                f.write_str("tools that move money (`funds`) are turned off by the operator")
            }
            RefusalReason::ConsentRefused { package } => {
                write!(f, "the user did not allow package `{package}` in this session")
            }
            RefusalReason::NoApprover => f.write_str("nobody is available to approve this call"),
            RefusalReason::NoPerson => {
                f.write_str("this call needs a person's answer and no person is present")
            }
            RefusalReason::NeedsHumanApproval => f.write_str("needs human approval"),
            RefusalReason::Declined => f.write_str("the approver declined this call"),
            RefusalReason::TimedOut => f.write_str("nobody answered in time"),
            RefusalReason::Unanswered => f.write_str("nobody answered the question"),
            RefusalReason::AnonymousSender => f.write_str(
                "needs a person's approval, and an anonymous caller cannot give it; connect with a bearer token",
            ),
            RefusalReason::HookBlocked { hook, why } => {
                write!(f, "the operator's hook `{hook}` blocked this call: {why}")
            }
            RefusalReason::HookFailed { hook, why } => write!(
                f,
                "the operator's hook `{hook}` failed ({why}), and a failing hook blocks the call"
            ),
            RefusalReason::SandboxDenied { why } => f.write_str(why),
        }
    }
}

/// The name of a risk category as written in `tool.yaml`.
pub fn category_name(category: RiskCategory) -> &'static str {
    match category {
        RiskCategory::Member => "member",
        RiskCategory::Publish => "publish",
        RiskCategory::Funds => "funds",
        RiskCategory::Identity => "identity",
    }
}

/// What a refusal locks for the rest of the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lockout {
    /// The refused tool, `<package>.<tool>`: later calls are refused at once.
    pub tool: String,
    /// The risk categories of a refused dangerous tool: later calls of any tool in them are
    /// refused at once.
    pub categories: Vec<RiskCategory>,
}

/// A final refusal: the call does not run, the model is told not to retry, and the turn
/// records the lockout ([`crate::TurnState::record_refusal`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Why.
    pub reason: RefusalReason,
    /// What the model reads: `refused: <reason>; do not retry`, or for the dangerous gate
    /// `refused; needs human approval; do not retry`.
    pub message: String,
    /// What is locked for the rest of the turn.
    pub lockout: Lockout,
}

impl Refusal {
    /// A refusal with its message derived from `reason`.
    pub fn new(reason: RefusalReason, lockout: Lockout) -> Refusal {
        let message = match reason {
            RefusalReason::NeedsHumanApproval => {
                "refused; needs human approval; do not retry".to_owned()
            }
            _ => format!("refused: {reason}; do not retry"),
        };
        Refusal {
            reason,
            message,
            lockout,
        }
    }
}

/// The pipeline step a check belongs to (DESIGN.md §3, "A call").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Step 2: what the caller may load, and private items.
    Visibility,
    /// Step 3: admission and the turn's restrictions. (Argument validation, step 4, comes
    /// after this stage and before the next.)
    Admission,
    /// Step 5: control plane, dangerous gate, package consent, approval mode.
    Authorization,
}

/// A check of the policy, named in a [`Step`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Whether the caller may reach the name at all.
    Presence,
    /// A private item's caller.
    Private,
    /// Lockouts after a refusal in this turn.
    Lockout,
    /// The item's `platforms`.
    Platforms,
    /// The item's `scopes`.
    Scopes,
    /// One permission rule, as written.
    Rule(String),
    /// An active skill's `disallowed-tools`.
    Disallowed,
    /// The control plane (`emergency_stop`, `read_only`, `muted`).
    ControlPlane,
    /// The dangerous-tool gate.
    DangerousGate,
    /// Package consent.
    Consent,
    /// An active skill's `allowed-tools`.
    PreApproval,
    /// The tool's approval mode.
    ApprovalMode,
    /// Who can answer the questions (unattended turns, reachable approvers).
    Approver,
}

impl Check {
    /// The pipeline step the check belongs to.
    pub fn stage(&self) -> Stage {
        match self {
            Check::Presence | Check::Private => Stage::Visibility,
            Check::Lockout
            | Check::Platforms
            | Check::Scopes
            | Check::Rule(_)
            | Check::Disallowed => Stage::Admission,
            Check::ControlPlane
            | Check::DangerousGate
            | Check::Consent
            | Check::PreApproval
            | Check::ApprovalMode
            | Check::Approver => Stage::Authorization,
        }
    }
}

/// One check that applied, what it contributed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The check.
    pub check: Check,
    /// What it contributes to the decision (`allow` when it passes).
    pub effect: DecisionKind,
    /// Why, in words.
    pub why: String,
}

impl Step {
    /// A step.
    pub fn new(check: Check, effect: DecisionKind, why: impl Into<String>) -> Step {
        Step {
            check,
            effect,
            why: why.into(),
        }
    }
}

/// A decision and the trace of every check that applied, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    /// The decision, of the strictest kind among the steps.
    pub decision: Decision,
    /// The checks that applied, in pipeline order.
    pub trace: Vec<Step>,
}

impl Evaluation {
    /// The refusal, when the decision is one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.decision {
            Decision::Refuse(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// The stage of the step that decided a refusal or an unknown name, so the runtime can
    /// answer step 2 and 3 refusals before validating the arguments (step 4).
    pub fn deciding_stage(&self) -> Option<Stage> {
        let kind = self.decision.kind();
        if kind < DecisionKind::Refuse {
            return None;
        }
        self.trace
            .iter()
            .find(|s| s.effect == kind)
            .map(|s| s.check.stage())
    }
}
