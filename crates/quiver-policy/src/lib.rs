//! Quiver's policy: pure decisions about who may call what, each returned as an
//! [`Evaluation`] — a [`Decision`] plus the trace of every [`Step`] that applied and why.
//!
//! The main types:
//! - [`evaluate_call`] over a [`CallRequest`] (tool facts, caller, [`Origin`], this turn's
//!   sender [`Principal`], [`SessionGrants`], [`TurnState`], [`ControlPlane`],
//!   [`OperatorSettings`], unattended or not, reachable [`Approvers`]): DESIGN.md §3 steps 2, 3
//!   and 5 of one call;
//! - [`admit`] over [`Restrictions`]: whether a tool, skill or prompt section is offered this
//!   turn;
//! - [`evaluate_rules`]: the `permissions:` rule language;
//! - [`classify`]: the dangerous-tool gate's list and suffix matching.
//!
//! Decisions are ordered by [`DecisionKind`] (`Allow < Ask < Park < Refuse < Unknown`); the
//! strictest wins. Nothing here does I/O, reads a clock or prints: the runtime passes every fact
//! in, and records what the decision asks it to (answers in [`SessionGrants`], refusals in
//! [`TurnState`]).
//!
//! ```
//! use quiver_package::rules::Role;
//! use quiver_policy::{
//!     CallRequest, Decision, Origin, Principal, RefusalReason, ScopeKind, SessionGrants,
//!     ToolFacts, TurnState, evaluate_call,
//! };
//!
//! // `群管理.group_kick` in QQ group 10001, asked by a group admin.
//! let origin = Origin::on("qq", ScopeKind::Group, "10001");
//! let sender = Principal {
//!     platform_roles: vec!["admin".into()],
//!     ..Principal::user("42", Role::User)
//! };
//! let rules = vec!["platform(qq,admin)".to_owned()];
//! let mut kick = ToolFacts::new("group-admin", "group_kick");
//! kick.restrictions.permissions = &rules;
//! let session = SessionGrants::new("s1");
//! let mut turn = TurnState::new();
//!
//! let first = evaluate_call(&CallRequest::new(kick, &origin, &sender, &session, &turn));
//! let Decision::Ask(ask) = &first.decision else { panic!("{first:?}") };
//! assert!(ask.is_dangerous() && ask.consent.is_some());
//!
//! // The admin says no: the tool and the `member` category are locked for the turn.
//! turn.record_refusal(&ask.refusal(quiver_policy::Denial::Approval));
//! let again = evaluate_call(&CallRequest::new(kick, &origin, &sender, &session, &turn));
//! let refusal = again.refusal().unwrap();
//! assert_eq!(refusal.reason, RefusalReason::ToolLocked);
//! assert_eq!(refusal.message, "refused: this tool was already refused in this turn; do not retry");
//! ```

pub mod admission;
pub mod call;
pub mod danger;
pub mod decision;
pub mod error;
pub mod identity;
pub mod permissions;
pub mod rules;
pub mod session;
pub mod turn;

pub use admission::{Admission, Restrictions, admit};
pub use call::{
    Approvers, CallRequest, Caller, ControlPlane, OperatorSettings, Presence, ToolFacts,
    Visibility, evaluate_call, offers_ask_user,
};
pub use danger::{BUILTIN_DANGEROUS, Danger, DangerousName, classify, name_matches};
pub use decision::{
    ApprovalQuestion, Approver, Ask, AskReason, Check, Decision, DecisionKind, Denial, Evaluation,
    Lockout, Refusal, RefusalReason, Reuse, Stage, Step,
};
pub use error::PolicyError;
pub use identity::{ConversationScope, Origin, Principal, ScopeKind};
pub use permissions::{PermissionLine, describe_permissions, open_ended_permissions};
pub use rules::{RulesEvaluation, evaluate_rules, parse_rules};
pub use session::SessionGrants;
pub use turn::{SkillTurnRules, ToolPattern, TurnState};
