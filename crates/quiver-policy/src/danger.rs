//! The dangerous-tool gate's classification: which tools are dangerous, and in which risk
//! categories.
//!
//! A tool is dangerous when it declares `risk: dangerous` (or a `risk_category`), or when its
//! local name matches a name on the built-in list or the operator's additions: the whole name,
//! or a suffix of at least two `_`-separated segments (`discord_remove_member` matches
//! `remove_member`; `member` alone never matches anything). `-` counts as `_`. `risk: safe`
//! never lowers a listed name.

use quiver_package::tool::{Risk, RiskCategory};
use serde::Serialize;

use crate::decision::category_name;

/// The built-in list of dangerous names, by category (DESIGN.md §4). Operators may add names,
/// never remove them.
pub const BUILTIN_DANGEROUS: &[(&str, RiskCategory)] = &[
    ("group_kick", RiskCategory::Member),
    ("kick_member", RiskCategory::Member),
    ("remove_member", RiskCategory::Member),
    ("ban_member", RiskCategory::Member),
    ("set_mute", RiskCategory::Member),
    ("group_mute", RiskCategory::Member),
    ("mute_member", RiskCategory::Member),
    ("timeout_member", RiskCategory::Member),
    ("set_admin", RiskCategory::Member),
    ("set_group_admin", RiskCategory::Member),
    ("set_group_card", RiskCategory::Member),
    ("set_nickname", RiskCategory::Member),
    ("send_group_notice", RiskCategory::Publish),
    ("group_notice", RiskCategory::Publish),
    ("channel_post", RiskCategory::Publish),
    ("create_post", RiskCategory::Publish),
    ("send_channel_post", RiskCategory::Publish),
    ("create_comment", RiskCategory::Publish),
    ("send_comment", RiskCategory::Publish),
    ("send_red_packet", RiskCategory::Funds),
    ("red_packet", RiskCategory::Funds),
    ("transfer_money", RiskCategory::Funds),
    ("send_transfer", RiskCategory::Funds),
    ("set_self_nickname", RiskCategory::Identity),
    ("set_bot_nickname", RiskCategory::Identity),
    ("set_avatar", RiskCategory::Identity),
    ("set_bot_profile", RiskCategory::Identity),
    ("set_profile", RiskCategory::Identity),
];

/// A name the operator adds to the dangerous list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DangerousName {
    /// The name, matched like a built-in one.
    pub name: String,
    /// Its risk category, if it has one.
    pub category: Option<RiskCategory>,
}

/// Where a tool's danger comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum DangerSource {
    /// A name on the built-in list.
    BuiltIn {
        /// The listed name it matched.
        entry: String,
    },
    /// A name the operator added.
    Operator {
        /// The added name it matched.
        entry: String,
    },
    /// The tool's own `risk: dangerous` or `risk_category`.
    Declared,
}

/// One reason a tool is dangerous, with its category.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DangerMatch {
    /// Where it comes from.
    pub source: DangerSource,
    /// The risk category it brings.
    pub category: Option<RiskCategory>,
}

/// Why a tool is dangerous: every match, and the union of their categories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Danger {
    /// Every list entry and declaration that makes it dangerous.
    pub matches: Vec<DangerMatch>,
    /// The union of their risk categories, in list order (member, publish, funds, identity).
    pub categories: Vec<RiskCategory>,
}

impl Danger {
    /// The matches, in words.
    pub fn describe(&self, tool: &str) -> String {
        let entry = |m: &DangerMatch, entry: &str| match m.category {
            Some(c) => format!("`{entry}` (`{}`)", category_name(c)),
            None => format!("`{entry}`"),
        };
        let mut built_in = Vec::new();
        let mut operator = Vec::new();
        let mut declared = None;
        for m in &self.matches {
            match &m.source {
                DangerSource::BuiltIn { entry: e } => built_in.push(entry(m, e)),
                DangerSource::Operator { entry: e } => operator.push(entry(m, e)),
                DangerSource::Declared => declared = Some(m.category),
            }
        }
        let names = |list: &[String]| {
            let plural = if list.len() > 1 { "names" } else { "name" };
            format!("{plural} {}", list.join(", "))
        };
        let mut parts = Vec::new();
        if !built_in.is_empty() {
            parts.push(format!(
                "`{tool}` matches the built-in dangerous {}",
                names(&built_in)
            ));
        }
        if !operator.is_empty() {
            parts.push(format!(
                "`{tool}` matches the operator's dangerous {}",
                names(&operator)
            ));
        }
        if let Some(category) = declared {
            let category = category
                .map(|c| format!(" (`{}`)", category_name(c)))
                .unwrap_or_default();
            parts.push(format!("`{tool}` is declared dangerous{category}"));
        }
        parts.join("; ")
    }
}

/// Whether the local name `name` matches the listed `entry`: the whole name, or a suffix of at
/// least two `_`-separated segments. `-` counts as `_`.
pub fn name_matches(name: &str, entry: &str) -> bool {
    normalized_matches(&normalize(name), &normalize(entry))
}

/// [`name_matches`] for a name and an entry already normalized (no allocation: it runs for
/// every built-in entry on every call).
fn normalized_matches(name: &str, entry: &str) -> bool {
    if entry.is_empty() {
        return false;
    }
    if name == entry {
        return true;
    }
    let segments = entry.split('_').filter(|s| !s.is_empty()).count();
    segments >= 2
        && !entry.starts_with('_')
        && name
            .strip_suffix(entry)
            .is_some_and(|head| head.ends_with('_'))
}

fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('-', "_")
}

/// Classifies a tool: `None` when it is not dangerous.
///
/// `risk: safe` has no effect on a listed name; a declared `risk_category` makes a tool
/// dangerous even without `risk: dangerous` (fail closed).
pub fn classify(
    name: &str,
    risk: Option<Risk>,
    risk_category: Option<RiskCategory>,
    extra: &[DangerousName],
) -> Option<Danger> {
    let mut matches = Vec::new();
    let normalized = normalize(name);
    // The built-in entries are written normalized (a test holds them to it).
    for (entry, category) in BUILTIN_DANGEROUS {
        if normalized_matches(&normalized, entry) {
            matches.push(DangerMatch {
                source: DangerSource::BuiltIn {
                    entry: (*entry).to_owned(),
                },
                category: Some(*category),
            });
        }
    }
    for extra in extra {
        if normalized_matches(&normalized, &normalize(&extra.name)) {
            matches.push(DangerMatch {
                source: DangerSource::Operator {
                    entry: extra.name.clone(),
                },
                category: extra.category,
            });
        }
    }
    if risk == Some(Risk::Dangerous) || risk_category.is_some() {
        matches.push(DangerMatch {
            source: DangerSource::Declared,
            category: risk_category,
        });
    }
    if matches.is_empty() {
        return None;
    }
    let categories = [
        RiskCategory::Member,
        RiskCategory::Publish,
        RiskCategory::Funds,
        RiskCategory::Identity,
    ]
    .into_iter()
    .filter(|c| matches.iter().any(|m| m.category == Some(*c)))
    .collect();
    Some(Danger {
        matches,
        categories,
    })
}
