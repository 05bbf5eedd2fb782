//! The operator's runtime-wide switches, kept in the store so they outlive a restart and reach
//! every process on the same database: the control plane and the packages switched off.
//! [`crate::Runtime`] applies them from the next turn; fronts without a runtime (the CLI) set
//! them here. Every operator action (a switch, a run cancelled, a session ended by hand)
//! leaves an `operator` audit record, and a session that ends, however it ends, leaves a
//! `skill_ended` record for each skill still active in it.

use std::collections::BTreeSet;

use quiver_policy::ControlPlane;
use quiver_store::{
    AuditDecision, AuditEntry, AuditKind, AuditStep, Decision, EndedSkill, Result, Store,
};
use serde_json::{Value, json};

/// The store key of the control plane.
const CONTROL_KEY: &str = "control";
/// The store key prefix of a package the operator switched off (`disabled:<package>`).
const DISABLED_PREFIX: &str = "disabled:";

/// The operator's switches as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorState {
    /// The control plane.
    pub control: ControlPlane,
    /// Packages switched off for everyone.
    pub disabled: BTreeSet<String>,
}

/// Reads the switches.
pub fn read(store: &dyn Store) -> Result<OperatorState> {
    Ok(from_values(&store.operator_values()?))
}

/// The switches the operator's values hold ([`Store::operator_values`]).
pub fn from_values(values: &std::collections::BTreeMap<String, Value>) -> OperatorState {
    let control = values
        .get(CONTROL_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let disabled = values
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .filter_map(|(k, _)| k.strip_prefix(DISABLED_PREFIX).map(str::to_owned))
        .collect();
    OperatorState { control, disabled }
}

/// Sets the control plane (audited); `by` names the operator.
pub fn set_control(store: &dyn Store, control: ControlPlane, by: &str) -> Result<()> {
    set_control_because(store, control, by, None)
}

/// Sets the control plane (audited with `why`, when given); `by` names the operator.
pub fn set_control_because(
    store: &dyn Store,
    control: ControlPlane,
    by: &str,
    why: Option<&str>,
) -> Result<()> {
    let value = serde_json::to_value(control).unwrap_or_default();
    store.set_operator_value(CONTROL_KEY, &value, by)?;
    record_because(store, Action::Control(control), by, why)
}

/// Switches `package` off (or back on) for everyone (audited); `by` names the operator.
pub fn set_enabled(store: &dyn Store, package: &str, enabled: bool, by: &str) -> Result<()> {
    store.set_operator_value(
        &format!("{DISABLED_PREFIX}{package}"),
        &Value::Bool(!enabled),
        by,
    )?;
    let action = if enabled {
        Action::Enable(package)
    } else {
        Action::Disable(package)
    };
    record(store, action, by)
}

/// Ends `session` by an operator's hand (audited, with its skills' ends). `true` if it was
/// active.
pub fn end_session_by(store: &dyn Store, session: &str, by: &str) -> Result<bool> {
    let ended = end_session(store, session, "session ended by an operator")?;
    if ended {
        record(store, Action::EndSession(session), by)?;
    }
    Ok(ended)
}

/// Ends `session`: each skill still active in it ends with a `skill_ended` record saying
/// `why`, then the session. `true` if it was active.
pub fn end_session(store: &dyn Store, session: &str, why: &str) -> Result<bool> {
    for skill in store.end_all_skills(session)? {
        skill_ended(
            store,
            &EndedSkill {
                session: session.to_owned(),
                skill,
            },
            why,
        )?;
    }
    store.end_session(session)
}

/// The `skill_ended` record of `ended`, saying `why`.
pub fn skill_ended(store: &dyn Store, ended: &EndedSkill, why: &str) -> Result<()> {
    let mut entry = AuditEntry::new(AuditKind::SkillEnded, ended.session.clone());
    entry.skill = Some(ended.skill.clone());
    entry.detail = Some(json!({ "why": why }));
    store.append_audit(&entry)?;
    Ok(())
}

/// An operator's action, as its audit record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'a> {
    /// The control plane was set.
    Control(ControlPlane),
    /// A package was switched on.
    Enable(&'a str),
    /// A package was switched off.
    Disable(&'a str),
    /// A workflow run was cancelled.
    CancelRun(&'a str),
    /// A run in doubt was retried: its step runs again.
    RetryRun(&'a str),
    /// A run in doubt was resolved: its step taken as done (`true`) or the run failed.
    ResolveRun(&'a str, bool),
    /// A session was ended by hand.
    EndSession(&'a str),
    /// Package consent was granted to a session (its id, the package) outside any call.
    GrantConsent(&'a str, &'a str),
    /// A pending card was answered in the console: the card, its session, the decision and
    /// the person's reason.
    Answer {
        /// The card's id.
        card: &'a str,
        /// The session of the call it asked about.
        session: &'a str,
        /// Approve or deny.
        decision: Decision,
        /// The reason the person gave, if any.
        note: Option<&'a str>,
    },
    /// An operator card was made: its id, the tool, the digest of the canonical arguments,
    /// the one session it is for (`None`: any) and when it expires (Unix ms).
    OperatorCard {
        /// The card's id.
        card: &'a str,
        /// The tool it approves a call of.
        tool: &'a str,
        /// The digest of the canonical arguments it approves.
        digest: &'a str,
        /// The only session it may be used in.
        session: Option<&'a str>,
        /// When it stops matching (Unix ms).
        expires_at: i64,
    },
    /// An operator card was revoked before it was used or expired: its id, the tool and the one
    /// session it was for (`None`: any).
    RevokeOperatorCard {
        /// The card's id.
        card: &'a str,
        /// The tool it approved a call of.
        tool: &'a str,
        /// The only session it could be used in.
        session: Option<&'a str>,
    },
    /// An operator signed in to the console.
    SignIn,
    /// A package draft was worked on in the console: `what` names the template it was made
    /// from, the file saved, or the digest installed.
    Draft {
        /// The draft's package id.
        package: &'a str,
        /// What was done.
        step: DraftStep,
        /// What it concerned.
        what: &'a str,
    },
}

/// What was done to a package draft in the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftStep {
    /// Made from a template.
    Create,
    /// A file written.
    Save,
    /// Installed (unsigned) through the install store's checks.
    Install,
}

impl Action<'_> {
    /// The action's word in the record (`control`, `enable`, `disable`, `cancel`,
    /// `end-session`).
    pub fn word(&self) -> &'static str {
        match self {
            Action::Control(_) => "control",
            Action::Enable(_) => "enable",
            Action::Disable(_) => "disable",
            Action::CancelRun(_) => "cancel",
            Action::RetryRun(_) => "retry",
            Action::ResolveRun(_, true) => "resolve-done",
            Action::ResolveRun(_, false) => "resolve-fail",
            Action::EndSession(_) => "end-session",
            Action::GrantConsent(..) => "grant-consent",
            Action::Answer {
                decision: Decision::Approve,
                ..
            } => "approve",
            Action::Answer {
                decision: Decision::Deny,
                ..
            } => "deny",
            Action::OperatorCard { .. } => "operator-card",
            Action::RevokeOperatorCard { .. } => "revoke-operator-card",
            Action::SignIn => "sign-in",
            Action::Draft { step, .. } => match step {
                DraftStep::Create => "draft-create",
                DraftStep::Save => "draft-save",
                DraftStep::Install => "draft-install",
            },
        }
    }

    /// What the action concerned, in words.
    fn reason(&self) -> String {
        match self {
            Action::Control(c) => format!("control plane set to {}", control_name(*c)),
            Action::Enable(p) => format!("package `{p}` switched on"),
            Action::Disable(p) => format!("package `{p}` switched off"),
            Action::CancelRun(run) => format!("run `{run}` cancelled"),
            Action::RetryRun(run) => format!("the step in doubt of run `{run}` run again"),
            Action::ResolveRun(run, true) => {
                format!("the step in doubt of run `{run}` taken as done")
            }
            Action::ResolveRun(run, false) => format!("run `{run}` in doubt failed"),
            Action::EndSession(s) => format!("session `{s}` ended"),
            Action::GrantConsent(s, p) => format!("package `{p}` allowed in session `{s}`"),
            Action::Answer { card, .. } => format!("card `{card}` {} in the console", self.word()),
            Action::OperatorCard { card, tool, .. } => {
                format!("operator card `{card}` made for one call of `{tool}`")
            }
            Action::RevokeOperatorCard { card, tool, .. } => {
                format!("operator card `{card}` for `{tool}` revoked before it was used")
            }
            Action::SignIn => "signed in to the console".into(),
            Action::Draft { package, what, .. } => {
                format!("draft `{package}`: {} `{what}` in the console", self.word())
            }
        }
    }
}

/// The control plane's state in one word, as `quiver control` names it.
pub fn control_name(control: ControlPlane) -> &'static str {
    if control.emergency_stop {
        "emergency-stop"
    } else if control.read_only {
        "read-only"
    } else if control.muted {
        "muted"
    } else {
        "normal"
    }
}

/// The session the records of runtime-wide operator actions (switches) are filed under.
pub const OPERATOR_SESSION: &str = "operator";

/// The audit record of an operator's `action`: kind `operator`, the operator as principal, the
/// action as its one decision, and what it concerned in `detail`; filed under the session it
/// concerned (a session ended, a run's session), else [`OPERATOR_SESSION`].
pub fn record(store: &dyn Store, action: Action<'_>, by: &str) -> Result<()> {
    record_because(store, action, by, None)
}

/// [`record`], with the reason the operator gave (`why` in its detail).
pub fn record_because(
    store: &dyn Store,
    action: Action<'_>,
    by: &str,
    why: Option<&str>,
) -> Result<()> {
    let session = match action {
        Action::EndSession(session)
        | Action::GrantConsent(session, _)
        | Action::Answer { session, .. } => session.to_owned(),
        Action::CancelRun(run) | Action::RetryRun(run) | Action::ResolveRun(run, _) => {
            crate::runtime::run_session_id(run)
        }
        Action::OperatorCard { session, .. } | Action::RevokeOperatorCard { session, .. } => {
            session.unwrap_or(OPERATOR_SESSION).to_owned()
        }
        Action::Control(_)
        | Action::Enable(_)
        | Action::Disable(_)
        | Action::SignIn
        | Action::Draft { .. } => OPERATOR_SESSION.into(),
    };
    let mut entry = AuditEntry::new(AuditKind::Operator, session);
    entry.principal = json!({ "user_id": by });
    entry.decisions.push(AuditDecision {
        step: AuditStep::Operator,
        decision: action.word().into(),
        reason: action.reason(),
    });
    entry.detail = Some(match action {
        Action::Control(control) => json!({ "control": control }),
        Action::Enable(package) | Action::Disable(package) => json!({ "package": package }),
        Action::CancelRun(run) | Action::RetryRun(run) | Action::ResolveRun(run, _) => {
            json!({ "run": run })
        }
        Action::EndSession(session) => json!({ "session": session }),
        Action::GrantConsent(session, package) => {
            json!({ "session": session, "package": package })
        }
        Action::Answer {
            card,
            decision,
            note,
            ..
        } => json!({ "card": card, "decision": decision, "note": note }),
        Action::OperatorCard {
            card,
            tool,
            digest,
            session,
            expires_at,
        } => json!({
            "card": card, "tool": tool, "arguments_digest": digest,
            "session": session, "expires_at": expires_at,
        }),
        Action::RevokeOperatorCard {
            card,
            tool,
            session,
        } => json!({ "card": card, "tool": tool, "session": session }),
        Action::SignIn => json!({ "front": "console" }),
        Action::Draft { package, what, .. } => {
            json!({ "front": "console", "package": package, "what": what })
        }
    });
    if let (Some(why), Some(Value::Object(detail))) = (why, entry.detail.as_mut()) {
        detail.insert("why".into(), Value::String(why.to_owned()));
    }
    store.append_audit(&entry)?;
    Ok(())
}
