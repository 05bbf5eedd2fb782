//! The permission-rule evaluator, over rules parsed by [`quiver_package::rules`].
//!
//! Every rule of a list must hold; commas inside one rule mean any of; `*` matches any value
//! that is present (never a missing platform, conversation or user); `master` implies
//! `trusted` implies `user`; a rule that does not parse denies; an empty list passes.

use quiver_package::rules::{Role, Rule, parse_rule};
use serde::Serialize;

use crate::decision::{Check, DecisionKind, Step};
use crate::error::PolicyError;
use crate::identity::{Origin, Principal, ScopeKind};

/// Parses every rule of a list; the first rule that does not parse is the error.
pub fn parse_rules(texts: &[String]) -> Result<Vec<Rule>, PolicyError> {
    texts
        .iter()
        .map(|text| {
            parse_rule(text).map_err(|message| PolicyError::InvalidRule {
                rule: text.clone(),
                message,
            })
        })
        .collect()
}

/// The result of evaluating a rule list: whether it holds, and one step per rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RulesEvaluation {
    /// Whether every rule holds (true for an empty list).
    pub holds: bool,
    /// One step per rule, in order: `allow` when it holds, `refuse` when not, with why.
    pub trace: Vec<Step>,
}

/// Evaluates a `permissions:` list for a conversation (`origin`) and this turn's `sender`.
pub fn evaluate_rules(texts: &[String], origin: &Origin, sender: &Principal) -> RulesEvaluation {
    let trace: Vec<Step> = texts
        .iter()
        .map(|text| {
            let (holds, why) = match parse_rule(text) {
                Ok(rule) => evaluate_rule(&rule, origin, sender),
                Err(message) => (
                    false,
                    format!("syntax error: {message}; a rule that does not parse denies"),
                ),
            };
            let effect = if holds {
                DecisionKind::Allow
            } else {
                DecisionKind::Refuse
            };
            Step::new(Check::Rule(text.clone()), effect, why)
        })
        .collect();
    RulesEvaluation {
        holds: trace.iter().all(|s| s.effect == DecisionKind::Allow),
        trace,
    }
}

/// Evaluates one parsed rule: whether it holds, and why.
pub fn evaluate_rule(rule: &Rule, origin: &Origin, sender: &Principal) -> (bool, String) {
    match rule {
        Rule::Adapter(names) => match &origin.platform {
            None => (false, "the conversation has no platform".to_owned()),
            Some(platform) if any_of(names, platform) => {
                (true, format!("the platform `{platform}` is listed"))
            }
            Some(platform) => (false, format!("the platform `{platform}` is not listed")),
        },
        Rule::Group(ids) => scope_rule(ScopeKind::Group, ids, origin),
        Rule::Private(ids) => scope_rule(ScopeKind::Private, ids, origin),
        Rule::Channel(ids) => scope_rule(ScopeKind::Channel, ids, origin),
        Rule::User(ids) => match &sender.user_id {
            None => (false, "the sender is anonymous".to_owned()),
            Some(id) if any_of(ids, id) => (true, format!("the sender `{id}` is listed")),
            Some(id) => (false, format!("the sender `{id}` is not listed")),
        },
        Rule::Role(needed) => match sender.effective_role() {
            None => (false, "the sender is anonymous and has no role".to_owned()),
            Some(role) if role == *needed => (true, format!("the sender is `{}`", name(role))),
            Some(role) if role > *needed => (
                true,
                format!(
                    "the sender is `{}`, which includes `{}`",
                    name(role),
                    name(*needed)
                ),
            ),
            Some(role) => (
                false,
                format!("the sender is `{}`, below `{}`", name(role), name(*needed)),
            ),
        },
        Rule::Platform { adapter, perm } => platform_rule(adapter, perm, origin, sender),
    }
}

fn platform_rule(adapter: &str, perm: &str, origin: &Origin, sender: &Principal) -> (bool, String) {
    let Some(platform) = &origin.platform else {
        return (false, "the conversation has no platform".to_owned());
    };
    if adapter != "*" && adapter != platform {
        return (
            false,
            format!("the conversation is on `{platform}`, not `{adapter}`"),
        );
    }
    if sender.is_anonymous() {
        return (false, "the sender is anonymous".to_owned());
    }
    let roles = &sender.platform_roles;
    if perm == "*" {
        return match roles.first() {
            Some(role) => (true, format!("the sender is `{role}` on `{platform}`")),
            None => (false, format!("the sender has no role on `{platform}`")),
        };
    }
    if roles.iter().any(|r| r == perm) {
        return (true, format!("the sender is `{perm}` on `{platform}`"));
    }
    if perm == "admin" && roles.iter().any(|r| r == "owner") {
        return (
            true,
            format!("the sender is `owner` on `{platform}`, which includes `admin`"),
        );
    }
    if roles.is_empty() {
        (false, format!("the sender has no role on `{platform}`"))
    } else {
        (
            false,
            format!(
                "the sender is {} on `{platform}`, not `{perm}`",
                quoted(roles)
            ),
        )
    }
}

fn scope_rule(kind: ScopeKind, ids: &[String], origin: &Origin) -> (bool, String) {
    match &origin.scope {
        None => (false, format!("the conversation is not a {}", noun(kind))),
        Some(scope) if scope.kind != kind => (
            false,
            format!(
                "the conversation is a {}, not a {}",
                noun(scope.kind),
                noun(kind)
            ),
        ),
        Some(scope) if any_of(ids, &scope.id) => {
            (true, format!("{} `{}` is listed", noun(kind), scope.id))
        }
        Some(scope) => (
            false,
            format!("{} `{}` is not listed", noun(kind), scope.id),
        ),
    }
}

fn noun(kind: ScopeKind) -> &'static str {
    match kind {
        ScopeKind::Group => "group",
        ScopeKind::Private => "private chat",
        ScopeKind::Channel => "channel",
    }
}

fn name(role: Role) -> &'static str {
    match role {
        Role::Master => "master",
        Role::Trusted => "trusted",
        Role::User => "user",
    }
}

/// Whether `value` is one of `list` (`*` matches any value).
pub(crate) fn any_of(list: &[String], value: &str) -> bool {
    list.iter().any(|entry| entry == "*" || entry == value)
}

/// `[a, b]` with backticks, for messages.
pub(crate) fn quoted(list: &[String]) -> String {
    let inner: Vec<String> = list.iter().map(|s| format!("`{s}`")).collect();
    format!("[{}]", inner.join(", "))
}
