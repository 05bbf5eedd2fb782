//! Admission: whether a tool, skill or prompt section is offered in this turn.
//!
//! An item is admitted only if the origin and **this turn's sender** meet all of its
//! `platforms`, `scopes` and `permissions`. An origin with no platform or scope (CLI, HTTP, MCP)
//! never meets a `platforms` or `scopes` restriction. Admission is computed afresh every turn:
//! nothing loaded, pinned or active earlier bypasses it.

use quiver_package::prompt::PromptSection;
use quiver_package::skill::SkillMeta;
use quiver_package::tool::Tool;
use serde::Serialize;

use crate::decision::{Check, DecisionKind, Step};
use crate::identity::{Origin, Principal};
use crate::rules::{any_of, evaluate_rules, quoted};

/// An item's restrictions, borrowed from its tool, skill or section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Restrictions<'a> {
    /// `platforms:` (adapter names), when declared.
    pub platforms: Option<&'a [String]>,
    /// `scopes:` (`group`, `private`, `channel`), when declared.
    pub scopes: Option<&'a [String]>,
    /// `permissions:` rules (empty passes).
    pub permissions: &'a [String],
}

impl<'a> Restrictions<'a> {
    /// No restrictions: admitted everywhere.
    pub const NONE: Restrictions<'static> = Restrictions {
        platforms: None,
        scopes: None,
        permissions: &[],
    };

    /// A tool's restrictions.
    pub fn of_tool(tool: &'a Tool) -> Restrictions<'a> {
        Restrictions {
            platforms: tool.platforms.as_deref(),
            scopes: tool.scopes.as_deref(),
            permissions: &tool.permissions,
        }
    }

    /// A skill's restrictions.
    pub fn of_skill(meta: &'a SkillMeta) -> Restrictions<'a> {
        Restrictions {
            platforms: meta.platforms.as_deref(),
            scopes: meta.scopes.as_deref(),
            permissions: &meta.permissions,
        }
    }

    /// A prompt section's restrictions (sections have no `permissions`).
    pub fn of_section(section: &'a PromptSection) -> Restrictions<'a> {
        Restrictions {
            platforms: section.platforms.as_deref(),
            scopes: section.scopes.as_deref(),
            permissions: &[],
        }
    }
}

/// Whether an item is admitted, with one step per declared restriction (none when nothing is
/// declared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Admission {
    /// Whether the origin and sender meet every restriction.
    pub admitted: bool,
    /// One step for `platforms`, one for `scopes`, one per permission rule, when declared.
    pub trace: Vec<Step>,
}

impl Admission {
    /// The first restriction not met, in words.
    pub fn first_failure(&self) -> Option<&Step> {
        self.trace.iter().find(|s| s.effect != DecisionKind::Allow)
    }
}

/// Decides whether an item with `restrictions` is admitted for `origin` and this turn's
/// `sender`.
pub fn admit(restrictions: &Restrictions<'_>, origin: &Origin, sender: &Principal) -> Admission {
    let mut trace = Vec::new();
    if let Some(platforms) = restrictions.platforms {
        let (holds, why) = match &origin.platform {
            None => (
                false,
                format!(
                    "limited to platforms {}; this conversation has no platform (CLI, HTTP or MCP)",
                    quoted(platforms)
                ),
            ),
            Some(platform) if any_of(platforms, platform) => (
                true,
                format!("the platform `{platform}` is one of {}", quoted(platforms)),
            ),
            Some(platform) => (
                false,
                format!(
                    "limited to platforms {}; this conversation is on `{platform}`",
                    quoted(platforms)
                ),
            ),
        };
        trace.push(step(Check::Platforms, holds, why));
    }
    if let Some(scopes) = restrictions.scopes {
        let (holds, why) = match &origin.scope {
            None => (
                false,
                format!(
                    "limited to scopes {}; this conversation has no scope (CLI, HTTP or MCP)",
                    quoted(scopes)
                ),
            ),
            Some(scope) if any_of(scopes, scope.kind.as_str()) => (
                true,
                format!("the scope `{}` is one of {}", scope.kind, quoted(scopes)),
            ),
            Some(scope) => (
                false,
                format!(
                    "limited to scopes {}; this conversation is a `{}`",
                    quoted(scopes),
                    scope.kind
                ),
            ),
        };
        trace.push(step(Check::Scopes, holds, why));
    }
    trace.extend(evaluate_rules(restrictions.permissions, origin, sender).trace);
    Admission {
        admitted: trace.iter().all(|s| s.effect == DecisionKind::Allow),
        trace,
    }
}

fn step(check: Check, holds: bool, why: String) -> Step {
    let effect = if holds {
        DecisionKind::Allow
    } else {
        DecisionKind::Refuse
    };
    Step::new(check, effect, why)
}
