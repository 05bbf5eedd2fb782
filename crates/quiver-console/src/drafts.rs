//! Package drafts: folders under `<state>/drafts/` that a person makes from a template and
//! edits in the console, linted as `quiver lint` lints, until they are installed. A draft is
//! never a root the catalog loads. Every path a request names is checked to stay inside its
//! draft: relative, no `..`, no hidden or empty segment, no link followed.

use std::fs;
use std::path::{Component, Path, PathBuf};

use quiver_catalog::lint::{COLLISION_THRESHOLD, collision_diagnostics, collisions};
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use serde::Serialize;

use crate::ConsoleError;

/// The largest file a draft may hold (bytes).
pub(crate) const MAX_FILE: usize = 64 << 10;
/// The most files a draft may hold.
pub(crate) const MAX_FILES: usize = 64;
/// The longest relative path.
const MAX_PATH: usize = 200;
/// The deepest folder nesting.
const MAX_DEPTH: usize = 6;

/// What the template makes beside the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Starter {
    /// One exposed tool, `tools/<name>/` with a Python script.
    Tool,
    /// One skill, `skills/<name>/SKILL.md`.
    Skill,
}

impl Starter {
    /// The starter named in a form (`tool` or `skill`).
    pub fn parse(text: &str) -> Result<Starter, ConsoleError> {
        match text {
            "tool" => Ok(Starter::Tool),
            "skill" => Ok(Starter::Skill),
            other => Err(ConsoleError::BadRequest(format!(
                "the template is `tool` or `skill`, not `{other}`"
            ))),
        }
    }
}

/// Checks a draft's relative path: relative, at most [`MAX_PATH`] bytes and [`MAX_DEPTH`]
/// deep, plain segments only (no `..`, `.`, hidden, empty, backslash or control character).
pub(crate) fn check_rel(path: &str) -> Result<PathBuf, ConsoleError> {
    let bad = |why: &str| {
        Err(ConsoleError::BadRequest(format!(
            "the path `{}` {why}",
            crate::escape_invisible(path)
        )))
    };
    if path.is_empty() {
        return bad("is empty");
    }
    if path.len() > MAX_PATH {
        return bad("is too long");
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return bad("has a backslash or a control character");
    }
    let rel = Path::new(path);
    if path.starts_with('/') || rel.is_absolute() {
        return bad("is absolute: name a file inside the draft");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.len() > MAX_DEPTH {
        return bad("is nested too deep");
    }
    for segment in &segments {
        if segment.is_empty() || segment.starts_with('.') {
            return bad("has an empty, `.`, `..` or hidden segment");
        }
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return bad("leaves the draft");
    }
    Ok(rel.to_owned())
}

/// The files of a fresh draft of package `id` described as `description`, with one tool or
/// skill `item`: what `quiver new` writes, which `quiver lint` passes.
pub(crate) fn template(
    id: &str,
    description: &str,
    starter: Starter,
    item: &str,
) -> Vec<(String, String)> {
    // JSON text is YAML: quotes, colons and Chinese need no further care.
    let quoted = serde_json::Value::String(description.to_owned()).to_string();
    let mut files = vec![
        (
            "quiver.yaml".to_owned(),
            format!(
                "id: {id}\nname: {id}\nversion: 0.1.0\ndescription: {quoted}\nlicense: Apache-2.0\npermissions: {{}}\n"
            ),
        ),
        (
            "docs/README.md".to_owned(),
            format!("# {id}\n\n{description}\n"),
        ),
    ];
    match starter {
        Starter::Tool => {
            files.push((
                format!("tools/{item}/tool.yaml"),
                format!(
                    "name: {item}\nversion: 0.1.0\ndescription:\n  summary: Greet someone by name.\n  when_to_use: The user asks to be greeted.\ncategory: decision\nexpose: true\ninput:\n  type: object\n  properties:\n    who:\n      type: string\n      description: Whom to greet.\n  required: [who]\nexamples:\n  - query: greet Ada\n    arguments: {{who: Ada}}\nnegative_examples:\n  - delete all my files\nrun:\n  command: [python3, main.py]\n"
                ),
            ));
            files.push((
                format!("tools/{item}/main.py"),
                "import json\nimport sys\n\nrequest = json.load(sys.stdin)\nwho = request[\"arguments\"].get(\"who\", \"world\")\nprint(json.dumps({\"greeting\": f\"Hello, {who}!\"}))\n".to_owned(),
            ));
        }
        Starter::Skill => files.push((
            format!("skills/{item}/SKILL.md"),
            format!(
                "---\nname: {item}\ndescription: Say what this skill does and when to use it, in one or two sentences.\n---\n\n# {item}\n\nInstructions the model reads when it opens this skill.\n"
            ),
        )),
    }
    files
}

/// One file of a draft, as the editor shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DraftFile {
    /// Its path inside the draft (`/`-separated).
    pub path: String,
    /// Its text (`None`: not UTF-8 or too large to edit here).
    pub text: Option<String>,
}

/// A diagnostic of the draft, as the editor shows it beside its file.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Lint {
    pub severity: String,
    pub code: String,
    /// The file inside the draft (or the path as the linter gave it).
    pub file: String,
    pub line: Option<u32>,
    pub message: String,
    pub help: Option<String>,
}

/// The drafts folder of a state folder.
pub(crate) struct Drafts {
    root: PathBuf,
}

impl Drafts {
    /// The drafts under `state/drafts`.
    pub fn new(state: &Path) -> Drafts {
        Drafts {
            root: state.join("drafts"),
        }
    }

    /// The folder of draft `id` (checked: a package name).
    pub fn dir(&self, id: &str) -> Result<PathBuf, ConsoleError> {
        quiver_package::names::check_name(id)
            .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
        Ok(self.root.join(id))
    }

    /// The folder of an existing draft `id` (not a link).
    pub fn existing(&self, id: &str) -> Result<PathBuf, ConsoleError> {
        let dir = self.dir(id)?;
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => Ok(dir),
            _ => Err(ConsoleError::NotFound(format!("no draft `{id}`"))),
        }
    }

    /// The drafts' ids, sorted.
    pub fn list(&self) -> Result<Vec<String>, ConsoleError> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let entry = entry?;
            if entry.file_type()?.is_dir()
                && let Some(name) = entry.file_name().to_str()
                && quiver_package::names::check_name(name).is_ok()
            {
                out.push(name.to_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Makes draft `id` from `files`; 409 when it exists.
    pub fn create(&self, id: &str, files: &[(String, String)]) -> Result<(), ConsoleError> {
        let dir = self.dir(id)?;
        fs::create_dir_all(&self.root)?;
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(ConsoleError::Conflict(format!(
                    "a draft `{id}` exists already: open it, or pick another id"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        for (path, text) in files {
            self.write(id, path, text)?;
        }
        Ok(())
    }

    /// Writes `text` to `path` inside draft `id`, making its folders: refused for a path
    /// that leaves the draft or passes through a link, a text over [`MAX_FILE`], or a new
    /// file past [`MAX_FILES`].
    pub fn write(&self, id: &str, path: &str, text: &str) -> Result<(), ConsoleError> {
        let dir = self.existing(id)?;
        let rel = check_rel(path)?;
        if text.len() > MAX_FILE {
            return Err(ConsoleError::BadRequest(format!(
                "`{path}` is {} bytes; a draft's file holds at most {MAX_FILE}",
                text.len()
            )));
        }
        let mut at = dir.clone();
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            match fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(ConsoleError::BadRequest(format!(
                        "`{path}` passes through a link; drafts hold plain files only"
                    )));
                }
                Ok(m) if last && !m.is_file() => {
                    return Err(ConsoleError::BadRequest(format!("`{path}` is a folder")));
                }
                Ok(m) if !last && !m.is_dir() => {
                    return Err(ConsoleError::BadRequest(format!(
                        "`{path}`: a part of it is a file"
                    )));
                }
                Ok(_) => {}
                Err(_) if last => {
                    if self.files(id)?.len() >= MAX_FILES {
                        return Err(ConsoleError::BadRequest(format!(
                            "a draft holds at most {MAX_FILES} files"
                        )));
                    }
                }
                Err(_) => fs::create_dir(&at)?,
            }
        }
        fs::write(&at, text)?;
        Ok(())
    }

    /// The files of draft `id`, sorted by path (links are left out).
    pub fn files(&self, id: &str) -> Result<Vec<DraftFile>, ConsoleError> {
        let dir = self.existing(id)?;
        let mut out = Vec::new();
        walk(&dir, "", 0, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// The diagnostics of draft `id`, as `quiver lint` finds them: the catalog's loading, name
    /// collisions, and what the code and skills use against what the package declares.
    pub fn lint(&self, id: &str) -> Result<Vec<Lint>, ConsoleError> {
        let dir = self.existing(id)?;
        let catalog = Catalog::load(
            &[Root {
                path: dir.clone(),
                scope: Scope::Project,
            }],
            &CatalogOptions::default(),
        );
        let mut diags = catalog.diagnostics().to_vec();
        diags.extend(collision_diagnostics(
            &catalog,
            &collisions(&catalog, COLLISION_THRESHOLD),
        ));
        let home = quiver_package::env::home();
        for cp in catalog.packages() {
            diags.extend(quiver_package::declarations::check_dir(
                &cp.package,
                home.as_deref(),
            ));
        }
        Ok(diags
            .into_iter()
            .map(|mut d| {
                d.relative_to(&dir);
                Lint {
                    severity: d.severity.to_string(),
                    code: d.code.to_owned(),
                    file: d.file.display().to_string(),
                    line: d.line,
                    message: d.message,
                    help: d.help,
                }
            })
            .collect())
    }
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    out: &mut Vec<DraftFile>,
) -> Result<(), ConsoleError> {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), &path, depth + 1, out)?;
        } else if kind.is_file() && out.len() < MAX_FILES {
            let bytes = fs::read(entry.path())?;
            let text = (bytes.len() <= MAX_FILE)
                .then(|| String::from_utf8(bytes).ok())
                .flatten();
            out.push(DraftFile { path, text });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_draft() {
        let ok = [
            "quiver.yaml",
            "tools/hello/tool.yaml",
            "docs/说明.md",
            "a/b/c/d/e/f",
        ];
        for path in ok {
            assert!(check_rel(path).is_ok(), "{path}");
        }
        let refused = [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            ".git/config",
            "a/.hidden",
            "a//b",
            "a/",
            "a\\..\\b",
            "a\u{0}b",
            "a\nb",
            "a/b/c/d/e/f/g",
        ];
        for path in refused {
            assert!(check_rel(path).is_err(), "{path:?}");
        }
        assert!(check_rel(&"x".repeat(201)).is_err());
    }

    #[test]
    fn templates_pass_lint() {
        let dir = tempfile::tempdir().unwrap_or_else(|_| unreachable!());
        let drafts = Drafts::new(dir.path());
        let cases = [
            (Starter::Tool, "greeter", "hello", "tools/hello/tool.yaml"),
            (
                Starter::Skill,
                "notes-zh",
                "take-notes",
                "skills/take-notes/SKILL.md",
            ),
        ];
        for (starter, id, item, file) in cases {
            let files = template(id, "问候 \"greet\": people", starter, item);
            assert!(files.iter().any(|(p, _)| p == file), "{file}");
            drafts.create(id, &files).unwrap_or_else(|e| panic!("{e}"));
            let lints = drafts.lint(id).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                lints.iter().all(|l| l.severity != "error"),
                "{id}: {lints:?}"
            );
            assert!(matches!(
                drafts.create(id, &files),
                Err(ConsoleError::Conflict(_))
            ));
        }
        assert_eq!(drafts.list().unwrap_or_default(), ["greeter", "notes-zh"]);
    }

    #[test]
    fn writes_refuse_links_and_limits() {
        let dir = tempfile::tempdir().unwrap_or_else(|_| unreachable!());
        let drafts = Drafts::new(dir.path());
        drafts
            .create("d", &template("d", "x", Starter::Skill, "s"))
            .unwrap_or_else(|e| panic!("{e}"));
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap_or_else(|_| unreachable!());
        std::os::unix::fs::symlink(&outside, dir.path().join("drafts/d/link"))
            .unwrap_or_else(|_| unreachable!());
        assert!(drafts.write("d", "link/x.md", "x").is_err());
        assert!(!outside.join("x.md").exists());
        assert!(drafts.write("d", "docs/README.md/x", "x").is_err());
        assert!(drafts.write("d", "docs", "x").is_err());
        assert!(
            drafts
                .write("d", "big.md", &"x".repeat(MAX_FILE + 1))
                .is_err()
        );
        assert!(drafts.write("../x", "a.md", "x").is_err());
        assert!(drafts.write("nope", "a.md", "x").is_err());
        drafts
            .write("d", "new/dir/a.md", "天气")
            .unwrap_or_else(|e| panic!("{e}"));
        let files = drafts.files("d").unwrap_or_default();
        assert!(
            files
                .iter()
                .any(|f| f.path == "new/dir/a.md" && f.text.as_deref() == Some("天气"))
        );
        assert!(!files.iter().any(|f| f.path.starts_with("link")));
    }
}
