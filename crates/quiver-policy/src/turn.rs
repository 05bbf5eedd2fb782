//! Turn-scoped state: skills' `allowed-tools` and `disallowed-tools`, and lockouts after a
//! refusal. The runtime starts every turn with a fresh [`TurnState`], which restores both.

use quiver_package::tool::RiskCategory;
use serde::{Deserialize, Serialize};

use crate::decision::{Evaluation, Refusal};

/// How a [`ToolPattern`] matches the tool's first string argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "match", content = "text", rename_all = "kebab-case")]
pub enum ArgumentPattern {
    /// Any arguments (`tool`, `tool(*)`).
    Any,
    /// The first string argument starts with this (`tool(git diff:*)`, `tool(git diff*)`).
    Prefix(String),
    /// The first string argument is exactly this (`tool(status)`).
    Exact(String),
}

/// An `allowed-tools` or `disallowed-tools` entry: `tool`, `<package>.<tool>`, or either with an
/// argument pattern, `tool(field-prefix*)` (Claude Code's `Bash(git diff:*)` style).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolPattern {
    /// The entry as written.
    pub text: String,
    /// The package, for `<package>.<tool>`; a bare name matches that local name in any package.
    pub package: Option<String>,
    /// The tool's local name.
    pub tool: String,
    /// The argument pattern.
    pub argument: ArgumentPattern,
}

impl ToolPattern {
    /// Reads an entry. Never fails: an entry that names no Quiver tool (`Read`, `Bash`) simply
    /// matches nothing.
    pub fn parse(text: &str) -> ToolPattern {
        let trimmed = text.trim();
        let (name, argument) = match trimmed.split_once('(') {
            Some((name, rest)) if rest.ends_with(')') => {
                let inner = &rest[..rest.len() - 1];
                let argument = if inner.is_empty() || inner == "*" {
                    ArgumentPattern::Any
                } else if let Some(prefix) = inner.strip_suffix(":*") {
                    ArgumentPattern::Prefix(prefix.to_owned())
                } else if let Some(prefix) = inner.strip_suffix('*') {
                    ArgumentPattern::Prefix(prefix.to_owned())
                } else {
                    ArgumentPattern::Exact(inner.to_owned())
                };
                (name.trim(), argument)
            }
            _ => (trimmed, ArgumentPattern::Any),
        };
        let (package, tool) = match name.split_once('.') {
            Some((package, tool)) => (Some(package.to_owned()), tool.to_owned()),
            None => (None, name.to_owned()),
        };
        ToolPattern {
            text: text.to_owned(),
            package,
            tool,
            argument,
        }
    }

    /// Whether the entry names the tool `package`.`tool`, ignoring the argument pattern.
    pub fn names(&self, package: &str, tool: &str) -> bool {
        self.tool == tool && self.package.as_deref().is_none_or(|p| p == package)
    }

    /// Whether the entry matches a call of `package`.`tool` whose first string argument is
    /// `first_string_argument`.
    pub fn matches(&self, package: &str, tool: &str, first_string_argument: Option<&str>) -> bool {
        if !self.names(package, tool) {
            return false;
        }
        match (&self.argument, first_string_argument) {
            (ArgumentPattern::Any, _) => true,
            (ArgumentPattern::Prefix(prefix), Some(arg)) => arg.starts_with(prefix.as_str()),
            (ArgumentPattern::Exact(text), Some(arg)) => arg == text,
            (_, None) => false,
        }
    }
}

/// An active skill's turn rules: read when the skill is activated, lasting to the end of the
/// turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillTurnRules {
    /// The skill id (`<package>` or `<package>/<skill>`).
    pub skill: String,
    /// The skill's package: pre-approval reaches only this package's tools.
    pub package: String,
    /// `allowed-tools`: pre-approved for the approval-mode question.
    pub allowed: Vec<ToolPattern>,
    /// `disallowed-tools`: removed.
    pub disallowed: Vec<ToolPattern>,
}

impl SkillTurnRules {
    /// Reads a skill's `allowed-tools` and `disallowed-tools` entries.
    pub fn new(
        skill: &str,
        package: &str,
        allowed_tools: &[String],
        disallowed_tools: &[String],
    ) -> SkillTurnRules {
        SkillTurnRules {
            skill: skill.to_owned(),
            package: package.to_owned(),
            allowed: allowed_tools
                .iter()
                .map(|t| ToolPattern::parse(t))
                .collect(),
            disallowed: disallowed_tools
                .iter()
                .map(|t| ToolPattern::parse(t))
                .collect(),
        }
    }
}

/// What an active skill's `allowed-tools` says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreApproval<'a> {
    /// An entry of a skill of the tool's own package matches.
    Granted {
        /// The skill.
        skill: &'a str,
        /// The entry.
        entry: &'a str,
    },
    /// Only entries of other packages' skills match: they never reach this tool.
    OtherPackage {
        /// The skill.
        skill: &'a str,
        /// Its package.
        package: &'a str,
        /// The entry.
        entry: &'a str,
    },
}

/// The turn's restrictions and lockouts, passed to every call of the turn and dropped at its
/// end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnState {
    skills: Vec<SkillTurnRules>,
    refused_tools: Vec<String>,
    locked_categories: Vec<RiskCategory>,
}

impl TurnState {
    /// A fresh turn: nothing pre-approved, removed or locked.
    pub fn new() -> TurnState {
        TurnState::default()
    }

    /// Applies an activated skill's `allowed-tools` and `disallowed-tools` for the rest of the
    /// turn.
    pub fn activate_skill(&mut self, rules: SkillTurnRules) {
        self.skills.retain(|s| s.skill != rules.skill);
        self.skills.push(rules);
    }

    /// The active skills' rules of this turn.
    pub fn skills(&self) -> &[SkillTurnRules] {
        &self.skills
    }

    /// Records a refusal: its tool, and a dangerous tool's risk categories, are locked for the
    /// rest of the turn.
    pub fn record_refusal(&mut self, refusal: &Refusal) {
        if !self.refused_tools.contains(&refusal.lockout.tool) {
            self.refused_tools.push(refusal.lockout.tool.clone());
        }
        for category in &refusal.lockout.categories {
            if !self.locked_categories.contains(category) {
                self.locked_categories.push(*category);
            }
        }
    }

    /// Takes in what another request of the same turn left (two requests of one turn that ran
    /// at once): its lockouts are added, never dropped, and the skills it activated that this
    /// state lacks are added with their lists (a restriction is never lost; a skill both
    /// activated keeps this state's lists).
    pub fn absorb(&mut self, other: &TurnState) {
        for tool in &other.refused_tools {
            if !self.refused_tools.contains(tool) {
                self.refused_tools.push(tool.clone());
            }
        }
        for category in &other.locked_categories {
            if !self.locked_categories.contains(category) {
                self.locked_categories.push(*category);
            }
        }
        for rules in &other.skills {
            if !self.skills.iter().any(|s| s.skill == rules.skill) {
                self.skills.push(rules.clone());
            }
        }
    }

    /// Records an evaluation's refusal, if it is one.
    pub fn record(&mut self, evaluation: &Evaluation) {
        if let Some(refusal) = evaluation.refusal() {
            self.record_refusal(refusal);
        }
    }

    /// Whether `tool` (`<package>.<tool>`) was refused in this turn.
    pub fn is_tool_locked(&self, tool: &str) -> bool {
        self.refused_tools.iter().any(|t| t == tool)
    }

    /// Whether a dangerous tool of `category` was refused in this turn.
    pub fn is_category_locked(&self, category: RiskCategory) -> bool {
        self.locked_categories.contains(&category)
    }

    /// The `disallowed-tools` entry that removes a call, with its skill.
    pub fn disallowing(
        &self,
        package: &str,
        tool: &str,
        first_string_argument: Option<&str>,
    ) -> Option<(&str, &str)> {
        self.skills.iter().find_map(|skill| {
            skill
                .disallowed
                .iter()
                .find(|p| p.matches(package, tool, first_string_argument))
                .map(|p| (skill.skill.as_str(), p.text.as_str()))
        })
    }

    /// Whether the tool is removed from this turn's tool list whatever its arguments (a
    /// `disallowed-tools` entry without an argument pattern names it).
    pub fn removes(&self, package: &str, tool: &str) -> bool {
        self.skills.iter().any(|skill| {
            skill
                .disallowed
                .iter()
                .any(|p| p.argument == ArgumentPattern::Any && p.names(package, tool))
        })
    }

    /// What the active skills' `allowed-tools` say about a call.
    pub fn pre_approval(
        &self,
        package: &str,
        tool: &str,
        first_string_argument: Option<&str>,
    ) -> Option<PreApproval<'_>> {
        let mut other = None;
        for skill in &self.skills {
            for pattern in &skill.allowed {
                if !pattern.matches(package, tool, first_string_argument) {
                    continue;
                }
                if skill.package == package {
                    return Some(PreApproval::Granted {
                        skill: &skill.skill,
                        entry: &pattern.text,
                    });
                }
                other.get_or_insert(PreApproval::OtherPackage {
                    skill: &skill.skill,
                    package: &skill.package,
                    entry: &pattern.text,
                });
            }
        }
        other
    }
}
