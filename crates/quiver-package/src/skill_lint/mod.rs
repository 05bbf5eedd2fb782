//! Lint of a skill's instructions (the body of `SKILL.md`), as agentskills-ci reports them:
//!
//! - `skill-link-missing`: a Markdown link (`[forms](forms.md)`, `![chart](assets/c.png)`, a
//!   reference definition `[forms]: forms.md`) or a path in inline code that starts with a
//!   skill folder the skill has (`` `scripts/fill.py` `` where `scripts/` exists) names a file
//!   that is not in the package; `skill-link-outside-package`: it leads out of the package, so it could
//!   never be read. Web links, `#anchors`, absolute paths and placeholders (`{name}.md`,
//!   `<file>`) are not checked, nor is anything inside fenced code blocks.
//! - `skill-pipe-to-shell`: a download piped into a shell (`curl … | sh`, `wget -qO- … | sudo
//!   bash`, `bash <(curl …)`, `sh -c "$(curl …)"`), anywhere, code blocks included.
//! - `skill-recursive-delete`: `rm -rf` in any spelling (`-fr`, `-Rf`, `-r -f`, `--recursive
//!   --force`), anywhere.
//!
//! [`scan`] is pure (text in, findings out, tested by tables); [`check`] resolves the links
//! against the package folder and turns findings into warnings with file, line and column.

use std::path::{Component, Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::source::PackageDir;

/// Skill folders whose paths in inline code are checked.
const SKILL_FOLDERS: [&str; 5] = [
    "references/",
    "reference/",
    "scripts/",
    "assets/",
    "templates/",
];

/// Shells a download must not be piped into.
const SHELLS: [&str; 7] = ["sh", "bash", "zsh", "dash", "ksh", "ash", "fish"];

/// Most findings reported for one skill.
const MAX_FINDINGS: usize = 200;

/// What a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Markdown link or reference definition to a local path.
    Link,
    /// A path in inline code that starts with a skill folder.
    CodePath,
    /// A download piped into a shell.
    PipeToShell,
    /// `rm` with both recursive and force flags.
    RecursiveDelete,
}

/// One finding in a text: its kind, what it names (the local path for links, the command
/// otherwise), and where (line and column counted from 1, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is.
    pub kind: Kind,
    /// The local path a link names (fragment and query removed, percent-decoded), or the
    /// command word that starts a risky pattern.
    pub target: String,
    /// Line, from 1.
    pub line: u64,
    /// Column of the target's first character, from 1.
    pub column: u64,
}

/// Everything the lint looks at in `text`, in text order.
pub fn scan(text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let line_no = index as u64 + 1;
        let at = |kind, target: String, byte: usize| Finding {
            kind,
            target,
            line: line_no,
            column: line[..byte].chars().count() as u64 + 1,
        };
        for (kind, byte) in risky(line) {
            let word = line[byte..].split_whitespace().next().unwrap_or("");
            out.push(at(kind, word.to_owned(), byte));
        }
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = marker {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => fence = Some((c, run)),
                    Some((open, len)) if open == c && run >= len => fence = None,
                    Some(_) => {}
                }
                continue;
            }
        }
        if fence.is_some() {
            continue;
        }
        for (kind, target, byte) in links(line) {
            out.push(at(kind, target, byte));
        }
    }
    out
}

/// The links of one line outside fenced code: inline links and images, a reference
/// definition, and skill-folder paths in inline code spans.
fn links(line: &str) -> Vec<(Kind, String, usize)> {
    let mut out = Vec::new();
    let indent = line.len() - line.trim_start().len();
    if indent <= 3
        && let Some(rest) = line.trim_start().strip_prefix('[')
        && !rest.starts_with('^')
        && let Some(end) = rest.find("]:")
    {
        let after = &rest[end + 2..];
        let start = line.len() - after.len() + (after.len() - after.trim_start().len());
        let raw = after.split_whitespace().next().unwrap_or("");
        if let Some(target) = local_target(raw) {
            out.push((Kind::Link, target, start));
        }
        return out;
    }
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let run = line[i..].bytes().take_while(|b| *b == b'`').count();
            let fence = &line[i..i + run];
            let content_start = i + run;
            let Some(close) = line[content_start..].find(fence) else {
                break;
            };
            let content = &line[content_start..content_start + close];
            for (offset, token) in tokens(content) {
                if SKILL_FOLDERS.iter().any(|f| token.starts_with(f))
                    && !token.contains(':')
                    && let Some(target) = local_target(token)
                {
                    out.push((Kind::CodePath, target, content_start + offset));
                }
            }
            i = content_start + close + run;
            continue;
        }
        if line[i..].starts_with("](") && line[..i].contains('[') {
            let start = i + 2;
            let rest = &line[start..];
            let raw = match rest.strip_prefix('<') {
                Some(inner) => inner.split('>').next().unwrap_or(""),
                None => until_close(rest),
            };
            if let Some(target) = local_target(raw) {
                out.push((Kind::Link, target, start));
            }
            i = start;
            continue;
        }
        i += line[i..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// A link destination up to its closing `)` (parentheses inside balanced) or a space.
fn until_close(rest: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &rest[..i],
            ')' => depth -= 1,
            c if c.is_whitespace() => return &rest[..i],
            _ => {}
        }
    }
    rest
}

/// The whitespace-separated tokens of `text` with their byte offsets.
fn tokens(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_whitespace()
        .map(move |t| (t.as_ptr() as usize - text.as_ptr() as usize, t))
}

/// The local path a link destination names, or `None` for what is not checked: empty, an
/// `#anchor`, a URL or any `scheme:`, an absolute or home path, a placeholder.
pub fn local_target(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let path = raw.split(['#', '?']).next().unwrap_or("");
    let scheme = path
        .split_once(':')
        .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
    if path.is_empty()
        || scheme
        || path.starts_with(['/', '~', '\\'])
        || path.contains(['{', '}', '<', '>', '$', '*', '[', ']', '|', '\\'])
    {
        return None;
    }
    Some(percent_decode(path))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `line[at..]` starts the word `word` (not inside a longer word or a path).
fn word_at(line: &str, at: usize, word: &str) -> bool {
    let before = line[..at].chars().next_back();
    let after = line[at + word.len()..].chars().next();
    line[at..].starts_with(word)
        && before.is_none_or(|c| !(c.is_alphanumeric() || "_-./".contains(c)))
        && after.is_none_or(char::is_whitespace)
}

/// The shell a command starts with (`bash`, `sudo -E bash`, `/bin/sh`, `env bash`), if any.
fn starts_shell(command: &str) -> bool {
    for word in command.split_whitespace() {
        let name = word.rsplit('/').next().unwrap_or(word);
        match name {
            "sudo" | "env" | "command" | "exec" => continue,
            flag if flag.starts_with('-') => continue,
            name => return SHELLS.contains(&name),
        }
    }
    false
}

/// The risky patterns of one line: each kind with the byte offset of its command word.
fn risky(line: &str) -> Vec<(Kind, usize)> {
    let mut out = Vec::new();
    for tool in ["curl", "wget"] {
        for (at, _) in line.match_indices(tool) {
            if !word_at(line, at, tool) {
                continue;
            }
            let rest = &line[at..];
            let piped = rest.match_indices('|').any(|(p, _)| {
                let next = &rest[p + 1..];
                !next.starts_with('|') && !rest[..p].ends_with('|') && starts_shell(next)
            });
            let before = &line[..at];
            let substituted = (before.ends_with("<(") || before.ends_with("$("))
                && before
                    .split(['|', ';', '&'])
                    .next_back()
                    .is_some_and(|cmd| {
                        cmd.split_whitespace().any(|w| {
                            let w = w.trim_start_matches(['"', '\'', '(', '<', '$']);
                            SHELLS.contains(&w.rsplit('/').next().unwrap_or(w))
                        })
                    });
            if piped || substituted {
                out.push((Kind::PipeToShell, at));
            }
        }
    }
    for (at, _) in line.match_indices("rm") {
        if !word_at(line, at, "rm") {
            continue;
        }
        let (mut recursive, mut force) = (false, false);
        for word in line[at + 2..].split_whitespace() {
            match word.trim_matches(['"', '\'', '`']) {
                "--recursive" => recursive = true,
                "--force" => force = true,
                flag if flag.starts_with('-') && !flag.starts_with("--") => {
                    recursive |= flag.contains(['r', 'R']);
                    force |= flag.contains('f');
                }
                _ => break,
            }
        }
        if recursive && force {
            out.push((Kind::RecursiveDelete, at));
        }
    }
    out.sort_by_key(|(_, at)| *at);
    out
}

/// Where `target`, relative to the skill folder `skill_dir`, lies in the package folder
/// `root`: `None` when `..` leads above it.
fn resolve(root: &Path, skill_dir: &Path, target: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = skill_dir.strip_prefix(root).ok()?.components().collect();
    for part in Path::new(target).components() {
        match part {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(_) => parts.push(part),
            _ => {}
        }
    }
    Some(root.join(parts.iter().collect::<PathBuf>()))
}

/// The warnings for the instructions `body` of the skill `file` (folder `skill_dir`, body
/// starting on line `body_line`), links checked in `package`.
pub fn check(
    package: &PackageDir,
    file: &Path,
    skill_dir: &Path,
    body: &str,
    body_line: u64,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for found in scan(body).into_iter().take(MAX_FINDINGS) {
        let line = body_line + found.line - 1;
        let target = &found.target;
        // A path in inline code is checked only where its folder exists in the skill: in a
        // skill without `references/`, `references/schema.md` is an example of the format or
        // a file of the user's project, not a link.
        let folder = target.split('/').next().unwrap_or_default();
        if found.kind == Kind::CodePath && package.holds(&skill_dir.join(folder)) != Some(true) {
            continue;
        }
        let diagnostic = match found.kind {
            Kind::Link | Kind::CodePath => {
                let outside = || {
                    Diagnostic::warning(
                        "skill-link-outside-package",
                        file,
                        format!("the link `{target}` leads out of the package, so it can never be read"),
                    )
                    .with_help("copy the file into the skill's folder and link to the copy")
                };
                match resolve(package.path(), skill_dir, target) {
                    None => outside(),
                    Some(path) => match package.holds(&path) {
                        Some(true) => continue,
                        Some(false) => outside(),
                        None => Diagnostic::warning(
                            "skill-link-missing",
                            file,
                            format!("the link `{target}` names a file that is not in the package"),
                        )
                        .with_help("add the file to the skill's folder, or fix the link"),
                    },
                }
            }
            Kind::PipeToShell => Diagnostic::warning(
                "skill-pipe-to-shell",
                file,
                format!("the instructions pipe a download into a shell (`{target} … | sh`): whatever the server sends runs unreviewed"),
            )
            .with_help("download a pinned version, check its checksum, then run the file; or ship the script in `scripts/`"),
            Kind::RecursiveDelete => Diagnostic::warning(
                "skill-recursive-delete",
                file,
                "the instructions run `rm -rf`: a wrong or empty path deletes everything under it, unasked",
            )
            .with_help("name exactly what to delete, and have the agent confirm with the user first"),
        };
        out.push(diagnostic.at(line, found.column));
    }
    out
}

#[cfg(test)]
mod tests;
