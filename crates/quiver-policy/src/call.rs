//! The call decision: DESIGN.md §3 steps 2, 3 and 5 for one call, as one pure function.
//!
//! [`evaluate_call`] takes a [`CallRequest`] (the tool's facts, the caller, the origin and this
//! turn's sender, the session's grants, the turn's state, the control plane, the operator's
//! settings, whether the turn is unattended, and which approvers are reachable) and returns an
//! [`Evaluation`]. Checks run in pipeline order; a refusal (or an unknown name) ends the
//! evaluation; questions accumulate, and the decision is of the strictest kind among the steps.

use quiver_package::common::{FilesystemPermissions, Permissions};
use quiver_package::tool::{Approval, Category, Risk, RiskCategory, Tool};

use crate::admission::{Restrictions, admit};
use crate::danger::{DangerousName, classify};
use crate::decision::{
    ApprovalQuestion, Approver, Ask, AskReason, Check, Decision, DecisionKind, Evaluation, Lockout,
    Refusal, RefusalReason, Reuse, Step,
};
use crate::identity::{Origin, Principal};
use crate::session::SessionGrants;
use crate::turn::{PreApproval, TurnState};

/// Whether an item is part of its package's public face.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Visibility {
    /// `expose: true`.
    Exposed,
    /// Only the package's own agents, workflows and pages may call it.
    Private,
}

/// How the caller reaches the tool's name (the runtime knows; DESIGN.md §3, "Presence").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Presence {
    /// In the caller's tool list: pinned, loaded, resident, or the caller's own tool.
    Offered,
    /// Not in the list, but a direct call may load it: an admitted exposed item of this turn,
    /// a root tool of an opened package, a tool unlocked by an active skill, or a hidden tool
    /// by its exact name. The call loads it, then passes every check.
    Loadable,
    /// Anything else: "unknown tool", with no hint that it exists.
    Unloadable,
}

/// Who makes the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Caller<'a> {
    /// The session's model (the chat agent, or an agent of no package).
    Model,
    /// An agent of this package.
    Agent(&'a str),
    /// A workflow run of this package.
    Workflow(&'a str),
    /// A page of this package, used by a person in the console.
    Page(&'a str),
}

impl Caller<'_> {
    /// The package the caller belongs to (`None` for the session's model).
    pub fn package(&self) -> Option<&str> {
        match self {
            Caller::Model => None,
            Caller::Agent(p) | Caller::Workflow(p) | Caller::Page(p) => Some(p),
        }
    }

    fn word(&self) -> &'static str {
        match self {
            Caller::Model => "the model",
            Caller::Agent(_) => "agent",
            Caller::Workflow(_) => "workflow",
            Caller::Page(_) => "page",
        }
    }
}

static NO_PERMISSIONS: Permissions = Permissions {
    network: Vec::new(),
    filesystem: FilesystemPermissions {
        read: Vec::new(),
        write: Vec::new(),
    },
    shell: false,
    env: Vec::new(),
};

/// What the policy needs to know about the tool being called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFacts<'a> {
    /// Its package id.
    pub package: &'a str,
    /// Its local name.
    pub name: &'a str,
    /// `action`, `perception` or `decision`.
    pub category: Category,
    /// Its approval mode.
    pub approval: Approval,
    /// Its declared risk.
    pub risk: Option<Risk>,
    /// Its declared risk category.
    pub risk_category: Option<RiskCategory>,
    /// Its sandbox permissions.
    pub permission: &'a Permissions,
    /// Its package's ceiling (`permissions:` in `quiver.yaml`), what consent to the package
    /// grants; `None` reads as [`ToolFacts::permission`].
    pub package_permission: Option<&'a Permissions>,
    /// Exposed or private.
    pub visibility: Visibility,
    /// Never listed or found, callable by exact name.
    pub hidden: bool,
    /// `platforms`, `scopes` and `permissions`.
    pub restrictions: Restrictions<'a>,
}

impl<'a> ToolFacts<'a> {
    /// The defaults of `tool.yaml`: an exposed `action` tool, `on-risk`, no risk, no
    /// permissions, no restrictions.
    pub fn new(package: &'a str, name: &'a str) -> ToolFacts<'a> {
        ToolFacts {
            package,
            name,
            category: Category::Action,
            approval: Approval::OnRisk,
            risk: None,
            risk_category: None,
            permission: &NO_PERMISSIONS,
            package_permission: None,
            visibility: Visibility::Exposed,
            hidden: false,
            restrictions: Restrictions::NONE,
        }
    }

    /// The facts of a parsed tool of `package`.
    pub fn of_tool(package: &'a str, tool: &'a Tool) -> ToolFacts<'a> {
        ToolFacts {
            package,
            name: tool.name.as_str(),
            category: tool.category,
            approval: tool.approval,
            risk: tool.risk,
            risk_category: tool.risk_category,
            permission: &tool.permission,
            package_permission: None,
            visibility: if tool.expose {
                Visibility::Exposed
            } else {
                Visibility::Private
            },
            hidden: tool.hidden,
            restrictions: Restrictions::of_tool(tool),
        }
    }

    /// `<package>.<tool>`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.package, self.name)
    }
}

/// The control plane's switches, set by the operator.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(default)]
pub struct ControlPlane {
    /// Nothing runs.
    pub emergency_stop: bool,
    /// Only `perception` and `decision` tools run; dangerous tools are refused without asking.
    pub read_only: bool,
    /// The agent stays silent; tools are unaffected.
    pub muted: bool,
}

/// The operator's policy settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorSettings {
    /// Names added to the dangerous list (there is no way to remove a built-in one).
    pub extra_dangerous: Vec<DangerousName>,
    /// Whether `funds` tools may run at all (off by default: refused outright).
    pub funds_enabled: bool,
}

static DEFAULT_OPERATOR: OperatorSettings = OperatorSettings {
    extra_dangerous: Vec::new(),
    funds_enabled: false,
};

/// Which approvers can answer now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Approvers {
    /// A person in the session can be asked (terminal, chat, MCP elicitation). Ignored in
    /// unattended turns.
    pub person: bool,
    /// The console's queue of pending approvals is available.
    pub console: bool,
    /// A reviewing model is configured; it then answers ordinary approval questions (`on-risk`,
    /// `once`, `always`), never consent, `human` or the dangerous gate.
    pub model_reviewer: bool,
}

/// Everything one call decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    /// The tool.
    pub tool: ToolFacts<'a>,
    /// How the caller reaches it.
    pub presence: Presence,
    /// Who calls.
    pub caller: Caller<'a>,
    /// Where the conversation is.
    pub origin: &'a Origin,
    /// This turn's sender.
    pub sender: &'a Principal,
    /// The first string argument of the call, for `tool(prefix*)` patterns: the runtime takes
    /// the first property of the input schema, in declaration order, whose value is a string.
    pub first_string_argument: Option<&'a str>,
    /// The session's consents and `once` approvals.
    pub session: &'a SessionGrants,
    /// The turn's skill rules and lockouts.
    pub turn: &'a TurnState,
    /// The control plane.
    pub control: ControlPlane,
    /// The operator's settings.
    pub operator: &'a OperatorSettings,
    /// A turn with nobody present (a schedule, a workflow run).
    pub unattended: bool,
    /// Who can answer questions now.
    pub approvers: Approvers,
}

impl<'a> CallRequest<'a> {
    /// A call by the model of a tool in its list, in an attended turn with a person reachable,
    /// the control plane off and the operator's defaults.
    pub fn new(
        tool: ToolFacts<'a>,
        origin: &'a Origin,
        sender: &'a Principal,
        session: &'a SessionGrants,
        turn: &'a TurnState,
    ) -> CallRequest<'a> {
        CallRequest {
            tool,
            presence: Presence::Offered,
            caller: Caller::Model,
            origin,
            sender,
            first_string_argument: None,
            session,
            turn,
            control: ControlPlane::default(),
            operator: &DEFAULT_OPERATOR,
            unattended: false,
            approvers: Approvers {
                person: true,
                console: false,
                model_reviewer: false,
            },
        }
    }
}

/// Whether `ask_user` is offered: never in an unattended turn.
pub fn offers_ask_user(unattended: bool) -> bool {
    !unattended
}

/// Who may answer an approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// A person: the session's, or an operator in the console.
    Person,
    /// The configured approver: a reviewing model where configured, else a person.
    Any,
}

struct Builder {
    trace: Vec<Step>,
    lockout: Lockout,
}

impl Builder {
    fn pass(&mut self, check: Check, why: impl Into<String>) {
        self.trace.push(Step::new(check, DecisionKind::Allow, why));
    }

    fn ask(&mut self, check: Check, why: impl Into<String>) {
        self.trace.push(Step::new(check, DecisionKind::Ask, why));
    }

    fn refuse(mut self, check: Check, why: impl Into<String>, reason: RefusalReason) -> Evaluation {
        self.trace.push(Step::new(check, DecisionKind::Refuse, why));
        self.refused(reason)
    }

    /// A refusal whose refusing step is already in the trace.
    fn refused(self, reason: RefusalReason) -> Evaluation {
        Evaluation {
            decision: Decision::Refuse(Refusal::new(reason, self.lockout)),
            trace: self.trace,
        }
    }
}

/// Decides one call: steps 2 (visibility), 3 (admission and the turn's restrictions) and 5
/// (control plane, dangerous gate, package consent, approval mode) of DESIGN.md §3.
pub fn evaluate_call(req: &CallRequest<'_>) -> Evaluation {
    let tool = &req.tool;
    let id = tool.id();
    let danger = classify(
        tool.name,
        tool.risk,
        tool.risk_category,
        &req.operator.extra_dangerous,
    );
    let categories = danger
        .as_ref()
        .map(|d| d.categories.clone())
        .unwrap_or_default();
    let mut b = Builder {
        trace: Vec::new(),
        lockout: Lockout {
            tool: id.clone(),
            categories: categories.clone(),
        },
    };

    // Step 2: visibility.
    match req.presence {
        Presence::Unloadable => {
            b.trace.push(Step::new(
                Check::Presence,
                DecisionKind::Unknown,
                "the caller may not load this name",
            ));
            return Evaluation {
                decision: Decision::Unknown,
                trace: b.trace,
            };
        }
        Presence::Loadable => b.pass(
            Check::Presence,
            "a direct call of a tool the caller may load: the call loads it",
        ),
        Presence::Offered => {}
    }
    if tool.visibility == Visibility::Private {
        match req.caller.package() {
            Some(own) if own == tool.package => b.pass(
                Check::Private,
                format!(
                    "private to package `{}`, called by its own {}",
                    tool.package,
                    req.caller.word()
                ),
            ),
            _ => {
                return b.refuse(
                    Check::Private,
                    format!(
                        "private to package `{}`; {} is not one of its agents, workflows or pages",
                        tool.package,
                        req.caller.word()
                    ),
                    RefusalReason::Private {
                        package: tool.package.to_owned(),
                    },
                );
            }
        }
    }

    // Step 3: the turn's lockouts, admission, `disallowed-tools`.
    if req.turn.is_tool_locked(&id) {
        return b.refuse(
            Check::Lockout,
            format!("`{id}` was refused earlier in this turn: refused at once"),
            RefusalReason::ToolLocked,
        );
    }
    if let Some(category) = categories
        .iter()
        .copied()
        .find(|c| req.turn.is_category_locked(*c))
    {
        return b.refuse(
            Check::Lockout,
            format!(
                "a `{}` tool was refused earlier in this turn: refused at once",
                crate::decision::category_name(category)
            ),
            RefusalReason::CategoryLocked { category },
        );
    }
    let admission = admit(&tool.restrictions, req.origin, req.sender);
    let failure = admission.first_failure().map(|s| s.why.clone());
    b.trace.extend(admission.trace);
    if let Some(why) = failure {
        return b.refused(RefusalReason::NotAdmitted { why });
    }
    if let Some((skill, entry)) =
        req.turn
            .disallowing(tool.package, tool.name, req.first_string_argument)
    {
        return b.refuse(
            Check::Disallowed,
            format!("`{entry}` in the `disallowed-tools` of active skill `{skill}`"),
            RefusalReason::Disallowed {
                skill: skill.to_owned(),
                entry: entry.to_owned(),
            },
        );
    }

    // Step 5: control plane.
    if req.control.emergency_stop {
        return b.refuse(
            Check::ControlPlane,
            "emergency stop: nothing runs",
            RefusalReason::EmergencyStop,
        );
    }
    if req.control.read_only {
        if danger.is_some() {
            return b.refuse(
                Check::ControlPlane,
                "read-only: dangerous tools are refused without asking",
                RefusalReason::ReadOnly,
            );
        }
        if tool.category == Category::Action {
            return b.refuse(
                Check::ControlPlane,
                "read-only: `action` tools do not run",
                RefusalReason::ReadOnly,
            );
        }
        b.pass(
            Check::ControlPlane,
            format!(
                "read-only: `{}` tools still run",
                category_word(tool.category)
            ),
        );
    }
    if req.control.muted {
        b.pass(Check::ControlPlane, "muted: tools are unaffected");
    }

    // Step 5: the dangerous gate.
    let mut needs: Vec<(AskReason, Need)> = Vec::new();
    if let Some(danger) = &danger {
        let described = danger.describe(tool.name);
        if danger.categories.contains(&RiskCategory::Funds) && !req.operator.funds_enabled {
            return b.refuse(
                Check::DangerousGate,
                format!("{described}; `funds` is off unless the operator turns it on"),
                RefusalReason::FundsOff,
            );
        }
        b.ask(
            Check::DangerousGate,
            format!("{described}: every call needs a fresh human approval"),
        );
        needs.push((AskReason::Dangerous, Need::Person));
    }

    // Step 5: package consent.
    let mut consent = false;
    match req.caller.package() {
        Some(own) if own == tool.package => b.pass(
            Check::Consent,
            format!(
                "called from inside package `{own}` by its {}: no consent question",
                req.caller.word()
            ),
        ),
        _ => match req.session.consent_for(tool.package) {
            Some(true) => b.pass(
                Check::Consent,
                format!("package `{}` was allowed in this session", tool.package),
            ),
            Some(false) => {
                return b.refuse(
                    Check::Consent,
                    format!(
                        "the user refused package `{}` in this session",
                        tool.package
                    ),
                    RefusalReason::ConsentRefused {
                        package: tool.package.to_owned(),
                    },
                );
            }
            None => {
                b.ask(
                    Check::Consent,
                    format!(
                        "first call of package `{}` in this session: ask about the whole package",
                        tool.package
                    ),
                );
                consent = true;
            }
        },
    }

    // Step 5: skills' `allowed-tools`, then the approval mode.
    let pre_approved = match req.turn.pre_approval(
        tool.package,
        tool.name,
        req.first_string_argument,
    ) {
        Some(PreApproval::Granted { skill, entry }) if tool.approval == Approval::Human => {
            b.pass(
                Check::PreApproval,
                format!(
                    "`{entry}` of skill `{skill}` matches, but pre-approval never covers `human` tools"
                ),
            );
            false
        }
        Some(PreApproval::Granted { skill, entry }) => {
            let mut why = format!(
                "`{entry}` of skill `{skill}` pre-approves the approval-mode question for this turn"
            );
            if danger.is_some() {
                why.push_str("; the dangerous gate still asks");
            }
            if consent {
                why.push_str("; consent is still asked");
            }
            b.pass(Check::PreApproval, why);
            true
        }
        Some(PreApproval::OtherPackage {
            skill,
            package,
            entry,
        }) => {
            b.pass(
                Check::PreApproval,
                format!(
                    "`{entry}` of skill `{skill}` matches, but that skill is of package `{package}` and pre-approval never reaches another package's tools"
                ),
            );
            false
        }
        None => false,
    };
    let mut reuse = Reuse::ThisCall;
    match tool.approval {
        Approval::Never => b.pass(Check::ApprovalMode, "`never`: no confirmation"),
        Approval::OnRisk => {
            let mut reasons = Vec::new();
            let mut parts = Vec::new();
            if tool.category == Category::Action {
                reasons.push(AskReason::ActionTool);
                parts.push("an `action` tool".to_owned());
            }
            let open = crate::permissions::open_ended_permissions(tool.permission);
            if !open.is_empty() {
                reasons.push(AskReason::OpenEndedPermissions);
                parts.push(format!("open-ended permissions ({})", open.join(", ")));
            }
            if reasons.is_empty() {
                b.pass(
                    Check::ApprovalMode,
                    format!(
                        "`on-risk`: a `{}` tool whose permissions are concrete allowlists",
                        category_word(tool.category)
                    ),
                );
            } else if pre_approved {
                b.pass(
                    Check::ApprovalMode,
                    format!("`on-risk`: {}; pre-approved", parts.join(" with ")),
                );
            } else {
                b.ask(
                    Check::ApprovalMode,
                    format!("`on-risk`: {}", parts.join(" with ")),
                );
                needs.extend(reasons.into_iter().map(|r| (r, Need::Any)));
            }
        }
        Approval::Once => {
            if req.session.is_once_approved(&id) {
                b.pass(
                    Check::ApprovalMode,
                    format!(
                        "`once`: `{id}` was approved in session `{}`",
                        req.session.session
                    ),
                );
            } else if pre_approved {
                b.pass(
                    Check::ApprovalMode,
                    "`once`: pre-approved for this turn (not remembered)",
                );
            } else {
                b.ask(
                    Check::ApprovalMode,
                    format!(
                        "`once`: the first call of `{id}` in session `{}`",
                        req.session.session
                    ),
                );
                needs.push((AskReason::FirstCallInSession, Need::Any));
                reuse = Reuse::Session;
            }
        }
        Approval::Always => {
            if pre_approved {
                b.pass(Check::ApprovalMode, "`always`: pre-approved for this turn");
            } else {
                b.ask(
                    Check::ApprovalMode,
                    "`always`: every call goes to the configured approver",
                );
                needs.push((AskReason::EveryCall, Need::Any));
            }
        }
        Approval::Human => {
            b.ask(
                Check::ApprovalMode,
                "`human`: every call needs a person; no reuse, no model review, no owner bypass",
            );
            needs.push((AskReason::HumanOnly, Need::Person));
        }
    }

    if !consent && needs.is_empty() {
        return Evaluation {
            decision: Decision::Allow,
            trace: b.trace,
        };
    }

    // Who answers: the approvers reachable, the unattended rules.
    let dangerous = danger.is_some();
    let person = req.approvers.person && !req.unattended;
    let a_person = if person {
        Some(Approver::Person)
    } else if req.approvers.console {
        Some(Approver::Console)
    } else {
        None
    };
    let needs_person = needs.iter().any(|(_, n)| *n == Need::Person);
    let approval_who = if needs.is_empty() {
        None
    } else if needs_person {
        Some(a_person)
    } else if req.approvers.model_reviewer {
        Some(Some(Approver::ModelReviewer))
    } else {
        Some(a_person)
    };
    let consent_who = consent.then_some(a_person);
    let unattended = if req.unattended {
        "unattended turn: no person in the session; "
    } else {
        ""
    };
    if consent_who == Some(None) || approval_who == Some(None) {
        let (reason, why) = if dangerous {
            (
                RefusalReason::NeedsHumanApproval,
                "nobody can give a human approval (no person, no console)",
            )
        } else if consent_who == Some(None) || needs_person {
            (
                RefusalReason::NoPerson,
                "the question needs a person and none is reachable (no person, no console)",
            )
        } else {
            (
                RefusalReason::NoApprover,
                "no approver is reachable (no person, no console, no reviewing model): fails closed",
            )
        };
        return b.refuse(Check::Approver, format!("{unattended}{why}"), reason);
    }
    let consent_who = consent_who.flatten();
    let approval_who = approval_who.flatten();
    let ask = Ask {
        package: tool.package.to_owned(),
        tool: tool.name.to_owned(),
        risk_categories: categories,
        tool_permissions: crate::permissions::describe_permissions(tool.permission),
        package_permissions: crate::permissions::describe_permissions(
            tool.package_permission.unwrap_or(tool.permission),
        ),
        consent: consent_who,
        approval: approval_who.map(|who| ApprovalQuestion {
            who,
            reasons: needs.iter().map(|(r, _)| *r).collect(),
            reuse,
        }),
    };
    let whom = whom(consent_who, approval_who);
    let console = consent_who == Some(Approver::Console) || approval_who == Some(Approver::Console);
    if req.unattended && console {
        if let Caller::Workflow(_) = req.caller {
            b.trace.push(Step::new(
                Check::Approver,
                DecisionKind::Park,
                format!("{unattended}the workflow run waits for an operator ({whom})"),
            ));
            return Evaluation {
                decision: Decision::Park(ask),
                trace: b.trace,
            };
        }
        let reason = if dangerous {
            RefusalReason::NeedsHumanApproval
        } else {
            RefusalReason::NoPerson
        };
        return b.refuse(
            Check::Approver,
            format!("{unattended}only a workflow run can wait for the console"),
            reason,
        );
    }
    b.ask(Check::Approver, format!("{unattended}{whom}"));
    Evaluation {
        decision: Decision::Ask(ask),
        trace: b.trace,
    }
}

fn whom(consent: Option<Approver>, approval: Option<Approver>) -> String {
    let mut parts = Vec::new();
    if let Some(who) = consent {
        parts.push(format!("consent from {who}"));
    }
    if let Some(who) = approval {
        parts.push(format!("approval from {who}"));
    }
    parts.join("; ")
}

fn category_word(category: Category) -> &'static str {
    match category {
        Category::Action => "action",
        Category::Perception => "perception",
        Category::Decision => "decision",
    }
}
