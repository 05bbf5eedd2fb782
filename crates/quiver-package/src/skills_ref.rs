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

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

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

// ------------------------------------------------------------------------- paths

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `(root, parts)` as Python's `PurePosixPath` parses a path.
fn pure_path_parts(path: &Path) -> (&'static str, Vec<String>) {
    let text = path_text(path);
    let root = if text.starts_with("//") && !text.starts_with("///") {
        "//"
    } else if text.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts = text
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .map(str::to_owned)
        .collect();
    (root, parts)
}

/// `str(pathlib.Path(path))`: the path as the reference prints it (`./a//b/` is `a/b`).
pub fn display_path(path: &Path) -> String {
    let (root, parts) = pure_path_parts(path);
    let joined = format!("{root}{}", parts.join("/"));
    if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// `pathlib.Path(path).name` (empty for `.` and `/`).
pub fn path_name(path: &Path) -> String {
    pure_path_parts(path).1.pop().unwrap_or_default()
}

/// `pathlib.Path(path).parent`, as a path.
pub fn path_parent(path: &Path) -> PathBuf {
    let (root, mut parts) = pure_path_parts(path);
    parts.pop();
    let joined = format!("{root}{}", parts.join("/"));
    PathBuf::from(if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    })
}

/// `pathlib.Path(path).resolve()`: absolute, with symlinks resolved where they exist.
pub fn resolve_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut resolved = PathBuf::from("/");
    let mut budget = 64;
    resolve_into(&mut resolved, &absolute, &mut budget);
    resolved
}

fn resolve_into(resolved: &mut PathBuf, path: &Path, budget: &mut usize) {
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => *resolved = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let candidate = resolved.join(name);
                match std::fs::read_link(&candidate) {
                    Ok(target) if *budget > 0 => {
                        *budget -= 1;
                        if target.is_absolute() {
                            *resolved = PathBuf::from("/");
                        }
                        resolve_into(resolved, &target, budget);
                    }
                    _ => *resolved = candidate,
                }
            }
        }
    }
}

// ---------------------------------------------------------------- Python helpers

/// Python's `str.isspace`.
fn py_is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(py_is_space)
}

/// Letter-like symbols Rust counts as alphabetic (Other_Alphabetic, category So) but Python's
/// `isalpha` does not.
fn is_symbol_letter(c: char) -> bool {
    matches!(c, '\u{24b6}'..='\u{24e9}' | '\u{1f130}'..='\u{1f149}' | '\u{1f150}'..='\u{1f169}' | '\u{1f170}'..='\u{1f189}')
}

/// Python's `str.isalnum` for one character: a letter (category L*) or a number (N*).
fn py_is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    (c.is_alphabetic() || c.is_numeric())
        && !unicode_normalization::char::is_combining_mark(c)
        && !is_symbol_letter(c)
}

/// Python's `str.isprintable` for one character, without the unassigned code points.
fn py_is_printable(c: char) -> bool {
    let u = c as u32;
    if c.is_control() {
        return false;
    }
    if c == ' ' {
        return true;
    }
    // Zs, Zl, Zp
    if matches!(
        u,
        0xa0 | 0x1680 | 0x2000..=0x200a | 0x2028 | 0x2029 | 0x202f | 0x205f | 0x3000
    ) {
        return false;
    }
    // Cf
    if matches!(
        u,
        0xad | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x13438
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    ) {
        return false;
    }
    // Co, and the non-characters
    !matches!(u, 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd | 0xfffe | 0xffff)
}

/// Python's `repr()` of a string (click quotes paths in usage errors with it).
pub fn python_repr(s: &str) -> String {
    py_repr(s)
}

fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_ascii() || py_is_printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// `json.dumps(value, indent=2)` (ASCII-only, `\uXXXX` escapes, `": "` and `","`).
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_python_json(&mut out, value, 0);
    out
}

fn write_python_json(out: &mut String, value: &Value, depth: usize) {
    let pad = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_python_json_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_python_json(out, item, depth + 1);
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_python_json_string(out, key);
                out.push_str(": ");
                write_python_json(out, item, depth + 1);
            }
            pad(out, depth);
            out.push('}');
        }
    }
}

fn write_python_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `html.escape` (with quotes).
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

// ----------------------------------------------------------------------- parsing

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
        lines.extend([
            "<skill>".to_owned(),
            "<name>".to_owned(),
            html_escape(&name),
            "</name>".to_owned(),
            "<description>".to_owned(),
            html_escape(&description),
            "</description>".to_owned(),
            "<location>".to_owned(),
            location,
            "</location>".to_owned(),
            "</skill>".to_owned(),
        ]);
    }
    lines.push("</available_skills>".to_owned());
    Ok(lines.join("\n"))
}

/// A port of the YAML loader `skills-ref` uses: `strictyaml.load` (strictyaml 1.7.3 and the
/// ruamel.yaml 0.16.13 it vendors), restricted to what strictyaml lets through.
///
/// strictyaml reads every scalar as a string (no booleans, numbers, nulls or dates), and
/// rejects flow collections (`[a]`, `{a: b}`), tags (`!x`), anchors (`&x`) and duplicate keys.
/// The scanner, parser, composer and constructor below follow ruamel's code step by step,
/// including its lookahead, its comment bookkeeping and its error texts and positions, so that
/// both the verdict and the message of an invalid document are the reference's. Where the
/// reference crashes with a Python exception instead of reporting a YAML error, the loader
/// returns [`LoadError::crash`] set.
mod strictyaml {
    use std::collections::{BTreeMap, VecDeque};

    use super::py_repr;

    const LABEL: &str = "<unicode string>";
    const THE_END: &str = "\n\0\r\u{85}\u{2028}\u{2029}";
    const THE_END_SPACE_TAB: &str = " \n\0\t\r\u{85}\u{2028}\u{2029}";
    const LINE_BREAKS: &str = "\r\n\u{85}\u{2028}\u{2029}";
    const NUL_SPACE_BREAKS: &str = "\0 \r\n\u{85}\u{2028}\u{2029}";

    fn is_in(ch: char, set: &str) -> bool {
        set.contains(ch)
    }

    /// A loaded value, as strictyaml's `.data` gives it.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) enum Data {
        /// Every scalar.
        Str(String),
        /// A block sequence.
        Seq(Vec<Data>),
        /// A block mapping, in document order.
        Map(Vec<(Key, Data)>),
        /// A plain `=` or `<<` used as a value: ruamel builds an opaque `TaggedScalar` (its
        /// `str()` is the text).
        Tagged(String),
    }

    /// A mapping key.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) enum Key {
        /// The usual key.
        Str(String),
        /// A complex key (`? - a`): a tuple in Python. strictyaml crashes on it later.
        Tuple(Vec<String>),
    }

    /// Why a document did not load.
    #[derive(Debug)]
    pub(super) struct LoadError {
        /// The reference's text of the error.
        pub(super) message: String,
        /// The reference does not report this one: it crashes with a Python exception.
        pub(super) crash: bool,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Mark {
        index: usize,
        line: usize,
        column: usize,
    }

    #[derive(Debug)]
    struct Marked {
        context: Option<String>,
        context_mark: Option<Mark>,
        problem: String,
        problem_mark: Option<Mark>,
        note: Option<String>,
    }

    /// ruamel's `MarkedYAMLError`, or a Python exception that is not a YAML error.
    #[derive(Debug)]
    enum YamlError {
        Marked(Box<Marked>),
        Crash(String),
    }

    type YResult<T> = Result<T, YamlError>;

    fn err(
        context: Option<&str>,
        context_mark: Option<Mark>,
        problem: String,
        problem_mark: Mark,
    ) -> YamlError {
        YamlError::Marked(Box::new(Marked {
            context: context.map(str::to_owned),
            context_mark,
            problem,
            problem_mark: Some(problem_mark),
            note: None,
        }))
    }

    fn crash(what: &str) -> YamlError {
        YamlError::Crash(what.to_owned())
    }

    fn char_repr(ch: char) -> String {
        py_repr(&ch.to_string())
    }

    /// `StringMark.__str__`: the position and a snippet of its line with a caret.
    fn render_mark(mark: Mark, buf: &[char]) -> String {
        const STOP: &str = "\0\r\n\u{85}\u{2028}\u{2029}";
        let pointer = mark.index;
        let mut head = "";
        let mut start = pointer;
        while start > 0 && !is_in(buf[start - 1], STOP) {
            start -= 1;
            // `pointer - start > max_length / 2 - 1` with max_length 75
            if pointer - start >= 37 {
                head = " ... ";
                start += 5;
                break;
            }
        }
        let mut tail = "";
        let mut end = pointer;
        while end < buf.len() && !is_in(buf[end], STOP) {
            end += 1;
            if end - pointer >= 37 {
                tail = " ... ";
                end -= 5;
                break;
            }
        }
        let snippet: String = buf[start.min(end)..end].iter().collect();
        let caret_pad = 4 + pointer - start + head.chars().count();
        format!(
            "  in \"{LABEL}\", line {}, column {}:\n    {head}{snippet}{tail}\n{}^ (line: {})",
            mark.line + 1,
            mark.column + 1,
            " ".repeat(caret_pad),
            mark.line + 1
        )
    }

    /// `MarkedYAMLError.__str__`.
    fn render_error(error: &YamlError, buf: &[char]) -> String {
        match error {
            YamlError::Crash(what) => what.clone(),
            YamlError::Marked(marked) => {
                let Marked {
                    context,
                    context_mark,
                    problem,
                    problem_mark,
                    note,
                } = marked.as_ref();
                let mut lines = Vec::new();
                if let Some(context) = context {
                    lines.push(context.clone());
                }
                if let Some(cm) = context_mark {
                    let same =
                        problem_mark.is_some_and(|pm| pm.line == cm.line && pm.column == cm.column);
                    if !same {
                        lines.push(render_mark(*cm, buf));
                    }
                }
                lines.push(problem.clone());
                if let Some(pm) = problem_mark {
                    lines.push(render_mark(*pm, buf));
                }
                if let Some(note) = note {
                    lines.push(note.clone());
                }
                lines.join("\n")
            }
        }
    }

    // ------------------------------------------------------------------ tokens

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum K {
        Directive,
        DocumentStart,
        DocumentEnd,
        StreamStart,
        StreamEnd,
        BlockSequenceStart,
        BlockMappingStart,
        BlockEnd,
        FlowSequenceStart,
        FlowMappingStart,
        FlowSequenceEnd,
        FlowMappingEnd,
        Key,
        Value,
        BlockEntry,
        FlowEntry,
        Alias,
        Anchor,
        Tag,
        Scalar,
        Comment,
    }

    impl K {
        /// ruamel's `Token.id`.
        fn id(self) -> &'static str {
            match self {
                K::Directive => "<directive>",
                K::DocumentStart => "<document start>",
                K::DocumentEnd => "<document end>",
                K::StreamStart => "<stream start>",
                K::StreamEnd => "<stream end>",
                K::BlockSequenceStart => "<block sequence start>",
                K::BlockMappingStart => "<block mapping start>",
                K::BlockEnd => "<block end>",
                K::FlowSequenceStart => "[",
                K::FlowMappingStart => "{",
                K::FlowSequenceEnd => "]",
                K::FlowMappingEnd => "}",
                K::Key => "?",
                K::Value => ":",
                K::BlockEntry => "-",
                K::FlowEntry => ",",
                K::Alias => "<alias>",
                K::Anchor => "<anchor>",
                K::Tag => "<tag>",
                K::Scalar => "<scalar>",
                K::Comment => "<comment>",
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Directive {
        Yaml(Option<u64>),
        Tag(String),
        Other,
    }

    #[derive(Debug, Clone)]
    struct Token {
        kind: K,
        start: Mark,
        end: Mark,
        /// ruamel's `_comment` list, reduced to which slots hold something.
        comment: Option<Vec<bool>>,
        /// Scalar value, alias or anchor name, directive name.
        value: String,
        plain: bool,
        style: Option<char>,
        directive: Directive,
    }

    impl Token {
        fn new(kind: K, start: Mark, end: Mark) -> Self {
            Token {
                kind,
                start,
                end,
                comment: None,
                value: String::new(),
                plain: false,
                style: None,
                directive: Directive::Other,
            }
        }

        fn add_post_comment(&mut self) {
            let slots = self.comment.get_or_insert_with(|| vec![false, false]);
            slots[0] = true;
        }

        fn add_pre_comments(&mut self) -> YResult<()> {
            let slots = self.comment.get_or_insert_with(|| vec![false, false]);
            if slots[1] {
                return Err(crash("AssertionError (ruamel.yaml comment bookkeeping)"));
            }
            slots[1] = true;
            Ok(())
        }

        fn split_comment(&mut self) {
            if let Some(slots) = &self.comment
                && slots[0]
                && !slots[1]
            {
                self.comment = None;
            }
        }
    }

    /// `Token.move_comment`.
    fn move_comment(source: &mut Token, target: &mut Token, empty: bool) -> YResult<()> {
        let Some(c) = source.comment.clone() else {
            return Ok(());
        };
        if matches!(target.kind, K::StreamEnd | K::DocumentStart) {
            return Ok(());
        }
        source.comment = None;
        match &mut target.comment {
            None => {
                target.comment = Some(if empty {
                    vec![c[0], c[1], false, false, c[0]]
                } else {
                    c
                });
            }
            Some(tc) => {
                if (c[0] && tc[0]) || (c[1] && tc[1]) {
                    return Err(crash(
                        "NotImplementedError: overlap in comment (ruamel.yaml)",
                    ));
                }
                if c[0] {
                    tc[0] = true;
                }
                if c[1] {
                    tc[1] = true;
                }
            }
        }
        Ok(())
    }

    struct SimpleKey {
        token_number: usize,
        required: bool,
        index: usize,
        line: usize,
        column: usize,
        mark: Mark,
    }

    // ----------------------------------------------------------------- scanner

    /// ruamel's `Reader` + `RoundTripScanner` + strictyaml's `StrictYAMLScanner`.
    struct Scanner {
        buf: Vec<char>,
        index: usize,
        line: usize,
        column: usize,
        done: bool,
        flow_context: Vec<char>,
        tokens: VecDeque<Token>,
        tokens_taken: usize,
        indent: isize,
        indents: Vec<isize>,
        allow_simple_key: bool,
        possible_simple_keys: BTreeMap<usize, SimpleKey>,
        /// A `\u` escape produced a lone surrogate.
        lone_surrogate: bool,
    }

    impl Scanner {
        fn new(text: &str) -> Self {
            let mut buf: Vec<char> = text.chars().collect();
            buf.push('\0');
            let mut scanner = Scanner {
                buf,
                index: 0,
                line: 0,
                column: 0,
                done: false,
                flow_context: Vec::new(),
                tokens: VecDeque::new(),
                tokens_taken: 0,
                indent: -1,
                indents: Vec::new(),
                allow_simple_key: true,
                possible_simple_keys: BTreeMap::new(),
                lone_surrogate: false,
            };
            let mark = scanner.mark();
            scanner
                .tokens
                .push_back(Token::new(K::StreamStart, mark, mark));
            scanner
        }

        // reader

        fn peek(&self, offset: usize) -> char {
            self.buf.get(self.index + offset).copied().unwrap_or('\0')
        }

        fn prefix(&self, length: usize) -> String {
            let start = self.index.min(self.buf.len());
            let end = (self.index + length).min(self.buf.len());
            self.buf[start..end].iter().collect()
        }

        fn forward(&mut self, length: usize) {
            for _ in 0..length {
                if self.index >= self.buf.len() {
                    return;
                }
                let ch = self.buf[self.index];
                self.index += 1;
                if ch == '\n' || (ch == '\r' && self.peek(0) != '\n') {
                    self.line += 1;
                    self.column = 0;
                } else if ch != '\u{feff}' {
                    self.column += 1;
                }
            }
        }

        fn mark(&self) -> Mark {
            Mark {
                index: self.index,
                line: self.line,
                column: self.column,
            }
        }

        fn flow_level(&self) -> usize {
            self.flow_context.len()
        }

        // public interface

        fn check_token(&mut self, choices: &[K]) -> YResult<bool> {
            while self.need_more_tokens()? {
                self.fetch_more_tokens()?;
            }
            self.gather_comments()?;
            let Some(head) = self.tokens.front() else {
                return Ok(false);
            };
            if !choices.contains(&head.kind) {
                return Ok(false);
            }
            match head.kind {
                K::Tag => Err(YamlError::Marked(Box::new(Marked {
                    context: Some("While scanning".into()),
                    context_mark: Some(head.end),
                    problem: "Found disallowed tag tokens (do not specify types in markup)".into(),
                    problem_mark: Some(head.start),
                    note: None,
                }))),
                K::FlowMappingStart | K::FlowSequenceStart => Err(YamlError::Marked(Box::new(Marked {
                    context: Some("While scanning".into()),
                    context_mark: Some(head.start),
                    problem: "Found ugly disallowed JSONesque flow mapping (surround with ' and ' to make text appear literally)".into(),
                    problem_mark: Some(head.end),
                    note: None,
                }))),
                K::Anchor => Err(YamlError::Marked(Box::new(Marked {
                    context: Some("While scanning".into()),
                    context_mark: Some(head.start),
                    problem: "Found confusing disallowed anchor token (surround with ' and ' to make text appear literally)".into(),
                    problem_mark: Some(head.end),
                    note: None,
                }))),
                _ => Ok(true),
            }
        }

        fn peek_token(&mut self) -> YResult<&mut Token> {
            while self.need_more_tokens()? {
                self.fetch_more_tokens()?;
            }
            self.gather_comments()?;
            self.tokens
                .front_mut()
                .ok_or_else(|| crash("AttributeError: no token"))
        }

        fn gather_comments(&mut self) -> YResult<()> {
            let mut gathered = 0usize;
            if self.tokens.is_empty() {
                return Ok(());
            }
            if self.tokens.front().is_some_and(|t| t.kind == K::Comment) {
                self.tokens.pop_front();
                self.tokens_taken += 1;
                gathered += 1;
            }
            while self.need_more_tokens()? {
                self.fetch_more_tokens()?;
                if self.tokens.is_empty() {
                    return Ok(());
                }
                if self.tokens.front().is_some_and(|t| t.kind == K::Comment) {
                    self.tokens_taken += 1;
                    self.tokens.pop_front();
                    gathered += 1;
                }
            }
            if gathered >= 1
                && let Some(head) = self.tokens.front_mut()
            {
                head.add_pre_comments()?;
            }
            if !self.done && self.tokens.len() < 2 {
                self.fetch_more_tokens()?;
            }
            Ok(())
        }

        fn get_token(&mut self) -> YResult<Token> {
            while self.need_more_tokens()? {
                self.fetch_more_tokens()?;
            }
            self.gather_comments()?;
            if self.tokens.is_empty() {
                return Err(crash("AttributeError: no token"));
            }
            let second_is_comment = |s: &Self| s.tokens.len() > 1 && s.tokens[1].kind == K::Comment;
            if second_is_comment(self)
                && matches!(
                    self.tokens[0].kind,
                    K::Scalar | K::Value | K::FlowSequenceEnd | K::FlowMappingEnd
                )
                && self.tokens[0].end.line == self.tokens[1].start.line
            {
                self.tokens_taken += 1;
                self.tokens.remove(1);
                self.fetch_more_tokens()?;
                while second_is_comment(self) {
                    self.tokens_taken += 1;
                    self.tokens.remove(1);
                    self.fetch_more_tokens()?;
                }
                self.tokens[0].add_post_comment();
            } else if second_is_comment(self)
                && self.tokens[0].kind == K::Scalar
                && self.tokens[0].end.line != self.tokens[1].start.line
            {
                self.tokens_taken += 1;
                self.tokens.remove(1);
                self.tokens[0].add_post_comment();
                self.fetch_more_tokens()?;
                while second_is_comment(self) {
                    self.tokens_taken += 1;
                    self.tokens.remove(1);
                    self.fetch_more_tokens()?;
                }
            }
            self.tokens_taken += 1;
            self.tokens
                .pop_front()
                .ok_or_else(|| crash("AttributeError: no token"))
        }

        fn need_more_tokens(&mut self) -> YResult<bool> {
            if self.done {
                return Ok(false);
            }
            if self.tokens.is_empty() {
                return Ok(true);
            }
            self.stale_possible_simple_keys()?;
            Ok(self.next_possible_simple_key() == Some(self.tokens_taken))
        }

        fn fetch_more_tokens(&mut self) -> YResult<()> {
            if let Some((start, end)) = self.scan_to_next_token() {
                self.tokens.push_back(Token::new(K::Comment, start, end));
                return Ok(());
            }
            self.stale_possible_simple_keys()?;
            self.unwind_indent(self.column as isize);
            let ch = self.peek(0);
            if ch == '\0' {
                return self.fetch_stream_end();
            }
            if ch == '%' && self.column == 0 {
                return self.fetch_directive();
            }
            if ch == '-' && self.check_document_indicator("---") {
                return self.fetch_document_indicator(K::DocumentStart);
            }
            if ch == '.' && self.check_document_indicator("...") {
                return self.fetch_document_indicator(K::DocumentEnd);
            }
            match ch {
                '[' => return self.fetch_flow_collection_start(K::FlowSequenceStart, '['),
                '{' => return self.fetch_flow_collection_start(K::FlowMappingStart, '{'),
                ']' => return self.fetch_flow_collection_end(K::FlowSequenceEnd),
                '}' => return self.fetch_flow_collection_end(K::FlowMappingEnd),
                ',' => return self.fetch_flow_entry(),
                _ => {}
            }
            if ch == '-' && is_in(self.peek(1), THE_END_SPACE_TAB) {
                return self.fetch_block_entry();
            }
            if ch == '?' && (self.flow_level() > 0 || is_in(self.peek(1), THE_END_SPACE_TAB)) {
                return self.fetch_key();
            }
            if ch == ':' && self.check_value() {
                return self.fetch_value();
            }
            match ch {
                '*' => return self.fetch_anchor_or_alias(K::Alias),
                '&' => return self.fetch_anchor_or_alias(K::Anchor),
                '!' => return self.fetch_tag(),
                '|' if self.flow_level() == 0 => return self.fetch_block_scalar('|'),
                '>' if self.flow_level() == 0 => return self.fetch_block_scalar('>'),
                '\'' => return self.fetch_flow_scalar('\''),
                '"' => return self.fetch_flow_scalar('"'),
                _ => {}
            }
            if self.check_plain() {
                return self.fetch_plain();
            }
            Err(err(
                Some("while scanning for the next token"),
                None,
                format!(
                    "found character {} that cannot start any token",
                    char_repr(ch)
                ),
                self.mark(),
            ))
        }

        // simple keys

        fn next_possible_simple_key(&self) -> Option<usize> {
            self.possible_simple_keys
                .values()
                .map(|k| k.token_number)
                .min()
        }

        fn simple_key_error(&self, key_mark: Mark) -> YamlError {
            err(
                Some("while scanning a simple key"),
                Some(key_mark),
                "could not find expected ':'".into(),
                self.mark(),
            )
        }

        fn stale_possible_simple_keys(&mut self) -> YResult<()> {
            let levels: Vec<usize> = self.possible_simple_keys.keys().copied().collect();
            for level in levels {
                let Some(key) = self.possible_simple_keys.get(&level) else {
                    continue;
                };
                if key.line != self.line || self.index - key.index > 1024 {
                    if key.required {
                        return Err(self.simple_key_error(key.mark));
                    }
                    self.possible_simple_keys.remove(&level);
                }
            }
            Ok(())
        }

        fn save_possible_simple_key(&mut self) -> YResult<()> {
            let required = self.flow_level() == 0 && self.indent == self.column as isize;
            if self.allow_simple_key {
                self.remove_possible_simple_key()?;
                let key = SimpleKey {
                    token_number: self.tokens_taken + self.tokens.len(),
                    required,
                    index: self.index,
                    line: self.line,
                    column: self.column,
                    mark: self.mark(),
                };
                self.possible_simple_keys.insert(self.flow_level(), key);
            }
            Ok(())
        }

        fn remove_possible_simple_key(&mut self) -> YResult<()> {
            if let Some(key) = self.possible_simple_keys.get(&self.flow_level()) {
                if key.required {
                    return Err(self.simple_key_error(key.mark));
                }
                let level = self.flow_level();
                self.possible_simple_keys.remove(&level);
            }
            Ok(())
        }

        // indentation

        fn unwind_indent(&mut self, column: isize) {
            if self.flow_level() > 0 {
                return;
            }
            while self.indent > column {
                let mark = self.mark();
                self.indent = self.indents.pop().unwrap_or(-1);
                self.tokens.push_back(Token::new(K::BlockEnd, mark, mark));
            }
        }

        fn add_indent(&mut self, column: usize) -> bool {
            let column = column as isize;
            if self.indent < column {
                self.indents.push(self.indent);
                self.indent = column;
                return true;
            }
            false
        }

        // fetchers

        fn fetch_stream_end(&mut self) -> YResult<()> {
            self.unwind_indent(-1);
            self.remove_possible_simple_key()?;
            self.allow_simple_key = false;
            self.possible_simple_keys.clear();
            let mark = self.mark();
            self.tokens.push_back(Token::new(K::StreamEnd, mark, mark));
            self.done = true;
            Ok(())
        }

        fn fetch_directive(&mut self) -> YResult<()> {
            self.unwind_indent(-1);
            self.remove_possible_simple_key()?;
            self.allow_simple_key = false;
            let token = self.scan_directive()?;
            self.tokens.push_back(token);
            Ok(())
        }

        fn fetch_document_indicator(&mut self, kind: K) -> YResult<()> {
            self.unwind_indent(-1);
            self.remove_possible_simple_key()?;
            self.allow_simple_key = false;
            let start = self.mark();
            self.forward(3);
            let end = self.mark();
            self.tokens.push_back(Token::new(kind, start, end));
            Ok(())
        }

        fn push_single(&mut self, kind: K) {
            let start = self.mark();
            self.forward(1);
            let end = self.mark();
            self.tokens.push_back(Token::new(kind, start, end));
        }

        fn fetch_flow_collection_start(&mut self, kind: K, open: char) -> YResult<()> {
            self.save_possible_simple_key()?;
            self.flow_context.push(open);
            self.allow_simple_key = true;
            self.push_single(kind);
            Ok(())
        }

        fn fetch_flow_collection_end(&mut self, kind: K) -> YResult<()> {
            self.remove_possible_simple_key()?;
            self.flow_context.pop();
            self.allow_simple_key = false;
            self.push_single(kind);
            Ok(())
        }

        fn fetch_flow_entry(&mut self) -> YResult<()> {
            self.allow_simple_key = true;
            self.remove_possible_simple_key()?;
            self.push_single(K::FlowEntry);
            Ok(())
        }

        fn fetch_block_entry(&mut self) -> YResult<()> {
            if self.flow_level() == 0 {
                if !self.allow_simple_key {
                    return Err(err(
                        None,
                        None,
                        "sequence entries are not allowed here".into(),
                        self.mark(),
                    ));
                }
                if self.add_indent(self.column) {
                    let mark = self.mark();
                    self.tokens
                        .push_back(Token::new(K::BlockSequenceStart, mark, mark));
                }
            }
            self.allow_simple_key = true;
            self.remove_possible_simple_key()?;
            self.push_single(K::BlockEntry);
            Ok(())
        }

        fn fetch_key(&mut self) -> YResult<()> {
            if self.flow_level() == 0 {
                if !self.allow_simple_key {
                    return Err(err(
                        None,
                        None,
                        "mapping keys are not allowed here".into(),
                        self.mark(),
                    ));
                }
                if self.add_indent(self.column) {
                    let mark = self.mark();
                    self.tokens
                        .push_back(Token::new(K::BlockMappingStart, mark, mark));
                }
            }
            self.allow_simple_key = self.flow_level() == 0;
            self.remove_possible_simple_key()?;
            self.push_single(K::Key);
            Ok(())
        }

        fn fetch_value(&mut self) -> YResult<()> {
            let level = self.flow_level();
            if let Some(key) = self.possible_simple_keys.remove(&level) {
                let at = key.token_number - self.tokens_taken;
                self.tokens
                    .insert(at, Token::new(K::Key, key.mark, key.mark));
                if level == 0 && self.add_indent(key.column) {
                    self.tokens
                        .insert(at, Token::new(K::BlockMappingStart, key.mark, key.mark));
                }
                self.allow_simple_key = false;
            } else {
                if level == 0 && !self.allow_simple_key {
                    return Err(err(
                        None,
                        None,
                        "mapping values are not allowed here".into(),
                        self.mark(),
                    ));
                }
                if level == 0 && self.add_indent(self.column) {
                    let mark = self.mark();
                    self.tokens
                        .push_back(Token::new(K::BlockMappingStart, mark, mark));
                }
                self.allow_simple_key = level == 0;
                self.remove_possible_simple_key()?;
            }
            self.push_single(K::Value);
            Ok(())
        }

        fn fetch_anchor_or_alias(&mut self, kind: K) -> YResult<()> {
            self.save_possible_simple_key()?;
            self.allow_simple_key = false;
            let token = self.scan_anchor(kind)?;
            self.tokens.push_back(token);
            Ok(())
        }

        fn fetch_tag(&mut self) -> YResult<()> {
            self.save_possible_simple_key()?;
            self.allow_simple_key = false;
            let token = self.scan_tag()?;
            self.tokens.push_back(token);
            Ok(())
        }

        fn fetch_block_scalar(&mut self, style: char) -> YResult<()> {
            self.allow_simple_key = true;
            self.remove_possible_simple_key()?;
            let token = self.scan_block_scalar(style)?;
            self.tokens.push_back(token);
            Ok(())
        }

        fn fetch_flow_scalar(&mut self, style: char) -> YResult<()> {
            self.save_possible_simple_key()?;
            self.allow_simple_key = false;
            let token = self.scan_flow_scalar(style)?;
            self.tokens.push_back(token);
            Ok(())
        }

        fn fetch_plain(&mut self) -> YResult<()> {
            self.save_possible_simple_key()?;
            self.allow_simple_key = false;
            let token = self.scan_plain()?;
            self.tokens.push_back(token);
            Ok(())
        }

        // checkers

        fn check_document_indicator(&self, indicator: &str) -> bool {
            self.column == 0
                && self.prefix(3) == indicator
                && is_in(self.peek(3), THE_END_SPACE_TAB)
        }

        fn check_value(&self) -> bool {
            if self.flow_level() > 0 {
                if self.flow_context.last() == Some(&'[') {
                    if !is_in(self.peek(1), THE_END_SPACE_TAB) {
                        return false;
                    }
                } else if self.tokens.back().is_some_and(|t| t.kind == K::Value)
                    && !is_in(self.peek(1), THE_END_SPACE_TAB)
                {
                    return false;
                }
                return true;
            }
            is_in(self.peek(1), THE_END_SPACE_TAB)
        }

        fn check_plain(&self) -> bool {
            let ch = self.peek(0);
            if !is_in(ch, "\0 \t\r\n\u{85}\u{2028}\u{2029}-?:,[]{}#&*!|>'\"%@`") {
                return true;
            }
            let ch1 = self.peek(1);
            if ch == '-' && !is_in(ch1, THE_END_SPACE_TAB) {
                return true;
            }
            if ch == ':' && self.flow_level() > 0 && !is_in(ch1, " \t") {
                return true;
            }
            !is_in(ch1, THE_END_SPACE_TAB)
                && (ch == '-' || (self.flow_level() == 0 && is_in(ch, "?:")))
        }

        // scanners

        /// `RoundTripScanner.scan_to_next_token`: a comment, or a run of empty lines, comes
        /// back as a comment token.
        fn scan_to_next_token(&mut self) -> Option<(Mark, Mark)> {
            if self.index == 0 && self.peek(0) == '\u{feff}' {
                self.forward(1);
            }
            loop {
                while self.peek(0) == ' ' {
                    self.forward(1);
                }
                let mut ch = self.peek(0);
                if ch == '#' {
                    let start = self.mark();
                    self.forward(1);
                    while !is_in(ch, THE_END) {
                        ch = self.peek(0);
                        if ch == '\0' {
                            break;
                        }
                        self.forward(1);
                    }
                    while !self.scan_line_break(false).is_empty() {}
                    let end = self.mark();
                    if self.flow_level() == 0 {
                        self.allow_simple_key = true;
                    }
                    return Some((start, end));
                }
                if self.scan_line_break(false).is_empty() {
                    return None;
                }
                if self.flow_level() == 0 {
                    self.allow_simple_key = true;
                }
                if self.peek(0) == '\n' {
                    let start = self.mark();
                    while !self.scan_line_break(true).is_empty() {}
                    let end = self.mark();
                    return Some((start, end));
                }
            }
        }

        fn scan_line_break(&mut self, empty_line: bool) -> String {
            let ch = self.peek(0);
            if is_in(ch, "\r\n\u{85}") {
                if self.prefix(2) == "\r\n" {
                    self.forward(2);
                } else {
                    self.forward(1);
                }
                return "\n".into();
            }
            if is_in(ch, "\u{2028}\u{2029}") || (empty_line && is_in(ch, "\t ")) {
                self.forward(1);
                return ch.to_string();
            }
            String::new()
        }

        fn scan_directive(&mut self) -> YResult<Token> {
            let start = self.mark();
            self.forward(1);
            let name = self.scan_directive_name(start)?;
            let directive = if name == "YAML" {
                Directive::Yaml(self.scan_yaml_directive_value(start)?)
            } else if name == "TAG" {
                Directive::Tag(self.scan_tag_directive_value(start)?)
            } else {
                Directive::Other
            };
            let end = self.mark();
            if matches!(directive, Directive::Other) {
                while !is_in(self.peek(0), THE_END) {
                    self.forward(1);
                }
            }
            self.scan_directive_ignored_line(start)?;
            let mut token = Token::new(K::Directive, start, end);
            token.value = name;
            token.directive = directive;
            Ok(token)
        }

        fn directive_error(&self, start: Mark, problem: String) -> YamlError {
            err(
                Some("while scanning a directive"),
                Some(start),
                problem,
                self.mark(),
            )
        }

        fn scan_directive_name(&mut self, start: Mark) -> YResult<String> {
            let mut length = 0;
            let mut ch = self.peek(length);
            while ch.is_ascii_alphanumeric() || is_in(ch, "-_:.") {
                length += 1;
                ch = self.peek(length);
            }
            let expected = |s: &Self, ch: char| {
                s.directive_error(
                    start,
                    format!(
                        "expected alphabetic or numeric character, but found {}",
                        char_repr(ch)
                    ),
                )
            };
            if length == 0 {
                return Err(expected(self, ch));
            }
            let value = self.prefix(length);
            self.forward(length);
            let ch = self.peek(0);
            if !is_in(ch, NUL_SPACE_BREAKS) {
                return Err(expected(self, ch));
            }
            Ok(value)
        }

        fn scan_yaml_directive_value(&mut self, start: Mark) -> YResult<Option<u64>> {
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            let major = self.scan_yaml_directive_number(start)?;
            if self.peek(0) != '.' {
                return Err(self.directive_error(
                    start,
                    format!(
                        "expected a digit or '.', but found {}",
                        char_repr(self.peek(0))
                    ),
                ));
            }
            self.forward(1);
            self.scan_yaml_directive_number(start)?;
            if !is_in(self.peek(0), NUL_SPACE_BREAKS) {
                return Err(self.directive_error(
                    start,
                    format!(
                        "expected a digit or ' ', but found {}",
                        char_repr(self.peek(0))
                    ),
                ));
            }
            Ok(major)
        }

        fn scan_yaml_directive_number(&mut self, start: Mark) -> YResult<Option<u64>> {
            let ch = self.peek(0);
            if !ch.is_ascii_digit() {
                return Err(self.directive_error(
                    start,
                    format!("expected a digit, but found {}", char_repr(ch)),
                ));
            }
            let mut length = 0;
            while self.peek(length).is_ascii_digit() {
                length += 1;
            }
            let value = self.prefix(length).parse::<u64>().ok();
            self.forward(length);
            Ok(value)
        }

        fn scan_tag_directive_value(&mut self, start: Mark) -> YResult<String> {
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            let handle = self.scan_tag_handle("directive", start)?;
            if self.peek(0) != ' ' {
                return Err(self.directive_error(
                    start,
                    format!("expected ' ', but found {}", char_repr(self.peek(0))),
                ));
            }
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            self.scan_tag_uri("directive", start)?;
            if !is_in(self.peek(0), NUL_SPACE_BREAKS) {
                return Err(self.directive_error(
                    start,
                    format!("expected ' ', but found {}", char_repr(self.peek(0))),
                ));
            }
            Ok(handle)
        }

        fn scan_directive_ignored_line(&mut self, start: Mark) -> YResult<()> {
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            if self.peek(0) == '#' {
                while !is_in(self.peek(0), THE_END) {
                    self.forward(1);
                }
            }
            let ch = self.peek(0);
            if !is_in(ch, THE_END) {
                return Err(self.directive_error(
                    start,
                    format!(
                        "expected a comment or a line break, but found {}",
                        char_repr(ch)
                    ),
                ));
            }
            self.scan_line_break(false);
            Ok(())
        }

        fn scan_anchor(&mut self, kind: K) -> YResult<Token> {
            let start = self.mark();
            let name = if self.peek(0) == '*' {
                "alias"
            } else {
                "anchor"
            };
            self.forward(1);
            let mut length = 0;
            let mut ch = self.peek(length);
            while check_anchorname_char(ch) {
                length += 1;
                ch = self.peek(length);
            }
            let error = |s: &Self, ch: char| {
                err(
                    Some(&format!("while scanning an {name}")),
                    Some(start),
                    format!(
                        "expected alphabetic or numeric character, but found {}",
                        char_repr(ch)
                    ),
                    s.mark(),
                )
            };
            if length == 0 {
                return Err(error(self, ch));
            }
            let value = self.prefix(length);
            self.forward(length);
            if !is_in(ch, "\0 \t\r\n\u{85}\u{2028}\u{2029}?:,[]{}%@`") {
                return Err(error(self, ch));
            }
            let end = self.mark();
            let mut token = Token::new(kind, start, end);
            token.value = value;
            Ok(token)
        }

        fn scan_tag(&mut self) -> YResult<Token> {
            let start = self.mark();
            let ch = self.peek(1);
            if ch == '<' {
                self.forward(2);
                self.scan_tag_uri("tag", start)?;
                if self.peek(0) != '>' {
                    return Err(err(
                        Some("while parsing a tag"),
                        Some(start),
                        format!("expected '>', but found {}", char_repr(self.peek(0))),
                        self.mark(),
                    ));
                }
                self.forward(1);
            } else if is_in(ch, THE_END_SPACE_TAB) {
                self.forward(1);
            } else {
                let mut length = 1;
                let mut use_handle = false;
                let mut ch = ch;
                while !is_in(ch, NUL_SPACE_BREAKS) {
                    if ch == '!' {
                        use_handle = true;
                        break;
                    }
                    length += 1;
                    ch = self.peek(length);
                }
                if use_handle {
                    self.scan_tag_handle("tag", start)?;
                } else {
                    self.forward(1);
                }
                self.scan_tag_uri("tag", start)?;
            }
            let ch = self.peek(0);
            if !is_in(ch, NUL_SPACE_BREAKS) {
                return Err(err(
                    Some("while scanning a tag"),
                    Some(start),
                    format!("expected ' ', but found {}", char_repr(ch)),
                    self.mark(),
                ));
            }
            let end = self.mark();
            Ok(Token::new(K::Tag, start, end))
        }

        fn scan_tag_handle(&mut self, name: &str, start: Mark) -> YResult<String> {
            let context = format!("while scanning a {name}");
            let ch = self.peek(0);
            if ch != '!' {
                return Err(err(
                    Some(&context),
                    Some(start),
                    format!("expected '!', but found {}", char_repr(ch)),
                    self.mark(),
                ));
            }
            let mut length = 1;
            let mut ch = self.peek(length);
            if ch != ' ' {
                while ch.is_ascii_alphanumeric() || is_in(ch, "-_") {
                    length += 1;
                    ch = self.peek(length);
                }
                if ch != '!' {
                    self.forward(length);
                    return Err(err(
                        Some(&context),
                        Some(start),
                        format!("expected '!', but found {}", char_repr(ch)),
                        self.mark(),
                    ));
                }
                length += 1;
            }
            let value = self.prefix(length);
            self.forward(length);
            Ok(value)
        }

        fn scan_tag_uri(&mut self, name: &str, start: Mark) -> YResult<String> {
            let mut chunks: Vec<String> = Vec::new();
            let mut length = 0;
            let mut ch = self.peek(length);
            while ch.is_ascii_alphanumeric() || is_in(ch, "-;/?:@&=+$,_.!~*'()[]%#") {
                if ch == '%' {
                    chunks.push(self.prefix(length));
                    self.forward(length);
                    length = 0;
                    chunks.push(self.scan_uri_escapes(name, start)?);
                } else {
                    length += 1;
                }
                ch = self.peek(length);
            }
            if length != 0 {
                chunks.push(self.prefix(length));
                self.forward(length);
            }
            if chunks.is_empty() {
                return Err(err(
                    Some(&format!("while parsing a {name}")),
                    Some(start),
                    format!("expected URI, but found {}", char_repr(ch)),
                    self.mark(),
                ));
            }
            Ok(chunks.concat())
        }

        fn scan_uri_escapes(&mut self, name: &str, start: Mark) -> YResult<String> {
            let context = format!("while scanning a {name}");
            let mut bytes = Vec::new();
            let mark = self.mark();
            while self.peek(0) == '%' {
                self.forward(1);
                for k in 0..2 {
                    if !self.peek(k).is_ascii_hexdigit() {
                        return Err(err(
                            Some(&context),
                            Some(start),
                            format!(
                                "expected URI escape sequence of 2 hexdecimal numbers, but found {}",
                                char_repr(self.peek(k))
                            ),
                            self.mark(),
                        ));
                    }
                }
                bytes.push(u8::from_str_radix(&self.prefix(2), 16).unwrap_or(0));
                self.forward(2);
            }
            match String::from_utf8(bytes) {
                Ok(value) => Ok(value),
                Err(e) => {
                    let position = e.utf8_error().valid_up_to();
                    let byte = e.as_bytes().get(position).copied().unwrap_or(0);
                    Err(err(
                        Some(&context),
                        Some(start),
                        format!(
                            "'utf-8' codec can't decode byte {byte:#04x} in position {position}: invalid start byte"
                        ),
                        mark,
                    ))
                }
            }
        }

        fn block_scalar_error(&self, start: Mark, problem: String) -> YamlError {
            err(
                Some("while scanning a block scalar"),
                Some(start),
                problem,
                self.mark(),
            )
        }

        fn scan_block_scalar(&mut self, style: char) -> YResult<Token> {
            let folded = style == '>';
            let mut chunks: Vec<String> = Vec::new();
            let start = self.mark();
            self.forward(1);
            let (chomping, increment) = self.scan_block_scalar_indicators(start)?;
            let has_header_comment = self.scan_block_scalar_ignored_line(start)?;
            let mut min_indent = self.indent + 1;
            let indent;
            let mut breaks;
            let mut end;
            match increment {
                None => {
                    let (b, max_indent, e) = self.scan_block_scalar_indentation();
                    breaks = b;
                    end = e;
                    indent = min_indent.max(max_indent as isize);
                }
                Some(increment) => {
                    if min_indent < 1 {
                        min_indent = 1;
                    }
                    indent = min_indent + increment as isize - 1;
                    let (b, e) = self.scan_block_scalar_breaks(indent);
                    breaks = b;
                    end = e;
                }
            }
            let mut line_break = String::new();
            while self.column as isize == indent && self.peek(0) != '\0' {
                chunks.append(&mut breaks);
                let leading_non_space = !is_in(self.peek(0), " \t");
                let mut length = 0;
                while !is_in(self.peek(length), THE_END) {
                    length += 1;
                }
                chunks.push(self.prefix(length));
                self.forward(length);
                line_break = self.scan_line_break(false);
                let (b, e) = self.scan_block_scalar_breaks(indent);
                breaks = b;
                end = e;
                if min_indent == 0
                    && (self.check_document_indicator("---")
                        || self.check_document_indicator("..."))
                {
                    break;
                }
                if self.column as isize == indent && self.peek(0) != '\0' {
                    // (ruamel inserts a "\a" fold marker here and removes it when constructing)
                    if folded
                        && line_break == "\n"
                        && leading_non_space
                        && !is_in(self.peek(0), " \t")
                    {
                        if breaks.is_empty() {
                            chunks.push(" ".into());
                        }
                    } else {
                        chunks.push(line_break.clone());
                    }
                } else {
                    break;
                }
            }
            let mut trailing = false;
            if chomping != Some(false) {
                chunks.push(line_break);
            }
            if chomping == Some(true) {
                chunks.append(&mut breaks);
            } else if !breaks.is_empty() {
                trailing = true;
            }
            let mut token = Token::new(K::Scalar, start, end);
            token.value = chunks.concat();
            token.style = Some(style);
            if has_header_comment {
                token.add_pre_comments()?;
            }
            if trailing {
                while self.scan_to_next_token().is_some() {}
                token.add_post_comment();
            }
            Ok(token)
        }

        fn scan_block_scalar_indicators(
            &mut self,
            start: Mark,
        ) -> YResult<(Option<bool>, Option<u32>)> {
            let mut chomping = None;
            let mut increment = None;
            let zero = "expected indentation indicator in the range 1-9, but found 0";
            let ch = self.peek(0);
            if is_in(ch, "+-") {
                chomping = Some(ch == '+');
                self.forward(1);
                let ch = self.peek(0);
                if let Some(digit) = ch.to_digit(10) {
                    if digit == 0 {
                        return Err(self.block_scalar_error(start, zero.into()));
                    }
                    increment = Some(digit);
                    self.forward(1);
                }
            } else if let Some(digit) = ch.to_digit(10) {
                if digit == 0 {
                    return Err(self.block_scalar_error(start, zero.into()));
                }
                increment = Some(digit);
                self.forward(1);
                let ch = self.peek(0);
                if is_in(ch, "+-") {
                    chomping = Some(ch == '+');
                    self.forward(1);
                }
            }
            let ch = self.peek(0);
            if !is_in(ch, NUL_SPACE_BREAKS) {
                return Err(self.block_scalar_error(
                    start,
                    format!(
                        "expected chomping or indentation indicators, but found {}",
                        char_repr(ch)
                    ),
                ));
            }
            Ok((chomping, increment))
        }

        fn scan_block_scalar_ignored_line(&mut self, start: Mark) -> YResult<bool> {
            let mut comment = false;
            while self.peek(0) == ' ' {
                self.forward(1);
            }
            if self.peek(0) == '#' {
                comment = true;
                while !is_in(self.peek(0), THE_END) {
                    self.forward(1);
                }
            }
            let ch = self.peek(0);
            if !is_in(ch, THE_END) {
                return Err(self.block_scalar_error(
                    start,
                    format!(
                        "expected a comment or a line break, but found {}",
                        char_repr(ch)
                    ),
                ));
            }
            self.scan_line_break(false);
            Ok(comment)
        }

        fn scan_block_scalar_indentation(&mut self) -> (Vec<String>, usize, Mark) {
            let mut chunks = Vec::new();
            let mut max_indent = 0;
            let mut end = self.mark();
            while is_in(self.peek(0), " \r\n\u{85}\u{2028}\u{2029}") {
                if self.peek(0) != ' ' {
                    chunks.push(self.scan_line_break(false));
                    end = self.mark();
                } else {
                    self.forward(1);
                    if self.column > max_indent {
                        max_indent = self.column;
                    }
                }
            }
            (chunks, max_indent, end)
        }

        fn scan_block_scalar_breaks(&mut self, indent: isize) -> (Vec<String>, Mark) {
            let mut chunks = Vec::new();
            let mut end = self.mark();
            while (self.column as isize) < indent && self.peek(0) == ' ' {
                self.forward(1);
            }
            while is_in(self.peek(0), LINE_BREAKS) {
                chunks.push(self.scan_line_break(false));
                end = self.mark();
                while (self.column as isize) < indent && self.peek(0) == ' ' {
                    self.forward(1);
                }
            }
            (chunks, end)
        }

        fn scan_flow_scalar(&mut self, style: char) -> YResult<Token> {
            let double = style == '"';
            let mut chunks: Vec<String> = Vec::new();
            let start = self.mark();
            let quote = self.peek(0);
            self.forward(1);
            self.scan_flow_scalar_non_spaces(double, start, &mut chunks)?;
            while self.peek(0) != quote {
                self.scan_flow_scalar_spaces(double, start, &mut chunks)?;
                self.scan_flow_scalar_non_spaces(double, start, &mut chunks)?;
            }
            self.forward(1);
            let end = self.mark();
            let mut token = Token::new(K::Scalar, start, end);
            token.value = chunks.concat();
            token.style = Some(style);
            Ok(token)
        }

        fn scan_flow_scalar_non_spaces(
            &mut self,
            double: bool,
            start: Mark,
            chunks: &mut Vec<String>,
        ) -> YResult<()> {
            let context = "while scanning a double-quoted scalar";
            loop {
                let mut length = 0;
                while !is_in(self.peek(length), " \n'\"\\\0\t\r\u{85}\u{2028}\u{2029}") {
                    length += 1;
                }
                if length != 0 {
                    chunks.push(self.prefix(length));
                    self.forward(length);
                }
                let ch = self.peek(0);
                if !double && ch == '\'' && self.peek(1) == '\'' {
                    chunks.push("'".into());
                    self.forward(2);
                } else if (double && ch == '\'') || (!double && is_in(ch, "\"\\")) {
                    chunks.push(ch.to_string());
                    self.forward(1);
                } else if double && ch == '\\' {
                    self.forward(1);
                    let ch = self.peek(0);
                    if let Some(replacement) = escape_replacement(ch) {
                        chunks.push(replacement.to_string());
                        self.forward(1);
                    } else if let Some(length) = escape_code_length(ch) {
                        self.forward(1);
                        for k in 0..length {
                            if !self.peek(k).is_ascii_hexdigit() {
                                return Err(err(
                                    Some(context),
                                    Some(start),
                                    format!(
                                        "expected escape sequence of {length} hexdecimal numbers, but found {}",
                                        char_repr(self.peek(k))
                                    ),
                                    self.mark(),
                                ));
                            }
                        }
                        let code =
                            u32::from_str_radix(&self.prefix(length), 16).unwrap_or(u32::MAX);
                        match char::from_u32(code) {
                            Some(c) => chunks.push(c.to_string()),
                            None if (0xD800..=0xDFFF).contains(&code) => {
                                // Python keeps the lone surrogate and goes on; Rust strings
                                // cannot hold one, so it stands as U+FFFD and the load fails
                                // at the end unless a YAML error comes first.
                                self.lone_surrogate = true;
                                chunks.push('\u{fffd}'.to_string());
                            }
                            None => {
                                return Err(crash("ValueError: chr() arg not in range(0x110000)"));
                            }
                        }
                        self.forward(length);
                    } else if is_in(ch, LINE_BREAKS) {
                        self.scan_line_break(false);
                        self.scan_flow_scalar_breaks(start, chunks)?;
                    } else {
                        return Err(err(
                            Some(context),
                            Some(start),
                            format!("found unknown escape character {}", char_repr(ch)),
                            self.mark(),
                        ));
                    }
                } else {
                    return Ok(());
                }
            }
        }

        fn scan_flow_scalar_spaces(
            &mut self,
            _double: bool,
            start: Mark,
            chunks: &mut Vec<String>,
        ) -> YResult<()> {
            let mut length = 0;
            while is_in(self.peek(length), " \t") {
                length += 1;
            }
            let whitespaces = self.prefix(length);
            self.forward(length);
            let ch = self.peek(0);
            if ch == '\0' {
                return Err(err(
                    Some("while scanning a quoted scalar"),
                    Some(start),
                    "found unexpected end of stream".into(),
                    self.mark(),
                ));
            }
            if is_in(ch, LINE_BREAKS) {
                let line_break = self.scan_line_break(false);
                let mut breaks = Vec::new();
                self.scan_flow_scalar_breaks(start, &mut breaks)?;
                if line_break != "\n" {
                    chunks.push(line_break);
                } else if breaks.is_empty() {
                    chunks.push(" ".into());
                }
                chunks.append(&mut breaks);
            } else {
                chunks.push(whitespaces);
            }
            Ok(())
        }

        fn scan_flow_scalar_breaks(
            &mut self,
            start: Mark,
            chunks: &mut Vec<String>,
        ) -> YResult<()> {
            loop {
                let prefix = self.prefix(3);
                if (prefix == "---" || prefix == "...") && is_in(self.peek(3), THE_END_SPACE_TAB) {
                    return Err(err(
                        Some("while scanning a quoted scalar"),
                        Some(start),
                        "found unexpected document separator".into(),
                        self.mark(),
                    ));
                }
                while is_in(self.peek(0), " \t") {
                    self.forward(1);
                }
                if is_in(self.peek(0), LINE_BREAKS) {
                    chunks.push(self.scan_line_break(false));
                } else {
                    return Ok(());
                }
            }
        }

        fn scan_plain(&mut self) -> YResult<Token> {
            let mut chunks: Vec<String> = Vec::new();
            let start = self.mark();
            let mut end = start;
            let indent = self.indent + 1;
            let mut spaces: Option<Vec<String>> = Some(Vec::new());
            let flow = self.flow_level() > 0;
            loop {
                let mut length = 0;
                if self.peek(0) == '#' {
                    break;
                }
                let mut ch;
                loop {
                    ch = self.peek(length);
                    let next = self.peek(length + 1);
                    if (ch == ':' && !is_in(next, THE_END_SPACE_TAB)) || ch == '?' {
                        // part of the scalar
                    } else if is_in(ch, THE_END_SPACE_TAB)
                        || (!flow && ch == ':' && is_in(next, THE_END_SPACE_TAB))
                        || (flow && is_in(ch, ",:?[]{}"))
                    {
                        break;
                    }
                    length += 1;
                }
                if flow
                    && ch == ':'
                    && !is_in(
                        self.peek(length + 1),
                        "\0 \t\r\n\u{85}\u{2028}\u{2029},[]{}",
                    )
                {
                    self.forward(length);
                    return Err(YamlError::Marked(Box::new(Marked {
                        context: Some("while scanning a plain scalar".into()),
                        context_mark: Some(start),
                        problem: "found unexpected ':'".into(),
                        problem_mark: Some(self.mark()),
                        note: Some("Please check http://pyyaml.org/wiki/YAMLColonInFlowContext for details.".into()),
                    })));
                }
                if length == 0 {
                    break;
                }
                self.allow_simple_key = false;
                if let Some(s) = spaces.as_mut() {
                    chunks.append(s);
                }
                chunks.push(self.prefix(length));
                self.forward(length);
                end = self.mark();
                spaces = self.scan_plain_spaces();
                let stop = match &spaces {
                    None => true,
                    Some(s) => s.is_empty(),
                };
                if stop || self.peek(0) == '#' || (!flow && (self.column as isize) < indent) {
                    break;
                }
            }
            let mut token = Token::new(K::Scalar, start, end);
            token.value = chunks.concat();
            token.plain = true;
            if spaces
                .as_ref()
                .is_some_and(|s| s.first().is_some_and(|first| first == "\n"))
            {
                token.add_post_comment();
            }
            Ok(token)
        }

        fn scan_plain_spaces(&mut self) -> Option<Vec<String>> {
            let mut chunks = Vec::new();
            let mut length = 0;
            while self.peek(length) == ' ' {
                length += 1;
            }
            let whitespaces = self.prefix(length);
            self.forward(length);
            let ch = self.peek(0);
            let separator = |s: &Self| {
                let prefix = s.prefix(3);
                (prefix == "---" || prefix == "...") && is_in(s.peek(3), THE_END_SPACE_TAB)
            };
            if is_in(ch, LINE_BREAKS) {
                let line_break = self.scan_line_break(false);
                self.allow_simple_key = true;
                if separator(self) {
                    return None;
                }
                let mut breaks = Vec::new();
                while is_in(self.peek(0), " \r\n\u{85}\u{2028}\u{2029}") {
                    if self.peek(0) == ' ' {
                        self.forward(1);
                    } else {
                        breaks.push(self.scan_line_break(false));
                        if separator(self) {
                            return None;
                        }
                    }
                }
                if line_break != "\n" {
                    chunks.push(line_break);
                } else if breaks.is_empty() {
                    chunks.push(" ".into());
                }
                chunks.append(&mut breaks);
            } else if !whitespaces.is_empty() {
                chunks.push(whitespaces);
            }
            Some(chunks)
        }
    }

    fn check_anchorname_char(ch: char) -> bool {
        if is_in(ch, ",[]{}") {
            return false;
        }
        ('\u{21}'..='\u{7e}').contains(&ch)
            || ('\u{a0}'..='\u{d7ff}').contains(&ch)
            || (('\u{e000}'..='\u{fffd}').contains(&ch) && ch != '\u{feff}')
            || ch >= '\u{10000}'
    }

    fn escape_replacement(ch: char) -> Option<char> {
        Some(match ch {
            '0' => '\0',
            'a' => '\u{7}',
            'b' => '\u{8}',
            't' | '\t' => '\t',
            'n' => '\n',
            'v' => '\u{b}',
            'f' => '\u{c}',
            'r' => '\r',
            'e' => '\u{1b}',
            ' ' => ' ',
            '"' => '"',
            '/' => '/',
            '\\' => '\\',
            'N' => '\u{85}',
            '_' => '\u{a0}',
            'L' => '\u{2028}',
            'P' => '\u{2029}',
            _ => return None,
        })
    }

    fn escape_code_length(ch: char) -> Option<usize> {
        match ch {
            'x' => Some(2),
            'u' => Some(4),
            'U' => Some(8),
            _ => None,
        }
    }

    // ------------------------------------------------------------------ parser

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum E {
        StreamStart,
        StreamEnd,
        DocumentStart,
        DocumentEnd,
        Alias,
        Scalar,
        SequenceStart,
        SequenceEnd,
        MappingStart,
        MappingEnd,
    }

    #[derive(Debug, Clone)]
    struct Event {
        kind: E,
        start: Mark,
        end: Mark,
        /// Scalar value or alias name.
        value: String,
        /// A plain scalar (resolved implicitly).
        plain: bool,
    }

    impl Event {
        fn new(kind: E, start: Mark, end: Mark) -> Self {
            Event {
                kind,
                start,
                end,
                value: String::new(),
                plain: false,
            }
        }

        fn empty_scalar(mark: Mark) -> Self {
            Event {
                kind: E::Scalar,
                start: mark,
                end: mark,
                value: String::new(),
                plain: true,
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum St {
        StreamStart,
        ImplicitDocumentStart,
        DocumentEnd,
        DocumentContent,
        BlockNode,
        BlockSequenceFirstEntry,
        BlockSequenceEntry,
        IndentlessSequenceEntry,
        BlockMappingFirstKey,
        BlockMappingKey,
        BlockMappingValue,
    }

    struct Parser {
        sc: Scanner,
        current: Option<Event>,
        state: Option<St>,
        states: Vec<St>,
        marks: Vec<Mark>,
        tag_handles: Vec<String>,
    }

    impl Parser {
        fn check_event(&mut self, kinds: &[E]) -> YResult<bool> {
            self.fill()?;
            Ok(self
                .current
                .as_ref()
                .is_some_and(|e| kinds.contains(&e.kind)))
        }

        fn fill(&mut self) -> YResult<()> {
            if self.current.is_none()
                && let Some(state) = self.state
            {
                self.current = Some(self.run(state)?);
            }
            Ok(())
        }

        fn peek_event(&mut self) -> YResult<Event> {
            self.fill()?;
            self.current
                .clone()
                .ok_or_else(|| crash("AttributeError: no event"))
        }

        fn get_event(&mut self) -> YResult<Event> {
            self.fill()?;
            self.current
                .take()
                .ok_or_else(|| crash("AttributeError: no event"))
        }

        fn pop_state(&mut self) -> YResult<()> {
            self.state = Some(
                self.states
                    .pop()
                    .ok_or_else(|| crash("IndexError: pop from empty list"))?,
            );
            Ok(())
        }

        fn last_mark(&self) -> Option<Mark> {
            self.marks.last().copied()
        }

        /// `token.move_comment(self.scanner.peek_token())`.
        fn move_to_next(&mut self, token: &mut Token, empty: bool) -> YResult<()> {
            let target = self.sc.peek_token()?;
            move_comment(token, target, empty)
        }

        fn run(&mut self, state: St) -> YResult<Event> {
            match state {
                St::StreamStart => {
                    let mut token = self.sc.get_token()?;
                    self.move_to_next(&mut token, false)?;
                    self.state = Some(St::ImplicitDocumentStart);
                    Ok(Event::new(E::StreamStart, token.start, token.end))
                }
                St::ImplicitDocumentStart => {
                    if !self
                        .sc
                        .check_token(&[K::Directive, K::DocumentStart, K::StreamEnd])?
                    {
                        self.tag_handles = vec!["!".into(), "!!".into()];
                        let mark = self.sc.peek_token()?.start;
                        self.states.push(St::DocumentEnd);
                        self.state = Some(St::BlockNode);
                        Ok(Event::new(E::DocumentStart, mark, mark))
                    } else {
                        self.parse_document_start()
                    }
                }
                St::DocumentEnd => {
                    let start = self.sc.peek_token()?.start;
                    let mut end = start;
                    if self.sc.check_token(&[K::DocumentEnd])? {
                        end = self.sc.get_token()?.end;
                    }
                    self.state = Some(St::ImplicitDocumentStart);
                    Ok(Event::new(E::DocumentEnd, start, end))
                }
                St::DocumentContent => {
                    if self.sc.check_token(&[
                        K::Directive,
                        K::DocumentStart,
                        K::DocumentEnd,
                        K::StreamEnd,
                    ])? {
                        let mark = self.sc.peek_token()?.start;
                        self.pop_state()?;
                        Ok(Event::empty_scalar(mark))
                    } else {
                        self.parse_node(true, false)
                    }
                }
                St::BlockNode => self.parse_node(true, false),
                St::BlockSequenceFirstEntry => {
                    let token = self.sc.get_token()?;
                    self.marks.push(token.start);
                    self.parse_block_sequence_entry()
                }
                St::BlockSequenceEntry => self.parse_block_sequence_entry(),
                St::IndentlessSequenceEntry => self.parse_indentless_sequence_entry(),
                St::BlockMappingFirstKey => {
                    let token = self.sc.get_token()?;
                    self.marks.push(token.start);
                    self.parse_block_mapping_key()
                }
                St::BlockMappingKey => self.parse_block_mapping_key(),
                St::BlockMappingValue => self.parse_block_mapping_value(),
            }
        }

        fn parse_document_start(&mut self) -> YResult<Event> {
            while self.sc.check_token(&[K::DocumentEnd])? {
                self.sc.get_token()?;
            }
            if !self.sc.check_token(&[K::StreamEnd])? {
                let start = self.sc.peek_token()?.start;
                self.process_directives()?;
                if !self.sc.check_token(&[K::DocumentStart])? {
                    let token = self.sc.peek_token()?;
                    return Err(err(
                        None,
                        None,
                        format!(
                            "expected '<document start>', but found {}",
                            py_repr(token.kind.id())
                        ),
                        token.start,
                    ));
                }
                let token = self.sc.get_token()?;
                self.states.push(St::DocumentEnd);
                self.state = Some(St::DocumentContent);
                Ok(Event::new(E::DocumentStart, start, token.end))
            } else {
                let token = self.sc.get_token()?;
                self.state = None;
                Ok(Event::new(E::StreamEnd, token.start, token.end))
            }
        }

        fn process_directives(&mut self) -> YResult<()> {
            let mut yaml_version_seen = false;
            self.tag_handles.clear();
            while self.sc.check_token(&[K::Directive])? {
                let token = self.sc.get_token()?;
                match &token.directive {
                    Directive::Yaml(major) => {
                        if yaml_version_seen {
                            return Err(err(
                                None,
                                None,
                                "found duplicate YAML directive".into(),
                                token.start,
                            ));
                        }
                        if *major != Some(1) {
                            return Err(err(
                                None,
                                None,
                                "found incompatible YAML document (version 1.* is required)".into(),
                                token.start,
                            ));
                        }
                        yaml_version_seen = true;
                    }
                    Directive::Tag(handle) => {
                        if self.tag_handles.contains(handle) {
                            return Err(err(
                                None,
                                None,
                                format!("duplicate tag handle {}", py_repr(handle)),
                                token.start,
                            ));
                        }
                        self.tag_handles.push(handle.clone());
                    }
                    Directive::Other => {}
                }
            }
            Ok(())
        }

        fn parse_node(&mut self, block: bool, indentless_sequence: bool) -> YResult<Event> {
            if self.sc.check_token(&[K::Alias])? {
                let token = self.sc.get_token()?;
                let mut event = Event::new(E::Alias, token.start, token.end);
                event.value = token.value;
                self.pop_state()?;
                return Ok(event);
            }
            // Anchors and tags: strictyaml raises as soon as the parser asks for one.
            if self.sc.check_token(&[K::Anchor])? || self.sc.check_token(&[K::Tag])? {
                return Err(crash("anchor or tag token accepted"));
            }
            let start = self.sc.peek_token()?.start;
            if indentless_sequence && self.sc.check_token(&[K::BlockEntry])? {
                let pt = self.sc.peek_token()?;
                if let Some(slots) = pt.comment.as_mut()
                    && slots[0]
                {
                    slots[0] = false;
                }
                let end = pt.end;
                self.state = Some(St::IndentlessSequenceEntry);
                return Ok(Event::new(E::SequenceStart, start, end));
            }
            if self.sc.check_token(&[K::Scalar])? {
                let token = self.sc.get_token()?;
                let mut event = Event::new(E::Scalar, start, token.end);
                event.value = token.value;
                event.plain = token.plain;
                self.pop_state()?;
                return Ok(event);
            }
            if self.sc.check_token(&[K::FlowSequenceStart])?
                || self.sc.check_token(&[K::FlowMappingStart])?
            {
                return Err(crash("flow collection accepted"));
            }
            if block && self.sc.check_token(&[K::BlockSequenceStart])? {
                let pt = self.sc.peek_token()?;
                let end = pt.start;
                if pt.comment.as_ref().is_none_or(|slots| !slots[1]) {
                    pt.split_comment();
                }
                self.state = Some(St::BlockSequenceFirstEntry);
                return Ok(Event::new(E::SequenceStart, start, end));
            }
            if block && self.sc.check_token(&[K::BlockMappingStart])? {
                let end = self.sc.peek_token()?.start;
                self.state = Some(St::BlockMappingFirstKey);
                return Ok(Event::new(E::MappingStart, start, end));
            }
            let token = self.sc.peek_token()?;
            let node = if block { "block" } else { "flow" };
            Err(err(
                Some(&format!("while parsing a {node} node")),
                Some(start),
                format!(
                    "expected the node content, but found {}",
                    py_repr(token.kind.id())
                ),
                token.start,
            ))
        }

        fn parse_block_sequence_entry(&mut self) -> YResult<Event> {
            if self.sc.check_token(&[K::BlockEntry])? {
                let mut token = self.sc.get_token()?;
                self.move_to_next(&mut token, false)?;
                if !self.sc.check_token(&[K::BlockEntry, K::BlockEnd])? {
                    self.states.push(St::BlockSequenceEntry);
                    return self.parse_node(true, false);
                }
                self.state = Some(St::BlockSequenceEntry);
                return Ok(Event::empty_scalar(token.end));
            }
            if !self.sc.check_token(&[K::BlockEnd])? {
                let context_mark = self.last_mark();
                let token = self.sc.peek_token()?;
                return Err(err(
                    Some("while parsing a block collection"),
                    context_mark,
                    format!(
                        "expected <block end>, but found {}",
                        py_repr(token.kind.id())
                    ),
                    token.start,
                ));
            }
            let token = self.sc.get_token()?;
            self.pop_state()?;
            self.marks.pop();
            Ok(Event::new(E::SequenceEnd, token.start, token.end))
        }

        fn parse_indentless_sequence_entry(&mut self) -> YResult<Event> {
            if self.sc.check_token(&[K::BlockEntry])? {
                let mut token = self.sc.get_token()?;
                self.move_to_next(&mut token, false)?;
                if !self
                    .sc
                    .check_token(&[K::BlockEntry, K::Key, K::Value, K::BlockEnd])?
                {
                    self.states.push(St::IndentlessSequenceEntry);
                    return self.parse_node(true, false);
                }
                self.state = Some(St::IndentlessSequenceEntry);
                return Ok(Event::empty_scalar(token.end));
            }
            let mark = self.sc.peek_token()?.start;
            self.pop_state()?;
            Ok(Event::new(E::SequenceEnd, mark, mark))
        }

        fn parse_block_mapping_key(&mut self) -> YResult<Event> {
            if self.sc.check_token(&[K::Key])? {
                let mut token = self.sc.get_token()?;
                self.move_to_next(&mut token, false)?;
                if !self.sc.check_token(&[K::Key, K::Value, K::BlockEnd])? {
                    self.states.push(St::BlockMappingValue);
                    return self.parse_node(true, true);
                }
                self.state = Some(St::BlockMappingValue);
                return Ok(Event::empty_scalar(token.end));
            }
            if self.sc.check_token(&[K::Value])? {
                self.state = Some(St::BlockMappingValue);
                let mark = self.sc.peek_token()?.start;
                return Ok(Event::empty_scalar(mark));
            }
            if !self.sc.check_token(&[K::BlockEnd])? {
                let context_mark = self.last_mark();
                let token = self.sc.peek_token()?;
                return Err(err(
                    Some("while parsing a block mapping"),
                    context_mark,
                    format!(
                        "expected <block end>, but found {}",
                        py_repr(token.kind.id())
                    ),
                    token.start,
                ));
            }
            let mut token = self.sc.get_token()?;
            self.move_to_next(&mut token, false)?;
            self.pop_state()?;
            self.marks.pop();
            Ok(Event::new(E::MappingEnd, token.start, token.end))
        }

        fn parse_block_mapping_value(&mut self) -> YResult<Event> {
            if self.sc.check_token(&[K::Value])? {
                let mut token = self.sc.get_token()?;
                if self.sc.check_token(&[K::Value])? {
                    self.move_to_next(&mut token, false)?;
                } else if !self.sc.check_token(&[K::Key])? {
                    self.move_to_next(&mut token, true)?;
                }
                if !self.sc.check_token(&[K::Key, K::Value, K::BlockEnd])? {
                    self.states.push(St::BlockMappingKey);
                    return self.parse_node(true, true);
                }
                self.state = Some(St::BlockMappingKey);
                if token.comment.is_some() {
                    return Ok(Event::empty_scalar(token.end));
                }
                let next = self.sc.peek_token()?;
                if let Some(slots) = next.comment.take() {
                    next.comment = Some(vec![false, slots[1]]);
                }
                return Ok(Event::empty_scalar(next.end));
            }
            self.state = Some(St::BlockMappingKey);
            let mark = self.sc.peek_token()?.start;
            Ok(Event::empty_scalar(mark))
        }
    }

    // ---------------------------------------------------------------- composer

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Tag {
        Str,
        /// A plain `<<`.
        Merge,
        /// A plain `=`.
        Value,
    }

    #[derive(Debug)]
    enum NodeKind {
        Scalar(Tag, String),
        Seq(Vec<Node>),
        Map(Vec<(Node, Node)>),
    }

    #[derive(Debug)]
    struct Node {
        kind: NodeKind,
        start: Mark,
        end: Mark,
    }

    impl Node {
        fn id(&self) -> &'static str {
            match self.kind {
                NodeKind::Scalar(..) => "scalar",
                NodeKind::Seq(_) => "sequence",
                NodeKind::Map(_) => "mapping",
            }
        }
    }

    impl Parser {
        fn get_single_node(&mut self) -> YResult<Option<Node>> {
            self.get_event()?;
            let mut document = None;
            if !self.check_event(&[E::StreamEnd])? {
                document = Some(self.compose_document()?);
            }
            if !self.check_event(&[E::StreamEnd])? {
                let event = self.get_event()?;
                let start = document.as_ref().map(|d| d.start);
                return Err(err(
                    Some("expected a single document in the stream"),
                    start,
                    "but found another document".into(),
                    event.start,
                ));
            }
            self.get_event()?;
            Ok(document)
        }

        fn compose_document(&mut self) -> YResult<Node> {
            self.get_event()?;
            let node = self.compose_node()?;
            self.get_event()?;
            Ok(node)
        }

        fn compose_node(&mut self) -> YResult<Node> {
            if self.check_event(&[E::Alias])? {
                let event = self.get_event()?;
                return Err(err(
                    None,
                    None,
                    format!("found undefined alias {}", py_repr(&event.value)),
                    event.start,
                ));
            }
            let event = self.peek_event()?;
            match event.kind {
                E::Scalar => {
                    let event = self.get_event()?;
                    let tag = match (event.plain, event.value.as_str()) {
                        (true, "<<") => Tag::Merge,
                        (true, "=") => Tag::Value,
                        _ => Tag::Str,
                    };
                    Ok(Node {
                        kind: NodeKind::Scalar(tag, event.value),
                        start: event.start,
                        end: event.end,
                    })
                }
                E::SequenceStart => {
                    let start = self.get_event()?.start;
                    let mut items = Vec::new();
                    while !self.check_event(&[E::SequenceEnd])? {
                        items.push(self.compose_node()?);
                    }
                    let end = self.get_event()?.end;
                    Ok(Node {
                        kind: NodeKind::Seq(items),
                        start,
                        end,
                    })
                }
                E::MappingStart => {
                    let start = self.get_event()?.start;
                    let mut pairs = Vec::new();
                    while !self.check_event(&[E::MappingEnd])? {
                        let key = self.compose_node()?;
                        let value = self.compose_node()?;
                        pairs.push((key, value));
                    }
                    let end = self.get_event()?.end;
                    Ok(Node {
                        kind: NodeKind::Map(pairs),
                        start,
                        end,
                    })
                }
                _ => Err(crash("UnboundLocalError in compose_node")),
            }
        }
    }

    // ------------------------------------------------------------- constructor

    /// ruamel's constructor with strictyaml's `construct_mapping`.
    ///
    /// ruamel builds collections through generators: reached while not inside a "deep"
    /// construction (the root, the `<<` values of such a mapping, the collections inside such
    /// a sequence), a collection is only created empty and filled later, in FIFO order. That
    /// order decides which error comes first, and it is why the root mapping receives no
    /// merged keys (the merged mappings are still empty when merged).
    struct Constructor<'a> {
        complex_key: bool,
        deferred: VecDeque<&'a Node>,
    }

    impl<'a> Constructor<'a> {
        /// Constructs the document: the root, then everything deferred.
        fn construct_document(&mut self, root: &'a Node) -> YResult<Data> {
            let data = self.construct(root, false)?;
            let mut result = None;
            while let Some(node) = self.deferred.pop_front() {
                let filled = self.fill(node)?;
                if std::ptr::eq(node, root) {
                    result = Some(filled);
                }
            }
            Ok(result.unwrap_or(data))
        }

        /// `construct_object`; `deep` is ruamel's `deep_construct` at that moment.
        fn construct(&mut self, node: &'a Node, deep: bool) -> YResult<Data> {
            match &node.kind {
                NodeKind::Scalar(Tag::Str, value) => Ok(Data::Str(value.clone())),
                NodeKind::Scalar(_, value) => Ok(Data::Tagged(value.clone())),
                NodeKind::Seq(_) | NodeKind::Map(_) if !deep => {
                    self.deferred.push_back(node);
                    Ok(match node.kind {
                        NodeKind::Seq(_) => Data::Seq(Vec::new()),
                        _ => Data::Map(Vec::new()),
                    })
                }
                NodeKind::Seq(items) => Ok(Data::Seq(
                    items
                        .iter()
                        .map(|item| self.construct(item, true))
                        .collect::<YResult<_>>()?,
                )),
                NodeKind::Map(pairs) => self.construct_mapping(node, pairs, true),
            }
        }

        /// Runs a deferred generator (outside any deep construction).
        fn fill(&mut self, node: &'a Node) -> YResult<Data> {
            match &node.kind {
                NodeKind::Seq(items) => Ok(Data::Seq(
                    items
                        .iter()
                        .map(|item| self.construct(item, false))
                        .collect::<YResult<_>>()?,
                )),
                NodeKind::Map(pairs) => self.construct_mapping(node, pairs, false),
                NodeKind::Scalar(..) => self.construct(node, false),
            }
        }

        /// strictyaml's `construct_mapping` (ruamel's `flatten_mapping` for `<<` first).
        fn construct_mapping(
            &mut self,
            node: &'a Node,
            pairs: &'a [(Node, Node)],
            deep: bool,
        ) -> YResult<Data> {
            let mapping_error = |problem: String, mark: Mark| {
                err(
                    Some("while constructing a mapping"),
                    Some(node.start),
                    problem,
                    mark,
                )
            };
            let mut merged: Vec<Data> = Vec::new();
            let mut merge_seen = false;
            let mut rest: Vec<&'a (Node, Node)> = Vec::new();
            for pair in pairs {
                let (key, value) = pair;
                if !matches!(key.kind, NodeKind::Scalar(Tag::Merge, _)) {
                    rest.push(pair);
                    continue;
                }
                if merge_seen {
                    return Err(crash("DuplicateKeyError: found duplicate key \"<<\""));
                }
                merge_seen = true;
                match &value.kind {
                    NodeKind::Map(_) => merged.push(self.construct(value, deep)?),
                    NodeKind::Seq(items) => {
                        for item in items {
                            if !matches!(item.kind, NodeKind::Map(_)) {
                                return Err(mapping_error(
                                    format!(
                                        "expected a mapping for merging, but found {}",
                                        item.id()
                                    ),
                                    item.start,
                                ));
                            }
                            merged.push(self.construct(item, deep)?);
                        }
                    }
                    NodeKind::Scalar(..) => {
                        return Err(mapping_error(
                            format!(
                                "expected a mapping or list of mappings for merging, but found {}",
                                value.id()
                            ),
                            value.start,
                        ));
                    }
                }
            }
            let mut entries: Vec<(Key, Data)> = Vec::new();
            for (key_node, value_node) in &rest {
                let key = match self.construct(key_node, true)? {
                    Data::Str(s) | Data::Tagged(s) => Key::Str(s),
                    Data::Seq(items) => {
                        self.complex_key = true;
                        let mut parts = Vec::new();
                        for item in items {
                            match item {
                                Data::Str(s) => parts.push(s),
                                _ => return Err(crash("TypeError: unhashable type: 'list'")),
                            }
                        }
                        Key::Tuple(parts)
                    }
                    Data::Map(_) => {
                        return Err(mapping_error("found unhashable key".into(), key_node.start));
                    }
                };
                let value = self.construct(value_node, true)?;
                if entries.iter().any(|(k, _)| *k == key) {
                    let shown = match &key {
                        Key::Str(s) => s.clone(),
                        Key::Tuple(parts) => py_tuple_repr(parts),
                    };
                    return Err(err(
                        Some("While parsing"),
                        Some(key_node.start),
                        format!("Duplicate key '{shown}' found"),
                        key_node.end,
                    ));
                }
                entries.push((key, value));
            }
            // (a deferred merged mapping is still empty here)
            for map in merged {
                if let Data::Map(items) = map {
                    for (k, v) in items {
                        if !entries.iter().any(|(existing, _)| *existing == k) {
                            entries.push((k, v));
                        }
                    }
                }
            }
            let mut column = None;
            for (_, value_node) in &rest {
                if matches!(value_node.kind, NodeKind::Map(_)) {
                    let first = *column.get_or_insert(value_node.start.column);
                    if value_node.start.column != first {
                        return Err(err(
                            Some("While parsing"),
                            Some(value_node.start),
                            "Found mapping with indentation inconsistent with previous mapping"
                                .into(),
                            value_node.end,
                        ));
                    }
                }
            }
            Ok(Data::Map(entries))
        }
    }

    fn py_tuple_repr(parts: &[String]) -> String {
        let items: Vec<String> = parts.iter().map(|p| py_repr(p)).collect();
        if items.len() == 1 {
            format!("({},)", items[0])
        } else {
            format!("({})", items.join(", "))
        }
    }

    /// The first character ruamel's reader refuses, with its position.
    fn non_printable(text: &str) -> Option<(usize, char)> {
        text.chars().enumerate().find(|&(_, c)| {
            !(matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
                || c >= '\u{10000}')
        })
    }

    /// `strictyaml.load(text).data`: `Ok(None)` when the document is not a mapping or a
    /// sequence (strictyaml then hands back the source text itself).
    pub(super) fn load(text: &str) -> Result<Option<Data>, LoadError> {
        if let Some((position, ch)) = non_printable(text) {
            return Err(LoadError {
                message: format!(
                    "unacceptable character #x{:04x}: special characters are not allowed\n  in \"{LABEL}\", position {position}",
                    ch as u32
                ),
                crash: true,
            });
        }
        let mut parser = Parser {
            sc: Scanner::new(text),
            current: None,
            state: Some(St::StreamStart),
            states: Vec::new(),
            marks: Vec::new(),
            tag_handles: Vec::new(),
        };
        let node = match parser.get_single_node() {
            Ok(node) => node,
            Err(e) => {
                let crash = matches!(e, YamlError::Crash(_));
                return Err(LoadError {
                    message: render_error(&e, &parser.sc.buf),
                    crash,
                });
            }
        };
        let mut constructor = Constructor {
            complex_key: false,
            deferred: VecDeque::new(),
        };
        let result = match &node {
            Some(node) => constructor.construct_document(node).map(Some),
            None => Ok(None),
        };
        match result {
            Ok(data) => {
                if parser.sc.lone_surrogate {
                    return Err(LoadError {
                        message: "a \\u escape of a lone surrogate (Python keeps it in the string; Rust strings cannot)"
                            .into(),
                        crash: true,
                    });
                }
                if constructor.complex_key {
                    return Err(LoadError {
                        message: "AssertionError: a complex (non-scalar) mapping key".into(),
                        crash: true,
                    });
                }
                Ok(data.filter(|d| matches!(d, Data::Map(_) | Data::Seq(_))))
            }
            Err(e) => {
                let crash = matches!(e, YamlError::Crash(_));
                Err(LoadError {
                    message: render_error(&e, &parser.sc.buf),
                    crash,
                })
            }
        }
    }
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
    fn python_json_output() {
        let value = serde_json::json!({"name": "x", "d": "é 😀 \"q\" \\ \n\u{1}\u{7f}", "l": [], "m": {}, "n": ["a", {"b": "c"}]});
        assert_eq!(
            python_json(&value),
            "{\n  \"name\": \"x\",\n  \"d\": \"\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\\\ \\n\\u0001\\u007f\",\n  \"l\": [],\n  \"m\": {},\n  \"n\": [\n    \"a\",\n    {\n      \"b\": \"c\"\n    }\n  ]\n}"
        );
    }

    #[test]
    fn python_repr_quotes() {
        assert_eq!(py_repr("a"), "'a'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("'\""), "'\\'\"'");
        assert_eq!(py_repr("\t\u{1}\u{a0}é\u{200b}"), "'\\t\\x01\\xa0é\\u200b'");
    }

    #[test]
    fn pathlib_paths() {
        for (input, shown, name, parent) in [
            ("a/b", "a/b", "b", "a"),
            ("./a//b/", "a/b", "b", "a"),
            (".", ".", "", "."),
            ("", ".", "", "."),
            ("/", "/", "", "/"),
            ("//a", "//a", "a", "//"),
            ("///a", "/a", "a", "/"),
            ("a/../b", "a/../b", "b", "a/.."),
            ("SKILL.md", "SKILL.md", "SKILL.md", "."),
        ] {
            let path = Path::new(input);
            assert_eq!(display_path(path), shown, "{input:?}");
            assert_eq!(path_name(path), name, "{input:?}");
            assert_eq!(path_parent(path), PathBuf::from(parent), "{input:?}");
        }
    }

    #[test]
    fn html_escaping() {
        assert_eq!(
            html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;"
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
