//! `prompts/<section>.md`: background text for the system prompt.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::diagnostic::Diagnostic;
use crate::names::ItemName;
use crate::{frontmatter, yaml};

/// Where a section goes in the system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Who the assistant is.
    Role,
    /// What it is doing.
    Task,
    /// Background it should know.
    Context,
    /// Rules it must keep.
    Safety,
}

/// What happens to a section under the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retention {
    /// Dropped first.
    Opportunistic,
    /// Dropped after opportunistic ones (the default).
    Preferred,
    /// Never dropped.
    Required,
}

/// Session profiles a section applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// A person is present.
    Interactive,
    /// Unattended (schedules, workflows).
    Schedule,
}

/// A parsed prompt section.
#[derive(Debug, Clone, Serialize)]
pub struct PromptSection {
    /// Its name (the file stem).
    pub name: ItemName,
    /// The file.
    pub file: PathBuf,
    /// Title shown above it.
    pub title: Option<String>,
    /// Layer (default `context`).
    pub layer: Layer,
    /// Higher first within a layer.
    pub order: i64,
    /// Retention class.
    pub retention: Retention,
    /// Cut to this many characters with a visible marker.
    pub max_chars: Option<usize>,
    /// Profiles it applies to (all when empty).
    pub profiles: Vec<Profile>,
    /// Platforms it is restricted to.
    pub platforms: Option<Vec<String>>,
    /// Scopes it is restricted to.
    pub scopes: Option<Vec<String>>,
    /// The text.
    pub content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSection {
    title: Option<String>,
    layer: Option<Layer>,
    #[serde(default)]
    order: i64,
    retention: Option<Retention>,
    max_chars: Option<usize>,
    #[serde(default)]
    profiles: Vec<Profile>,
    platforms: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
}

/// Parses a prompt section file named `name`.
pub fn parse_prompt(
    text: &str,
    file: &Path,
    name: ItemName,
) -> (Option<PromptSection>, Vec<Diagnostic>) {
    let (yaml_text, yaml_line, body) = match frontmatter::split(text) {
        Ok(split) => (split.yaml.into_owned(), split.yaml_line, split.body),
        Err(frontmatter::SplitError::Missing) => (String::new(), 1, text),
        Err(err) => {
            return (
                None,
                vec![
                    Diagnostic::error("prompt-unclosed-frontmatter", file, err.to_string())
                        .at(1, 1),
                ],
            );
        }
    };
    let raw: RawSection = match yaml::parse(&yaml_text, file, yaml_line) {
        Ok(raw) => raw,
        Err(diag) => return (None, vec![diag]),
    };
    let mut diags = Vec::new();
    for (key, list) in [("platforms", &raw.platforms), ("scopes", &raw.scopes)] {
        diags.extend(crate::tool::restriction_errors(
            file,
            key,
            list.as_deref(),
            yaml::key_line(&yaml_text, yaml_line, key),
        ));
    }
    if body.trim().is_empty() {
        diags.push(Diagnostic::warning(
            "prompt-empty",
            file,
            "the prompt section has no text",
        ));
    }
    if diags.iter().any(Diagnostic::is_error) {
        return (None, diags);
    }
    let section = PromptSection {
        name,
        file: file.to_path_buf(),
        title: raw.title,
        layer: raw.layer.unwrap_or(Layer::Context),
        order: raw.order,
        retention: raw.retention.unwrap_or(Retention::Preferred),
        max_chars: raw.max_chars,
        profiles: raw.profiles,
        platforms: raw.platforms,
        scopes: raw.scopes,
        content: body.trim().to_owned(),
    };
    (Some(section), diags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let name: ItemName = "tone".parse().unwrap();
        let cases: &[(&str, bool, &[&str])] = &[
            (
                "---\ntitle: 语气\nlayer: role\norder: 5\nretention: required\n---\n说话简洁。\n",
                true,
                &[],
            ),
            ("Just text, no frontmatter.\n", true, &[]),
            ("---\nlayer: mood\n---\nx", false, &["yaml-wrong-type"]),
            (
                "---\nscopes: []\n---\nx",
                false,
                &["empty-restriction-list"],
            ),
            ("---\ntitle: t\n---\n", true, &["prompt-empty"]),
            ("---\ntitle: t\n", false, &["prompt-unclosed-frontmatter"]),
        ];
        for (text, ok, want) in cases {
            let (s, d) = parse_prompt(text, Path::new("p.md"), name.clone());
            let codes: Vec<_> = d.iter().map(|d| d.code).collect();
            assert_eq!((s.is_some(), codes), (*ok, want.to_vec()), "{text}");
        }
        let (s, _) = parse_prompt(cases[0].0, Path::new("p.md"), name);
        let s = s.unwrap();
        assert_eq!(
            (s.layer, s.order, s.retention, s.content.as_str()),
            (Layer::Role, 5, Retention::Required, "说话简洁。")
        );
    }
}
