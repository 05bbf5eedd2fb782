//! Reading `SKILL.md`: finding the file, decoding it as the reference does, and splitting and
//! loading its frontmatter into JSON values the validator checks.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::python::{display_path, py_repr, py_strip};
use super::{ProblemKind, SkillProblem, strictyaml};

/// The skill file in a directory: `SKILL.md`, else `skill.md`.
pub fn find_skill_md(skill_dir: &Path) -> Option<PathBuf> {
    ["SKILL.md", "skill.md"]
        .iter()
        .map(|name| skill_dir.join(name))
        .find(|path| path.exists())
}

/// Reads a skill file as the reference does: strict UTF-8, universal newlines.
pub fn read_skill_file(path: &Path) -> Result<String, SkillProblem> {
    let bytes = std::fs::read(path).map_err(|e| {
        SkillProblem::new(
            ProblemKind::UnreadableSkillFile,
            format!("cannot read {}: {e}", display_path(path)),
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let position = e.utf8_error().valid_up_to();
        let byte = e.as_bytes().get(position).copied().unwrap_or(0);
        SkillProblem::new(
            ProblemKind::UnreadableSkillFile,
            format!(
                "'utf-8' codec can't decode byte {byte:#04x} in position {position} of {}",
                display_path(path)
            ),
        )
    })?;
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Splits `SKILL.md` content into its frontmatter (loaded as the reference loads it) and its
/// body (trimmed), or gives the reference's parse error.
///
/// A `metadata` mapping is flattened to strings (`str()` of each value) as the reference does.
pub fn parse_frontmatter(content: &str) -> Result<(Map<String, Value>, String), SkillProblem> {
    let Some(rest) = content.strip_prefix("---") else {
        return Err(SkillProblem::new(
            ProblemKind::MissingFrontmatter,
            "SKILL.md must start with YAML frontmatter (---)",
        ));
    };
    let Some((frontmatter, body)) = rest.split_once("---") else {
        return Err(SkillProblem::new(
            ProblemKind::UnclosedFrontmatter,
            "SKILL.md frontmatter not properly closed with ---",
        ));
    };
    let mut data = strictyaml::load(frontmatter).map_err(|e| {
        if e.crash {
            SkillProblem::new(
                ProblemKind::UnsupportedYaml,
                format!("Unsupported YAML in frontmatter: {}", e.message),
            )
        } else {
            SkillProblem::new(
                ProblemKind::InvalidYaml,
                format!("Invalid YAML in frontmatter: {}", e.message),
            )
        }
    })?;
    if let Some(strictyaml::Data::Map(entries)) = data.as_mut() {
        for (key, value) in entries.iter_mut() {
            if let (strictyaml::Key::Str(key), strictyaml::Data::Map(inner)) = (key, value)
                && key == "metadata"
            {
                for (_, item) in inner.iter_mut() {
                    *item = strictyaml::Data::Str(data_py_str(item));
                }
            }
        }
    }
    let Some(Value::Object(metadata)) = data.map(|d| data_to_json(&d)) else {
        return Err(SkillProblem::new(
            ProblemKind::FrontmatterNotMapping,
            "SKILL.md frontmatter must be a YAML mapping",
        ));
    };
    Ok((metadata, py_strip(body).to_owned()))
}

/// Python's `str()` of a loaded value (how the reference flattens `metadata`).
fn data_py_str(data: &strictyaml::Data) -> String {
    match data {
        strictyaml::Data::Str(s) | strictyaml::Data::Tagged(s) => s.clone(),
        other => data_py_repr(other),
    }
}

fn data_py_repr(data: &strictyaml::Data) -> String {
    use strictyaml::{Data, Key};
    match data {
        Data::Str(s) => py_repr(s),
        Data::Tagged(_) => "<strictyaml.ruamel.comments.TaggedScalar object>".to_owned(),
        Data::Seq(items) => format!(
            "[{}]",
            items
                .iter()
                .map(data_py_repr)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Data::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Key::Str(s) => py_repr(s),
                        Key::Tuple(parts) => parts.join(", "),
                    };
                    format!("{key}: {}", data_py_repr(value))
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn data_to_json(data: &strictyaml::Data) -> Value {
    use strictyaml::{Data, Key};
    match data {
        Data::Str(s) => Value::String(s.clone()),
        Data::Seq(items) => Value::Array(items.iter().map(data_to_json).collect()),
        Data::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Key::Str(s) => s.clone(),
                        Key::Tuple(parts) => parts.join(", "),
                    };
                    (key, data_to_json(value))
                })
                .collect(),
        ),
        Data::Tagged(_) => Value::Null,
    }
}
