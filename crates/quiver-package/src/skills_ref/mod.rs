//! Strict Agent Skills validation: the twin of the reference validator `skills-ref` 0.1.1 (PyPI,
//! the `agentskills` command).
//!
//! Every function here gives the reference's verdict and the reference's text, byte for byte:
//!
//! - [`validate`](crate::skills_ref::validate) is `skills_ref.validate` (`agentskills validate`):
//!   the list of problems, empty for a valid skill, each with the reference's message and a
//!   fine-grained [`ProblemKind`](crate::skills_ref::ProblemKind) so that a lenient loader can
//!   downgrade some of them to warnings.
//! - [`validate_metadata`](crate::skills_ref::validate_metadata) is the field checks alone, for
//!   frontmatter parsed elsewhere.
//! - [`read_properties`](crate::skills_ref::read_properties) is
//!   `skills_ref.read_properties(..).to_dict()` as JSON, and
//!   [`python_json`](crate::skills_ref::python_json) prints it the way `json.dumps(.., indent=2)`
//!   does.
//! - [`to_prompt`](crate::skills_ref::to_prompt) is `skills_ref.to_prompt`: the
//!   `<available_skills>` block, with each skill's absolute, symlink-resolved `SKILL.md` path in
//!   `<location>`.
//!
//! # Reading `SKILL.md`
//!
//! The file is `SKILL.md`, else `skill.md`. It is read as strict UTF-8 with Python's universal
//! newlines (`\r\n` and `\r` become `\n`). It must start with `---`; the frontmatter is the text up
//! to the next `---` *anywhere* (the reference splits with `str.split("---", 2)`, so a `---` inside
//! a value ends the frontmatter early).
//!
//! # YAML
//!
//! The reference loads the frontmatter with `strictyaml` (which vendors ruamel.yaml 0.16.13), not
//! with a YAML 1.2 library. It differs from YAML 1.2 (and from `serde-saphyr`) in these ways, all
//! reproduced here by a port of that loader (the private `strictyaml` module):
//!
//! - Every scalar is a string: `true`, `yes`, `null`, `~`, `12`, `1.0`, `0x1F`, `2024-01-01` stay
//!   text exactly as written, and an empty value (`name:`) is `""`, not null.
//! - Flow collections (`[a, b]`, `{a: b}`), tags (`!x`), anchors (`&x`) are errors, and so are
//!   aliases (`*x`, always undefined) and duplicate keys.
//! - Sibling values that are mappings must share one indentation.
//! - A plain `<<` key merges mappings (YAML 1.1 merge keys); the merged keys are kept only in
//!   nested mappings, not at the top level. A plain `=` or `<<` *value* is an opaque object in
//!   Python (not a string): it is a [`serde_json::Value::Null`](serde_json::Value::Null) here.
//! - `\x85`, `\u2028` and `\u2029` are line breaks; a non-printable character anywhere in the
//!   frontmatter (a control character other than tab and newline, `\x7f`, C1 controls, `\ufffe`) is
//!   refused.
//! - Error messages are ruamel's, with its positions and source snippets.
//!
//! Remaining differences from the reference, all on inputs no real skill uses (found by
//! differential fuzzing against the reference, over 80 000 generated and mutated documents):
//!
//! - Where the reference crashes with a Python traceback (exit code 1) instead of reporting, this
//!   module reports a problem whose
//!   [`ProblemKind::is_reference_crash`](crate::skills_ref::ProblemKind::is_reference_crash) is
//!   true (same exit code in `quiver skill`, own message): a `SKILL.md` that is not UTF-8 or not
//!   readable, a non-printable character in the frontmatter, complex (`? - a`) keys, two `<<` keys
//!   in one mapping, comment placements that trip ruamel's comment bookkeeping, and a `=`/`<<`
//!   value that `read_properties` must print as JSON.
//! - A few comment placements around a duplicate key make ruamel crash (TypeError) instead of
//!   reporting the duplicate; this module reports the duplicate (exit code 1 either way).
//! - A double-quoted `\uD800`-style escape of a lone surrogate: Python keeps the surrogate in the
//!   string (and the skill may be valid); Rust strings cannot hold one, so such a document is
//!   reported as unsupported YAML once it has loaded (YAML errors found first are still the
//!   reference's).
//! - A `%YAML 1.1` directive switches ruamel's scanner to YAML 1.1 rules for the next tokens; the
//!   directive is an error either way (no `---` can follow it in frontmatter), but the token named
//!   in the message may differ.
//! - Unicode tables: the reference runs on the Python it is installed with (3.11: Unicode 14);
//!   Rust's `char` methods and `unicode-normalization` are newer, so characters assigned after
//!   Unicode 14 may be judged differently. `str.isalnum`, `str.lower`, `str.isspace`,
//!   `str.isprintable` and NFKC as used here agree with Python 3.11 on every assigned character of
//!   Unicode 14 (checked exhaustively).
//! - A `metadata` value that is a list or mapping is printed with Python's `str()`; one that holds
//!   an opaque `=`/`<<` value prints an object address in the reference.
//! - Python's `pathlib`, `os.path.realpath` and `Path.exists` are emulated for printing and
//!   resolving paths; non-UTF-8 file names are printed lossily.

mod frontmatter;
mod python;
mod strictyaml;

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

pub use frontmatter::{find_skill_md, parse_frontmatter, read_skill_file};
pub use python::{display_path, path_name, path_parent, python_json, python_repr, resolve_path};
use python::{html_escape, py_is_alnum, py_repr, py_strip};

/// Maximum length of a skill name, in characters (after NFKC normalization).
pub const MAX_SKILL_NAME_LENGTH: usize = 64;
/// Maximum length of a description, in characters.
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;
/// Maximum length of the `compatibility` field, in characters.
pub const MAX_COMPATIBILITY_LENGTH: usize = 500;
/// The frontmatter fields the reference accepts, sorted.
pub const ALLOWED_FIELDS: [&str; 6] = [
    "allowed-tools",
    "compatibility",
    "description",
    "license",
    "metadata",
    "name",
];

/// What kind of problem the reference reports; see [`SkillProblem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The skill path does not exist (`Path does not exist: PATH`).
    PathNotFound,
    /// The skill path is not a directory (`Not a directory: PATH`).
    NotADirectory,
    /// The directory has neither `SKILL.md` nor `skill.md`.
    MissingSkillFile,
    /// `SKILL.md` cannot be read as UTF-8 text (the reference crashes).
    UnreadableSkillFile,
    /// `SKILL.md` does not start with `---`.
    MissingFrontmatter,
    /// No second `---` closes the frontmatter.
    UnclosedFrontmatter,
    /// The frontmatter is not valid (strict) YAML; the message is the YAML library's.
    InvalidYaml,
    /// YAML the reference cannot load at all: it crashes with a Python exception.
    UnsupportedYaml,
    /// The frontmatter is YAML but not a mapping.
    FrontmatterNotMapping,
    /// Fields other than [`ALLOWED_FIELDS`].
    UnknownFields,
    /// No `name` field.
    MissingName,
    /// No `description` field.
    MissingDescription,
    /// `name` is not a string, or is empty or blank.
    NameNotString,
    /// `name` is longer than [`MAX_SKILL_NAME_LENGTH`] characters.
    NameTooLong,
    /// `name` has uppercase letters.
    NameNotLowercase,
    /// `name` starts or ends with a hyphen.
    NameHyphenAtEdge,
    /// `name` contains `--`.
    NameConsecutiveHyphens,
    /// `name` has characters other than letters, digits and hyphens.
    NameInvalidChars,
    /// `name` differs from the skill's directory name.
    NameDirMismatch,
    /// `description` is not a string, or is empty or blank.
    DescriptionNotString,
    /// `description` is longer than [`MAX_DESCRIPTION_LENGTH`] characters.
    DescriptionTooLong,
    /// `compatibility` is not a string.
    CompatibilityNotString,
    /// `compatibility` is longer than [`MAX_COMPATIBILITY_LENGTH`] characters.
    CompatibilityTooLong,
    /// A property `read_properties` must print is not JSON-printable in the reference (it
    /// crashes).
    UnprintableProperty,
}

impl ProblemKind {
    /// A stable kebab-case code for this kind.
    pub fn code(&self) -> &'static str {
        match self {
            ProblemKind::PathNotFound => "skill-path-not-found",
            ProblemKind::NotADirectory => "skill-path-not-a-directory",
            ProblemKind::MissingSkillFile => "skill-file-missing",
            ProblemKind::UnreadableSkillFile => "skill-file-unreadable",
            ProblemKind::MissingFrontmatter => "skill-frontmatter-missing",
            ProblemKind::UnclosedFrontmatter => "skill-frontmatter-unclosed",
            ProblemKind::InvalidYaml => "skill-frontmatter-invalid-yaml",
            ProblemKind::UnsupportedYaml => "skill-frontmatter-unsupported-yaml",
            ProblemKind::FrontmatterNotMapping => "skill-frontmatter-not-mapping",
            ProblemKind::UnknownFields => "skill-unknown-fields",
            ProblemKind::MissingName => "skill-name-missing",
            ProblemKind::MissingDescription => "skill-description-missing",
            ProblemKind::NameNotString => "skill-name-not-string",
            ProblemKind::NameTooLong => "skill-name-too-long",
            ProblemKind::NameNotLowercase => "skill-name-not-lowercase",
            ProblemKind::NameHyphenAtEdge => "skill-name-hyphen-at-edge",
            ProblemKind::NameConsecutiveHyphens => "skill-name-consecutive-hyphens",
            ProblemKind::NameInvalidChars => "skill-name-invalid-chars",
            ProblemKind::NameDirMismatch => "skill-name-dir-mismatch",
            ProblemKind::DescriptionNotString => "skill-description-not-string",
            ProblemKind::DescriptionTooLong => "skill-description-too-long",
            ProblemKind::CompatibilityNotString => "skill-compatibility-not-string",
            ProblemKind::CompatibilityTooLong => "skill-compatibility-too-long",
            ProblemKind::UnprintableProperty => "skill-property-unprintable",
        }
    }

    /// True where the reference does not report the problem but crashes with a Python
    /// traceback (still exit code 1): the message is then this module's, not the reference's.
    pub fn is_reference_crash(&self) -> bool {
        matches!(
            self,
            ProblemKind::UnreadableSkillFile
                | ProblemKind::UnsupportedYaml
                | ProblemKind::UnprintableProperty
        )
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One problem with a skill, with the reference's exact message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProblem {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The reference's text (what `agentskills` prints after `  - ` or `Error: `).
    pub message: String,
}

impl SkillProblem {
    fn new(kind: ProblemKind, message: impl Into<String>) -> Self {
        SkillProblem {
            kind,
            message: message.into(),
        }
    }

    /// The stable code of this problem's kind.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for SkillProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why [`read_properties`] or [`to_prompt`] failed: the reference's `SkillError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillRefError {
    /// The skill could not be read; the message is the reference's.
    #[error("{0}")]
    Skill(SkillProblem),
}

impl SkillRefError {
    /// The problem behind the error.
    pub fn problem(&self) -> &SkillProblem {
        match self {
            SkillRefError::Skill(problem) => problem,
        }
    }
}

impl From<SkillProblem> for SkillRefError {
    fn from(problem: SkillProblem) -> Self {
        SkillRefError::Skill(problem)
    }
}

// -------------------------------------------------------------------- validation

fn non_empty_str(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) if !py_strip(s).is_empty() => Some(s),
        _ => None,
    }
}

fn validate_name(name: &Value, dir_name: Option<&str>, problems: &mut Vec<SkillProblem>) {
    let Some(name) = non_empty_str(name) else {
        problems.push(SkillProblem::new(
            ProblemKind::NameNotString,
            "Field 'name' must be a non-empty string",
        ));
        return;
    };
    let name: String = py_strip(name).nfkc().collect();
    let length = name.chars().count();
    if length > MAX_SKILL_NAME_LENGTH {
        problems.push(SkillProblem::new(
            ProblemKind::NameTooLong,
            format!("Skill name '{name}' exceeds {MAX_SKILL_NAME_LENGTH} character limit ({length} chars)"),
        ));
    }
    if name.to_lowercase() != name {
        problems.push(SkillProblem::new(
            ProblemKind::NameNotLowercase,
            format!("Skill name '{name}' must be lowercase"),
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push(SkillProblem::new(
            ProblemKind::NameHyphenAtEdge,
            "Skill name cannot start or end with a hyphen",
        ));
    }
    if name.contains("--") {
        problems.push(SkillProblem::new(
            ProblemKind::NameConsecutiveHyphens,
            "Skill name cannot contain consecutive hyphens",
        ));
    }
    if !name.chars().all(|c| c == '-' || py_is_alnum(c)) {
        problems.push(SkillProblem::new(
            ProblemKind::NameInvalidChars,
            format!("Skill name '{name}' contains invalid characters. Only letters, digits, and hyphens are allowed."),
        ));
    }
    if let Some(dir_name) = dir_name
        && dir_name.nfkc().collect::<String>() != name
    {
        problems.push(SkillProblem::new(
            ProblemKind::NameDirMismatch,
            format!("Directory name '{dir_name}' must match skill name '{name}'"),
        ));
    }
}

/// Checks already-parsed frontmatter as the reference's `validate_metadata` does.
///
/// `dir_name` is the skill directory's name (`Path.name`, so `""` for `.`), or `None` to
/// skip the name/directory check. Values are judged with Python's types in mind: anything
/// but a string (number, boolean, null, list, mapping) fails the string checks.
pub fn validate_metadata(meta: &Map<String, Value>, dir_name: Option<&str>) -> Vec<SkillProblem> {
    let mut problems = Vec::new();
    let mut extra: Vec<&str> = meta
        .keys()
        .map(String::as_str)
        .filter(|key| !ALLOWED_FIELDS.contains(key))
        .collect();
    if !extra.is_empty() {
        extra.sort_unstable();
        extra.dedup();
        let allowed: Vec<String> = ALLOWED_FIELDS.iter().map(|f| py_repr(f)).collect();
        problems.push(SkillProblem::new(
            ProblemKind::UnknownFields,
            format!(
                "Unexpected fields in frontmatter: {}. Only [{}] are allowed.",
                extra.join(", "),
                allowed.join(", ")
            ),
        ));
    }
    match meta.get("name") {
        None => problems.push(SkillProblem::new(
            ProblemKind::MissingName,
            "Missing required field in frontmatter: name",
        )),
        Some(name) => validate_name(name, dir_name, &mut problems),
    }
    match meta.get("description") {
        None => problems.push(SkillProblem::new(
            ProblemKind::MissingDescription,
            "Missing required field in frontmatter: description",
        )),
        Some(description) => match non_empty_str(description) {
            None => problems.push(SkillProblem::new(
                ProblemKind::DescriptionNotString,
                "Field 'description' must be a non-empty string",
            )),
            Some(description) => {
                let length = description.chars().count();
                if length > MAX_DESCRIPTION_LENGTH {
                    problems.push(SkillProblem::new(
                        ProblemKind::DescriptionTooLong,
                        format!("Description exceeds {MAX_DESCRIPTION_LENGTH} character limit ({length} chars)"),
                    ));
                }
            }
        },
    }
    if let Some(compatibility) = meta.get("compatibility") {
        match compatibility {
            Value::String(s) => {
                let length = s.chars().count();
                if length > MAX_COMPATIBILITY_LENGTH {
                    problems.push(SkillProblem::new(
                        ProblemKind::CompatibilityTooLong,
                        format!("Compatibility exceeds {MAX_COMPATIBILITY_LENGTH} character limit ({length} chars)"),
                    ));
                }
            }
            _ => problems.push(SkillProblem::new(
                ProblemKind::CompatibilityNotString,
                "Field 'compatibility' must be a string",
            )),
        }
    }
    problems
}

/// Validates a skill directory: the reference's verdict (empty = valid) and messages.
///
/// Path texts in messages are printed as Python's `pathlib` prints `skill_dir`.
pub fn validate(skill_dir: &Path) -> Vec<SkillProblem> {
    if !skill_dir.exists() {
        return vec![SkillProblem::new(
            ProblemKind::PathNotFound,
            format!("Path does not exist: {}", display_path(skill_dir)),
        )];
    }
    if !skill_dir.is_dir() {
        return vec![SkillProblem::new(
            ProblemKind::NotADirectory,
            format!("Not a directory: {}", display_path(skill_dir)),
        )];
    }
    let Some(skill_md) = find_skill_md(skill_dir) else {
        return vec![SkillProblem::new(
            ProblemKind::MissingSkillFile,
            "Missing required file: SKILL.md",
        )];
    };
    let metadata = match read_skill_file(&skill_md).and_then(|content| parse_frontmatter(&content))
    {
        Ok((metadata, _)) => metadata,
        Err(problem) => return vec![problem],
    };
    validate_metadata(&metadata, Some(&path_name(skill_dir)))
}

fn load_skill(skill_dir: &Path) -> Result<Map<String, Value>, SkillRefError> {
    let Some(skill_md) = find_skill_md(skill_dir) else {
        return Err(SkillProblem::new(
            ProblemKind::MissingSkillFile,
            format!("SKILL.md not found in {}", display_path(skill_dir)),
        )
        .into());
    };
    let content = read_skill_file(&skill_md)?;
    Ok(parse_frontmatter(&content)?.0)
}

/// The required, stripped `name` and `description`, as `read_properties` checks them.
fn name_and_description(metadata: &Map<String, Value>) -> Result<(String, String), SkillProblem> {
    let name = metadata.get("name").ok_or_else(|| {
        SkillProblem::new(
            ProblemKind::MissingName,
            "Missing required field in frontmatter: name",
        )
    })?;
    let description = metadata.get("description").ok_or_else(|| {
        SkillProblem::new(
            ProblemKind::MissingDescription,
            "Missing required field in frontmatter: description",
        )
    })?;
    let name = non_empty_str(name).ok_or_else(|| {
        SkillProblem::new(
            ProblemKind::NameNotString,
            "Field 'name' must be a non-empty string",
        )
    })?;
    let description = non_empty_str(description).ok_or_else(|| {
        SkillProblem::new(
            ProblemKind::DescriptionNotString,
            "Field 'description' must be a non-empty string",
        )
    })?;
    Ok((py_strip(name).to_owned(), py_strip(description).to_owned()))
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        Value::Bool(b) => *b,
        Value::Number(_) | Value::Null => true,
    }
}

fn contains_opaque(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(contains_opaque),
        Value::Object(map) => map.values().any(contains_opaque),
        _ => false,
    }
}

/// The skill's properties as the reference's `read_properties(..).to_dict()`: `name`,
/// `description`, then `license`, `compatibility`, `allowed-tools` and `metadata` when present
/// (`metadata` only when not empty). Does not validate beyond the required fields.
pub fn read_properties(skill_dir: &Path) -> Result<Value, SkillRefError> {
    let metadata = load_skill(skill_dir)?;
    let (name, description) = name_and_description(&metadata)?;
    let mut properties = Map::new();
    properties.insert("name".into(), Value::String(name));
    properties.insert("description".into(), Value::String(description));
    for field in ["license", "compatibility", "allowed-tools"] {
        if let Some(value) = metadata.get(field) {
            properties.insert(field.into(), value.clone());
        }
    }
    if let Some(value) = metadata.get("metadata")
        && truthy(value)
    {
        properties.insert("metadata".into(), value.clone());
    }
    if properties.values().any(contains_opaque) {
        return Err(SkillProblem::new(
            ProblemKind::UnprintableProperty,
            "Object of type TaggedScalar is not JSON serializable (a plain `=` or `<<` value)",
        )
        .into());
    }
    Ok(Value::Object(properties))
}

/// The `<available_skills>` block for these skill directories (no trailing newline).
///
/// Each directory is resolved to an absolute path first, so `<location>` and error messages
/// name absolute paths.
pub fn to_prompt(skill_dirs: &[PathBuf]) -> Result<String, SkillRefError> {
    if skill_dirs.is_empty() {
        return Ok("<available_skills>\n</available_skills>".to_owned());
    }
    let mut lines = vec!["<available_skills>".to_owned()];
    for skill_dir in skill_dirs {
        let skill_dir = resolve_path(skill_dir);
        let metadata = load_skill(&skill_dir)?;
        let (name, description) = name_and_description(&metadata)?;
        let location = find_skill_md(&skill_dir)
            .map(|p| display_path(&p))
            .unwrap_or_else(|| "None".to_owned());
        lines.push(skill_prompt_entry(&name, &description, &location));
    }
    lines.push("</available_skills>".to_owned());
    Ok(lines.join("\n"))
}

/// One `<skill>` element of the `<available_skills>` block, exactly as the reference prints
/// it (name and description HTML-escaped, the location as given; no trailing newline).
pub fn skill_prompt_entry(name: &str, description: &str, location: &str) -> String {
    format!(
        "<skill>\n<name>\n{}\n</name>\n<description>\n{}\n</description>\n<location>\n{location}\n</location>\n</skill>",
        html_escape(name),
        html_escape(description)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOT_LOADED: &str = "";

    /// (label, directory name, SKILL.md content, frontmatter as JSON or NOT_LOADED, messages),
    /// every expectation taken from skills-ref 0.1.1 (`parse_frontmatter` + `validate_metadata`).
    const CASES: &[(&str, &str, &str, &str, &[&str])] = &[
        (
            "valid",
            "valid",
            "---\nname: valid\ndescription: A skill.\nlicense: MIT\n---\nBody\n",
            "{\"name\": \"valid\", \"description\": \"A skill.\", \"license\": \"MIT\"}",
            &[],
        ),
        (
            "no frontmatter",
            "x",
            "# Title\n",
            NOT_LOADED,
            &["SKILL.md must start with YAML frontmatter (---)"],
        ),
        (
            "unclosed",
            "x",
            "---\nname: x\n",
            NOT_LOADED,
            &["SKILL.md frontmatter not properly closed with ---"],
        ),
        (
            "dashes end the frontmatter early",
            "x",
            "---\nname: x\ndescription: a---b\n---\n",
            "{\"name\": \"x\", \"description\": \"a\"}",
            &[],
        ),
        (
            "mapping values",
            "x",
            "---\nname: x\ndescription: Use when: asked\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: mapping values are not allowed here\n  in \"<unicode string>\", line 3, column 22:\n    description: Use when: asked\n                         ^ (line: 3)",
            ],
        ),
        (
            "flow sequence",
            "x",
            "---\nname: x\ndescription: y\nallowed-tools: [Read]\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: While scanning\n  in \"<unicode string>\", line 4, column 16:\n    allowed-tools: [Read]\n                   ^ (line: 4)\nFound ugly disallowed JSONesque flow mapping (surround with ' and ' to make text appear literally)\n  in \"<unicode string>\", line 4, column 17:\n    allowed-tools: [Read]\n                    ^ (line: 4)",
            ],
        ),
        (
            "tag",
            "x",
            "---\nname: x\ndescription: !!str y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: While scanning\n  in \"<unicode string>\", line 3, column 19:\n    description: !!str y\n                      ^ (line: 3)\nFound disallowed tag tokens (do not specify types in markup)\n  in \"<unicode string>\", line 3, column 14:\n    description: !!str y\n                 ^ (line: 3)",
            ],
        ),
        (
            "anchor",
            "x",
            "---\nname: &a x\ndescription: y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: While scanning\n  in \"<unicode string>\", line 2, column 7:\n    name: &a x\n          ^ (line: 2)\nFound confusing disallowed anchor token (surround with ' and ' to make text appear literally)\n  in \"<unicode string>\", line 2, column 9:\n    name: &a x\n            ^ (line: 2)",
            ],
        ),
        (
            "alias",
            "x",
            "---\nname: x\ndescription: *y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: found undefined alias 'y'\n  in \"<unicode string>\", line 3, column 14:\n    description: *y\n                 ^ (line: 3)",
            ],
        ),
        (
            "duplicate key",
            "x",
            "---\nname: x\nname: x\ndescription: y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: While parsing\n  in \"<unicode string>\", line 3, column 1:\n    name: x\n    ^ (line: 3)\nDuplicate key 'name' found\n  in \"<unicode string>\", line 3, column 5:\n    name: x\n        ^ (line: 3)",
            ],
        ),
        (
            "tab",
            "x",
            "---\nname: x\ndescription: y\n\tlicense: MIT\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: while scanning for the next token\nfound character '\\t' that cannot start any token\n  in \"<unicode string>\", line 4, column 1:\n    \tlicense: MIT\n    ^ (line: 4)",
            ],
        ),
        (
            "simple key",
            "x",
            "---\nname: x\nno colon\ndescription: y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: while scanning a simple key\n  in \"<unicode string>\", line 3, column 1:\n    no colon\n    ^ (line: 3)\ncould not find expected ':'\n  in \"<unicode string>\", line 4, column 1:\n    description: y\n    ^ (line: 4)",
            ],
        ),
        (
            "inconsistent indentation",
            "x",
            "---\nname: x\ndescription: y\nmetadata:\n  a: b\nlicense:\n   c: d\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: While parsing\n  in \"<unicode string>\", line 7, column 4:\n       c: d\n       ^ (line: 7)\nFound mapping with indentation inconsistent with previous mapping\n  in \"<unicode string>\", line 8, column 1:\n    \n    ^ (line: 8)",
            ],
        ),
        (
            "block end",
            "x",
            "---\nname: x\ndescription: 'y' z\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: while parsing a block mapping\n  in \"<unicode string>\", line 2, column 1:\n    name: x\n    ^ (line: 2)\nexpected <block end>, but found '<scalar>'\n  in \"<unicode string>\", line 3, column 18:\n    description: 'y' z\n                     ^ (line: 3)",
            ],
        ),
        (
            "two documents",
            "x",
            "---\nname: x\n...\ndescription: y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: expected a single document in the stream\n  in \"<unicode string>\", line 2, column 1:\n    name: x\n    ^ (line: 2)\nbut found another document\n  in \"<unicode string>\", line 4, column 1:\n    description: y\n    ^ (line: 4)",
            ],
        ),
        (
            "merge of a scalar",
            "x",
            "---\n<<: x\nname: x\ndescription: y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: while constructing a mapping\n  in \"<unicode string>\", line 2, column 1:\n    <<: x\n    ^ (line: 2)\nexpected a mapping or list of mappings for merging, but found scalar\n  in \"<unicode string>\", line 2, column 5:\n    <<: x\n        ^ (line: 2)",
            ],
        ),
        (
            "long line snippet",
            "x",
            "---\nname: x\ndescription: word word word word word word word word word word word word word word word word word word word word : y\n---\n",
            NOT_LOADED,
            &[
                "Invalid YAML in frontmatter: mapping values are not allowed here\n  in \"<unicode string>\", line 3, column 114:\n     ... d word word word word word word : y\n                                         ^ (line: 3)",
            ],
        ),
        (
            "sequence",
            "x",
            "---\n- a\n---\n",
            NOT_LOADED,
            &["SKILL.md frontmatter must be a YAML mapping"],
        ),
        (
            "scalar",
            "x",
            "---\ntext\n---\n",
            NOT_LOADED,
            &["SKILL.md frontmatter must be a YAML mapping"],
        ),
        (
            "empty",
            "x",
            "---\n---\n",
            NOT_LOADED,
            &["SKILL.md frontmatter must be a YAML mapping"],
        ),
        (
            "missing fields",
            "x",
            "---\nlicense: MIT\n---\n",
            "{\"license\": \"MIT\"}",
            &[
                "Missing required field in frontmatter: name",
                "Missing required field in frontmatter: description",
            ],
        ),
        (
            "unknown fields",
            "x",
            "---\nname: x\ndescription: y\nzeta: 1\nalpha: 2\n---\n",
            "{\"name\": \"x\", \"description\": \"y\", \"zeta\": \"1\", \"alpha\": \"2\"}",
            &[
                "Unexpected fields in frontmatter: alpha, zeta. Only ['allowed-tools', 'compatibility', 'description', 'license', 'metadata', 'name'] are allowed.",
            ],
        ),
        (
            "name list",
            "x",
            "---\nname:\n  - x\ndescription: y\n---\n",
            "{\"name\": [\"x\"], \"description\": \"y\"}",
            &["Field 'name' must be a non-empty string"],
        ),
        (
            "name empty",
            "x",
            "---\nname:\ndescription: y\n---\n",
            "{\"name\": \"\", \"description\": \"y\"}",
            &["Field 'name' must be a non-empty string"],
        ),
        (
            "everything wrong with a name",
            "x",
            "---\nname: -Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-\ndescription: y\n---\n",
            "{\"name\": \"-Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-\", \"description\": \"y\"}",
            &[
                "Skill name '-Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-' exceeds 64 character limit (72 chars)",
                "Skill name '-Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-' must be lowercase",
                "Skill name cannot start or end with a hyphen",
                "Skill name cannot contain consecutive hyphens",
                "Skill name '-Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-' contains invalid characters. Only letters, digits, and hyphens are allowed.",
                "Directory name 'x' must match skill name '-Bad--Name_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-'",
            ],
        ),
        (
            "unicode name",
            "天气",
            "---\nname: 天气\ndescription: y\n---\n",
            "{\"name\": \"天气\", \"description\": \"y\"}",
            &[],
        ),
        (
            "nfkc name",
            "abc",
            "---\nname: ａｂｃ\ndescription: y\n---\n",
            "{\"name\": \"ａｂｃ\", \"description\": \"y\"}",
            &[],
        ),
        (
            "combining mark",
            "é",
            "---\nname: é\ndescription: y\n---\n",
            "{\"name\": \"é\", \"description\": \"y\"}",
            &[],
        ),
        (
            "dir mismatch",
            "other",
            "---\nname: x\ndescription: y\n---\n",
            "{\"name\": \"x\", \"description\": \"y\"}",
            &["Directory name 'other' must match skill name 'x'"],
        ),
        (
            "empty dir name",
            "",
            "---\nname: x\ndescription: y\n---\n",
            "{\"name\": \"x\", \"description\": \"y\"}",
            &["Directory name '' must match skill name 'x'"],
        ),
        (
            "description too long",
            "x",
            "---\nname: x\ndescription: ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\n---\n",
            "{\"name\": \"x\", \"description\": \"ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\"}",
            &["Description exceeds 1024 character limit (1025 chars)"],
        ),
        (
            "description map",
            "x",
            "---\nname: x\ndescription:\n  a: b\n---\n",
            "{\"name\": \"x\", \"description\": {\"a\": \"b\"}}",
            &["Field 'description' must be a non-empty string"],
        ),
        (
            "compatibility",
            "x",
            "---\nname: x\ndescription: y\ncompatibility: ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n---\n",
            "{\"name\": \"x\", \"description\": \"y\", \"compatibility\": \"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"}",
            &["Compatibility exceeds 500 character limit (501 chars)"],
        ),
        (
            "compatibility list",
            "x",
            "---\nname: x\ndescription: y\ncompatibility:\n  - a\n---\n",
            "{\"name\": \"x\", \"description\": \"y\", \"compatibility\": [\"a\"]}",
            &["Field 'compatibility' must be a string"],
        ),
        (
            "yaml 1.1 words stay strings",
            "x",
            "---\nname: x\ndescription: yes\nlicense: ~\nmetadata:\n  n: 1.0\n  b: true\n  e:\n  l:\n    - a\n---\n",
            "{\"name\": \"x\", \"description\": \"yes\", \"license\": \"~\", \"metadata\": {\"n\": \"1.0\", \"b\": \"true\", \"e\": \"\", \"l\": \"['a']\"}}",
            &[],
        ),
        (
            "block scalars",
            "x",
            "---\nname: x\ndescription: >\n  folded\n  text\n\n  para\nlicense: |-\n  kept\n  lines\n---\n",
            "{\"name\": \"x\", \"description\": \"folded text\\npara\\n\", \"license\": \"kept\\nlines\"}",
            &[],
        ),
        (
            "quoted scalars",
            "x",
            "---\nname: 'x'\ndescription: \"a\\tb \\u00e9\"\nlicense: 'it''s'\n---\n",
            "{\"name\": \"x\", \"description\": \"a\\tb é\", \"license\": \"it's\"}",
            &[],
        ),
        (
            "plain multi-line",
            "x",
            "---\nname: x\ndescription: first\n  second\n\n  third\n---\n",
            "{\"name\": \"x\", \"description\": \"first second\\nthird\"}",
            &[],
        ),
        (
            "comments",
            "x",
            "---\n# c\nname: x # c\n\ndescription: y\n# c\n---\n",
            "{\"name\": \"x\", \"description\": \"y\"}",
            &[],
        ),
        (
            "nested merge",
            "x",
            "---\nname: x\ndescription: y\nmetadata:\n  <<:\n    a: b\n  c: d\n---\n",
            "{\"name\": \"x\", \"description\": \"y\", \"metadata\": {\"c\": \"d\", \"a\": \"b\"}}",
            &[],
        ),
        (
            "equals value",
            "x",
            "---\nname: x\ndescription: =\n---\n",
            "{\"name\": \"x\", \"description\": null}",
            &["Field 'description' must be a non-empty string"],
        ),
    ];

    #[test]
    fn cases_match_the_reference() {
        for (label, dir, content, meta, messages) in CASES {
            let (loaded, problems) = match parse_frontmatter(content) {
                Ok((metadata, _)) => {
                    let problems = validate_metadata(&metadata, Some(dir));
                    (Some(Value::Object(metadata)), problems)
                }
                Err(problem) => (None, vec![problem]),
            };
            let expected: Option<Value> = if meta.is_empty() {
                None
            } else {
                Some(serde_json::from_str(meta).unwrap())
            };
            assert_eq!(loaded, expected, "{label}: frontmatter");
            let got: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
            assert_eq!(&got, messages, "{label}: messages");
        }
    }

    fn kinds(content: &str, dir: &str) -> Vec<ProblemKind> {
        match parse_frontmatter(content) {
            Ok((metadata, _)) => validate_metadata(&metadata, Some(dir))
                .into_iter()
                .map(|p| p.kind)
                .collect(),
            Err(problem) => vec![problem.kind],
        }
    }

    #[test]
    fn problem_kinds() {
        use ProblemKind::*;
        let table: &[(&str, &str, &[ProblemKind])] = &[
            ("# no", "x", &[MissingFrontmatter]),
            ("---\nname: x\n", "x", &[UnclosedFrontmatter]),
            ("---\nname: [x]\n---\n", "x", &[InvalidYaml]),
            ("---\n- x\n---\n", "x", &[FrontmatterNotMapping]),
            ("---\nname: x\u{1}\n---\n", "x", &[UnsupportedYaml]),
            (
                "---\nlicense: MIT\n---\n",
                "x",
                &[MissingName, MissingDescription],
            ),
            (
                "---\nname: x\ndescription: y\nother: z\n---\n",
                "x",
                &[UnknownFields],
            ),
            (
                "---\nname: ''\ndescription: ''\n---\n",
                "x",
                &[NameNotString, DescriptionNotString],
            ),
            (
                "---\nname: -A--b_\ndescription: y\n---\n",
                "-A--b_",
                &[
                    NameNotLowercase,
                    NameHyphenAtEdge,
                    NameConsecutiveHyphens,
                    NameInvalidChars,
                ],
            ),
            (
                "---\nname: x\ndescription: y\n---\n",
                "z",
                &[NameDirMismatch],
            ),
            (
                "---\nname: x\ndescription: y\ncompatibility:\n  - a\n---\n",
                "x",
                &[CompatibilityNotString],
            ),
        ];
        for (content, dir, expected) in table {
            assert_eq!(&kinds(content, dir), expected, "{content:?}");
        }
        let long = format!(
            "---\nname: {0}\ndescription: {1}\ncompatibility: {2}\n---\n",
            "n".repeat(65),
            "d".repeat(1025),
            "c".repeat(501)
        );
        assert_eq!(
            kinds(&long, &"n".repeat(65)),
            vec![NameTooLong, DescriptionTooLong, CompatibilityTooLong]
        );
    }

    #[test]
    fn codes_are_stable_and_distinct() {
        use ProblemKind::*;
        let all = [
            PathNotFound,
            NotADirectory,
            MissingSkillFile,
            UnreadableSkillFile,
            MissingFrontmatter,
            UnclosedFrontmatter,
            InvalidYaml,
            UnsupportedYaml,
            FrontmatterNotMapping,
            UnknownFields,
            MissingName,
            MissingDescription,
            NameNotString,
            NameTooLong,
            NameNotLowercase,
            NameHyphenAtEdge,
            NameConsecutiveHyphens,
            NameInvalidChars,
            NameDirMismatch,
            DescriptionNotString,
            DescriptionTooLong,
            CompatibilityNotString,
            CompatibilityTooLong,
            UnprintableProperty,
        ];
        let codes: std::collections::BTreeSet<&str> = all.iter().map(ProblemKind::code).collect();
        assert_eq!(codes.len(), all.len());
        assert!(
            codes.iter().all(|c| c.starts_with("skill-")
                && c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-'))
        );
        assert_eq!(NameDirMismatch.code(), "skill-name-dir-mismatch");
        let crashes: Vec<_> = all.iter().filter(|k| k.is_reference_crash()).collect();
        assert_eq!(
            crashes,
            vec![&UnreadableSkillFile, &UnsupportedYaml, &UnprintableProperty]
        );
    }

    #[test]
    fn non_string_values_from_other_parsers() {
        let mut meta = Map::new();
        meta.insert("name".into(), Value::Bool(true));
        meta.insert("description".into(), serde_json::json!(12));
        meta.insert("compatibility".into(), Value::Null);
        let got: Vec<ProblemKind> = validate_metadata(&meta, None)
            .into_iter()
            .map(|p| p.kind)
            .collect();
        assert_eq!(
            got,
            vec![
                ProblemKind::NameNotString,
                ProblemKind::DescriptionNotString,
                ProblemKind::CompatibilityNotString
            ]
        );
    }

    #[test]
    fn directories() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("my-skill");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(
            validate(&dir).iter().map(|p| p.kind).collect::<Vec<_>>(),
            vec![ProblemKind::MissingSkillFile]
        );
        assert_eq!(
            validate(&dir.join("nope"))[0].kind,
            ProblemKind::PathNotFound
        );
        std::fs::write(
            dir.join("skill.md"),
            "---\nname: my-skill\ndescription: \"Say <hi> & 'bye'\"\nmetadata:\n  k:\n---\n",
        )
        .unwrap();
        assert_eq!(validate(&dir), vec![]);
        assert_eq!(
            validate(&dir.join("skill.md"))[0].kind,
            ProblemKind::NotADirectory
        );
        let properties = read_properties(&dir).unwrap();
        assert_eq!(
            properties,
            serde_json::json!({"name": "my-skill", "description": "Say <hi> & 'bye'", "metadata": {"k": ""}})
        );
        let prompt = to_prompt(std::slice::from_ref(&dir)).unwrap();
        let location = dir.canonicalize().unwrap().join("skill.md");
        assert_eq!(
            prompt,
            format!(
                "<available_skills>\n<skill>\n<name>\nmy-skill\n</name>\n<description>\nSay &lt;hi&gt; &amp; &#x27;bye&#x27;\n</description>\n<location>\n{}\n</location>\n</skill>\n</available_skills>",
                location.display()
            )
        );
        assert_eq!(
            to_prompt(&[]).unwrap(),
            "<available_skills>\n</available_skills>"
        );
        std::fs::write(
            dir.join("skill.md"),
            b"---\nname: my-skill\ndescription: caf\xe9\n---\n",
        )
        .unwrap();
        assert_eq!(validate(&dir)[0].kind, ProblemKind::UnreadableSkillFile);
        let error = read_properties(&temp.path().join("none")).unwrap_err();
        assert_eq!(error.problem().kind, ProblemKind::MissingSkillFile);
        assert!(error.to_string().starts_with("SKILL.md not found in /"));
    }
}
