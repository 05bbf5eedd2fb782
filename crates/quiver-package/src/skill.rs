//! `SKILL.md`: Agent Skills frontmatter plus the fields agents use in practice.
//!
//! Loading reads the whole file once: the frontmatter into typed fields and the body
//! ([`Skill::body`]) into the catalog snapshot, so an activation serves the body of the snapshot
//! its turn sees and an edit shows only after a reload.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, Severity};
use crate::names::RESERVED_SKILL_NAMES;
use crate::skills_ref::ProblemKind;
use crate::{frontmatter, source, yaml};

/// Frontmatter keys this loader understands; anything else is a warning.
pub const KNOWN_KEYS: [&str; 21] = [
    "name",
    "version",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
    "when_to_use",
    "disallowed-tools",
    "model",
    "context",
    "agent",
    "disable-model-invocation",
    "user-invocable",
    "tools",
    "platforms",
    "scopes",
    "permissions",
    "argument-hint",
    "examples",
    "negative_examples",
];

/// A loaded skill.
#[derive(Debug, Clone, Serialize)]
pub struct Skill {
    /// `<package>` for the package's own skill, `<package>/<skill>` for `skills/<skill>/`.
    pub id: String,
    /// The `name` field as written (may be Unicode, such as `天气`).
    pub name: String,
    /// The `description` field.
    pub description: String,
    /// The `SKILL.md` file.
    pub file: PathBuf,
    /// The skill's folder: the folder of its `SKILL.md` (the package folder for a package's
    /// own root `SKILL.md`).
    pub dir: PathBuf,
    /// The frontmatter YAML exactly as written.
    pub frontmatter: String,
    /// Line on which the body starts.
    pub body_line: u64,
    /// The instructions: the text after the frontmatter, as read at load.
    pub body: String,
    /// What reading the skill brings into the tool list: local names of items of its package
    /// (`<package>.<name>`), in `tools:` order. From `tools:` when written, each entry checked
    /// at load (its own `skills/<s>/tools/`, or an agent skill's own tools, and the package's
    /// exposed tools, agents and workflows; any other name is an error and left out); without
    /// `tools:`, every tool of its own `tools/` folder.
    pub unlocks: Vec<String>,
    /// The package folder, the only place [`Skill::read_file`] reads from.
    pub package_root: PathBuf,
    /// Every other field.
    pub meta: SkillMeta,
    /// The MCP server this skill was fetched from (`mcp_servers:` in the config file), when
    /// it is a mirror of one of its skills: read like any skill, its scripts never run.
    pub from_server: Option<String>,
    /// Every file of the skill's folder ([`crate::skill_files`]: `forms.md`, `reference/x.md`,
    /// `scripts/run.py`, ...), relative to [`Skill::dir`], sorted.
    pub files: Vec<String>,
}

/// The optional fields of a skill.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SkillMeta {
    /// License name or file.
    pub license: Option<String>,
    /// Environment requirements.
    pub compatibility: Option<String>,
    /// Free-form string metadata.
    pub metadata: Map<String, Value>,
    /// Tools pre-approved while the skill is active (`tool`, `pkg.tool`, `tool(prefix*)`).
    pub allowed_tools: Vec<String>,
    /// Tools removed while the skill is active.
    pub disallowed_tools: Vec<String>,
    /// When the model should open it.
    pub when_to_use: Option<String>,
    /// The only model that may see it.
    pub model: Option<String>,
    /// `context: fork`: run in a child session.
    pub fork: bool,
    /// The agent a forked skill runs with.
    pub agent: Option<String>,
    /// Only a person can start it.
    pub disable_model_invocation: bool,
    /// Offered to people as a `/name` command (default true).
    pub user_invocable: bool,
    /// `tools:` as written (`None` without one; `Some([])` written empty, which unlocks
    /// nothing); [`Skill::unlocks`] is what it resolves to.
    pub tools: Option<Vec<String>>,
    /// Platforms it is restricted to.
    pub platforms: Option<Vec<String>>,
    /// Scopes it is restricted to.
    pub scopes: Option<Vec<String>>,
    /// Permission rules the caller must meet.
    pub permissions: Vec<String>,
    /// Hint for the arguments of the `/name` command.
    pub argument_hint: Option<String>,
    /// Requests that must find the skill (checked by `quiver test`).
    pub examples: Vec<String>,
    /// Requests that must not put it first.
    pub negative_examples: Vec<String>,
}

impl Skill {
    /// Reads `rel`, one of [`Skill::files`], as UTF-8 text of at most `limit` bytes, through
    /// the package's checked reader: a file that has become a link out of the package folder
    /// (or under `/proc`, `/dev`) is refused unread, and so is a name not in [`Skill::files`].
    pub fn read_file(&self, rel: &str, limit: u64) -> Result<String, Diagnostic> {
        let path = self.dir.join(rel);
        if !self.files.iter().any(|f| f == rel) {
            return Err(Diagnostic::error(
                "file-unreadable",
                path,
                format!("`{rel}` is not one of the skill's files"),
            ));
        }
        source::PackageDir::new(&self.package_root).read_text_limited(&path, limit)
    }

    /// The local part of the id (`cities` in `weather/cities`), `None` for a package's own skill.
    pub fn local_name(&self) -> Option<&str> {
        self.id.split_once('/').map(|(_, local)| local)
    }
}

/// The parsed frontmatter of a `SKILL.md`, before it is given an id.
#[derive(Debug, Clone)]
pub struct ParsedSkill {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// Verbatim YAML.
    pub frontmatter: String,
    /// Line the body starts on.
    pub body_line: u64,
    /// The text after the frontmatter.
    pub body: String,
    /// Other fields.
    pub meta: SkillMeta,
}

/// Parses a `SKILL.md` leniently (load mode): problems that the strict validator reports but
/// that do not stop a client from using the skill are warnings.
pub fn parse_skill(
    text: &str,
    file: &Path,
    dir_name: Option<&str>,
) -> (Option<ParsedSkill>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let split = match frontmatter::split(text) {
        Ok(split) => split,
        Err(err) => {
            let code = match err {
                frontmatter::SplitError::Missing => "skill-missing-frontmatter",
                frontmatter::SplitError::Unclosed => "skill-unclosed-frontmatter",
            };
            diags.push(
                Diagnostic::error(code, file, err.to_string())
                    .at(1, 1)
                    .with_help(
                        "start the file with `---`, then `name:` and `description:`, then `---`",
                    ),
            );
            return (None, diags);
        }
    };
    let value: Value = match yaml::parse(&split.yaml, file, split.yaml_line) {
        Ok(value) => value,
        Err(diag) => {
            diags.push(diag);
            return (None, diags);
        }
    };
    let Value::Object(map) = value else {
        diags.push(
            Diagnostic::error(
                "skill-frontmatter-not-mapping",
                file,
                "the frontmatter must be a YAML mapping of fields",
            )
            .at(split.yaml_line, 1),
        );
        return (None, diags);
    };
    // A plain Agent Skills skill (no Quiver field, which the reference refuses anyway) hears
    // in load mode what the reference would refuse in its YAML.
    let plain = map
        .keys()
        .all(|k| crate::skills_ref::ALLOWED_FIELDS.contains(&k.as_str()));
    if plain && let Some(warning) = strict_yaml_warning(text, &split.yaml, file, split.yaml_line) {
        diags.push(warning);
    }
    let line = |key: &str| yaml::key_line(&split.yaml, split.yaml_line, key);
    let mut fields = Fields {
        map: &map,
        file,
        line: &line,
        diags: &mut diags,
    };

    let name = fields.required_string("name");
    let description = fields.required_string("description");
    let meta = SkillMeta {
        license: fields.optional_string("license"),
        compatibility: fields.optional_string("compatibility"),
        metadata: match map.get("metadata") {
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                fields.wrong_type("metadata", "a mapping", Severity::Warning);
                Map::new()
            }
            None => Map::new(),
        },
        allowed_tools: fields.word_list("allowed-tools"),
        disallowed_tools: fields.word_list("disallowed-tools"),
        when_to_use: fields.optional_string("when_to_use"),
        model: fields.optional_string("model"),
        fork: match fields.optional_string("context").as_deref() {
            None => false,
            Some("fork") => true,
            Some(other) => {
                fields.push(
                    Severity::Warning,
                    "skill-unknown-context",
                    "context",
                    format!("`context: {other}` is not known; only `fork` is"),
                );
                false
            }
        },
        agent: fields.optional_string("agent"),
        disable_model_invocation: fields.flag("disable-model-invocation", false),
        user_invocable: fields.flag("user-invocable", true),
        tools: fields.written("tools").then(|| fields.word_list("tools")),
        platforms: fields.restriction("platforms"),
        scopes: fields.restriction("scopes"),
        permissions: fields.word_list("permissions"),
        argument_hint: fields.optional_string("argument-hint"),
        examples: fields.string_list("examples"),
        negative_examples: fields.string_list("negative_examples"),
    };
    for (key, value) in [
        ("name", name.as_ref()),
        ("description", description.as_ref()),
        ("when_to_use", meta.when_to_use.as_ref()),
    ] {
        if let Some(value) = value {
            let at = line(key);
            fields
                .diags
                .extend(crate::text::check(file, key, value, at));
        }
    }
    for rule in &meta.permissions {
        if let Err(message) = crate::rules::check_rule(rule) {
            fields.push(
                Severity::Error,
                "invalid-permission-rule",
                "permissions",
                message,
            );
        }
    }
    for key in map.keys() {
        if !KNOWN_KEYS.contains(&key.as_str()) {
            fields.push(
                Severity::Warning,
                "skill-unknown-field",
                key,
                format!("unknown frontmatter field `{key}` is ignored"),
            );
        }
    }
    for problem in crate::skills_ref::validate_metadata(&map, dir_name) {
        let Some(severity) = load_mode_severity(problem.kind) else {
            continue;
        };
        let key = match problem.kind {
            ProblemKind::DescriptionTooLong => "description",
            ProblemKind::CompatibilityTooLong | ProblemKind::CompatibilityNotString => {
                "compatibility"
            }
            _ => "name",
        };
        let help = match severity {
            Severity::Error => {
                "skill names use lowercase letters, digits and single hyphens, at most 64 characters"
            }
            _ => {
                "clients accept this, but the Agent Skills spec does not; `quiver lint --strict` reports it as an error"
            }
        };
        diags.push(
            Diagnostic::new(severity, problem.kind.code(), file, problem.message)
                .at_line(line(key))
                .with_help(help),
        );
    }
    if let Some(name) = &name
        && RESERVED_SKILL_NAMES.contains(&name.as_str())
    {
        diags.push(
            Diagnostic::error(
                "skill-name-reserved",
                file,
                format!("`{name}` is a folder name of the package format and cannot name a skill"),
            )
            .at_line(line("name"))
            .with_help("pick another name"),
        );
    }
    match (name, description) {
        (Some(name), Some(description)) if !diags.iter().any(Diagnostic::is_error) => (
            Some(ParsedSkill {
                name,
                description,
                frontmatter: split.yaml.into_owned(),
                body_line: split.body_line,
                body: split.body.to_owned(),
                meta,
            }),
            diags,
        ),
        _ => (None, diags),
    }
}

/// How load mode treats a problem of the reference validator: `None` when load mode reports
/// it itself (missing fields, unknown keys against its wider field list).
/// A warning when the frontmatter (`yaml`, from line `yaml_line` of `text`) is YAML that
/// clients read but the reference validator refuses (flow collections such as `[a, b]` or
/// `{a: b}`, anchors, aliases, tags): the skill loads, and `quiver skill validate`, `quiver
/// lint --strict` and `skills-ref` report the same text as an error. Only frontmatter holding
/// one of the characters those forms need is checked again.
fn strict_yaml_warning(text: &str, yaml: &str, file: &Path, yaml_line: u64) -> Option<Diagnostic> {
    if !yaml.contains(['[', '{', '&', '*', '!']) {
        return None;
    }
    let problem = crate::skills_ref::parse_frontmatter(text).err()?;
    (problem.kind == ProblemKind::InvalidYaml).then(|| {
        Diagnostic::warning(problem.kind.code(), file, problem.message)
            .at_line(Some(yaml_line))
            .with_help(
                "clients accept this, but the Agent Skills validator `skills-ref` (and `quiver skill validate`) refuse it; write block YAML: lists as `- item` lines, no anchors or tags",
            )
    })
}

fn load_mode_severity(kind: ProblemKind) -> Option<Severity> {
    match kind {
        ProblemKind::NameTooLong
        | ProblemKind::NameNotLowercase
        | ProblemKind::NameHyphenAtEdge
        | ProblemKind::NameConsecutiveHyphens
        | ProblemKind::NameInvalidChars => Some(Severity::Error),
        ProblemKind::NameDirMismatch
        | ProblemKind::DescriptionTooLong
        | ProblemKind::CompatibilityTooLong
        | ProblemKind::CompatibilityNotString => Some(Severity::Warning),
        _ => None,
    }
}

/// Typed access to frontmatter fields, recording a diagnostic for each wrong type.
struct Fields<'a, 'd> {
    map: &'a Map<String, Value>,
    file: &'a Path,
    line: &'a dyn Fn(&str) -> Option<u64>,
    diags: &'d mut Vec<Diagnostic>,
}

impl Fields<'_, '_> {
    fn push(&mut self, severity: Severity, code: &'static str, key: &str, message: String) {
        let line = (self.line)(key);
        self.diags
            .push(Diagnostic::new(severity, code, self.file, message).at_line(line));
    }

    fn wrong_type(&mut self, key: &str, expected: &str, severity: Severity) {
        self.push(
            severity,
            "skill-wrong-type",
            key,
            format!("`{key}` must be {expected}; it is ignored"),
        );
    }

    fn required_string(&mut self, key: &str) -> Option<String> {
        match self.map.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                self.push(
                    Severity::Error,
                    "skill-missing-field",
                    key,
                    format!("the required field `{key}` is missing or empty"),
                );
                None
            }
            Some(_) => {
                self.push(
                    Severity::Error,
                    "skill-wrong-type",
                    key,
                    format!("`{key}` must be a string"),
                );
                None
            }
        }
    }

    fn optional_string(&mut self, key: &str) -> Option<String> {
        match self.map.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            None | Some(Value::Null) => None,
            Some(_) => {
                self.wrong_type(key, "a string", Severity::Warning);
                None
            }
        }
    }

    fn flag(&mut self, key: &str, default: bool) -> bool {
        match self.map.get(key) {
            Some(Value::Bool(b)) => *b,
            None | Some(Value::Null) => default,
            Some(_) => {
                self.wrong_type(key, "`true` or `false`", Severity::Warning);
                default
            }
        }
    }

    /// Whether `key` is written with a value (`key:` alone, or `null`, counts as absent).
    fn written(&self, key: &str) -> bool {
        self.map.get(key).is_some_and(|v| !v.is_null())
    }

    /// A list given as a YAML list or as space-separated words (`allowed-tools: Read Grep`).
    fn word_list(&mut self, key: &str) -> Vec<String> {
        match self.map.get(key) {
            Some(Value::String(s)) => split_words(s),
            Some(Value::Array(items)) => {
                let words: Option<Vec<String>> = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect();
                match words {
                    Some(words) => {
                        if key == "allowed-tools" {
                            self.push(Severity::Warning, "skill-allowed-tools-list", key, "`allowed-tools` is a list; the Agent Skills spec expects a space-separated string".into());
                        }
                        words
                    }
                    None => {
                        self.wrong_type(key, "a list of strings", Severity::Warning);
                        Vec::new()
                    }
                }
            }
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                self.wrong_type(key, "a string or a list of strings", Severity::Warning);
                Vec::new()
            }
        }
    }

    /// A YAML list of strings (a single string is one entry).
    fn string_list(&mut self, key: &str) -> Vec<String> {
        match self.map.get(key) {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                self.wrong_type(key, "a list of strings", Severity::Warning);
                Vec::new()
            }
        }
    }

    fn restriction(&mut self, key: &str) -> Option<Vec<String>> {
        self.map.get(key)?;
        let list = self.word_list(key);
        let line = (self.line)(key);
        self.diags.extend(crate::tool::restriction_errors(
            self.file,
            key,
            Some(&list),
            line,
        ));
        Some(list)
    }
}

/// Splits `Bash(git diff:*) Read` into entries, keeping spaces inside parentheses.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                continue;
            }
            ',' if depth == 0 => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str, dir: Option<&str>) -> (bool, Vec<&'static str>) {
        let (skill, diags) = parse_skill(text, Path::new("SKILL.md"), dir);
        (skill.is_some(), diags.iter().map(|d| d.code).collect())
    }

    #[test]
    fn table() {
        let cases: &[(&str, Option<&str>, bool, &[&str])] = &[
            (
                "---\nname: weather\ndescription: Weather.\n---\nbody",
                Some("weather"),
                true,
                &[],
            ),
            (
                "---\nname: 天气\ndescription: 天气预报\n---\n",
                Some("天气"),
                true,
                &[],
            ),
            (
                "---\nname: weather\ndescription: W\n---\n",
                Some("other"),
                true,
                &["skill-name-dir-mismatch"],
            ),
            (
                "---\nname: w\ndescription: W\nextra: 1\n---\n",
                None,
                true,
                &["skill-unknown-field"],
            ),
            (
                "---\nname: w\ndescription: W\nallowed-tools: [Read, Grep]\n---\n",
                None,
                true,
                &["skill-frontmatter-invalid-yaml", "skill-allowed-tools-list"],
            ),
            // Issue 22 item 14: a flow list in `metadata` loads; the warning says what
            // `skill validate` (as skills-ref) refuses. A Quiver field's flow list is not
            // judged by the reference's YAML rules.
            (
                "---\nname: w\ndescription: W\nmetadata:\n  tags: [a, b]\n---\n",
                None,
                true,
                &["skill-frontmatter-invalid-yaml"],
            ),
            (
                "---\nname: w\ndescription: W\nplatforms: [qq]\nmetadata:\n  tags: [a, b]\n---\n",
                None,
                true,
                &[],
            ),
            (
                "no frontmatter",
                None,
                false,
                &["skill-missing-frontmatter"],
            ),
            (
                "---\nname: w\n",
                None,
                false,
                &["skill-unclosed-frontmatter"],
            ),
            ("---\nname: [w\n---\n", None, false, &["yaml-syntax"]),
            (
                "---\n- a\n---\n",
                None,
                false,
                &["skill-frontmatter-not-mapping"],
            ),
            ("---\nname: w\n---\n", None, false, &["skill-missing-field"]),
            (
                "---\nname: 5\ndescription: d\n---\n",
                None,
                false,
                &["skill-wrong-type"],
            ),
            (
                "---\nname: Weather\ndescription: d\n---\n",
                None,
                false,
                &["skill-name-not-lowercase"],
            ),
            (
                "---\nname: a--b\ndescription: d\n---\n",
                None,
                false,
                &["skill-name-consecutive-hyphens"],
            ),
            (
                "---\nname: -ab\ndescription: d\n---\n",
                None,
                false,
                &["skill-name-hyphen-at-edge"],
            ),
            (
                "---\nname: a_b\ndescription: d\n---\n",
                None,
                false,
                &["skill-name-invalid-chars"],
            ),
            (
                &format!("---\nname: w\ndescription: {}\n---\n", "d".repeat(1025)),
                None,
                true,
                &["skill-description-too-long"],
            ),
            (
                "---\nname: scripts\ndescription: d\n---\n",
                None,
                false,
                &["skill-name-reserved"],
            ),
            (
                "---\nname: w\ndescription: d\nplatforms: []\n---\n",
                None,
                false,
                &["empty-restriction-list"],
            ),
            (
                "---\nname: w\ndescription: d\ncontext: fork\nagent: helper\n---\n",
                None,
                true,
                &[],
            ),
        ];
        for (text, dir, loads, want) in cases {
            assert_eq!(codes(text, *dir), (*loads, want.to_vec()), "{text}");
        }
    }

    #[test]
    fn fields_are_read() {
        let text = "---\nname: w\ndescription: d\nallowed-tools: Bash(git diff:*) Read\ndisable-model-invocation: true\nuser-invocable: false\nmetadata:\n  author: me\n---\n# Body\n";
        let (skill, diags) = parse_skill(text, Path::new("SKILL.md"), None);
        assert!(diags.is_empty(), "{diags:?}");
        let skill = skill.unwrap();
        assert_eq!(skill.meta.allowed_tools, ["Bash(git diff:*)", "Read"]);
        assert!(skill.meta.disable_model_invocation && !skill.meta.user_invocable);
        assert_eq!(skill.body_line, 10);
        assert_eq!(skill.meta.metadata["author"], "me");
    }

    #[test]
    fn error_lines_point_into_the_file() {
        let text = "---\nname: w\ndescription: d\nplatforms: []\n---\n";
        let (_, diags) = parse_skill(text, Path::new("SKILL.md"), None);
        assert_eq!(diags[0].line, Some(4));
    }
}
