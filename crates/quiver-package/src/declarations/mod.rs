//! The declaration check: what a package's code and skill text visibly use, against what the
//! package declares (DESIGN.md §2 permissions), run at pack, verify and install.
//!
//! It is disclosure, not enforcement: the sandbox grants only what is declared whatever the
//! code says. The check tells the person installing a package, before anything runs, where the
//! code and the declarations disagree:
//!
//! - **code** (`.py`, `.js`/`.ts`, `.sh`, `.rb`, `.pl`, or a `#!` line naming one): hosts in
//!   URLs and network libraries against `network`, starting programs against `shell`, absolute
//!   paths against `filesystem`, environment names against `env`. A file in a tool's folder is
//!   held to that tool's `permission`, any other (a skill's `scripts/`) to the package's
//!   `permissions`. A contradiction is an error (`declaration-network`, `-shell`,
//!   `-filesystem`, `-env`) when the package has a `quiver.yaml` (it declared something); a
//!   plain skill folder declared nothing, so there it is a warning.
//! - **instructions**: shell, Python and JavaScript blocks in Markdown are what a model may be
//!   told to run with its own tools; the hosts and network commands they use beyond the
//!   package's `network` are a warning (`declaration-instructions`): what leaves the machine.
//! - **hidden text** in any text file (tag characters, bidirectional controls, zero-width
//!   runs: see [`hidden`]) is always an error (`declaration-hidden-text`): a file a model reads
//!   declares that its text is what a person sees.
//! - code built at run time (`eval`, `new Function`) is a warning
//!   (`declaration-dynamic-code`), and so is an executable in a binary format
//!   (`declaration-opaque-binary`): neither can be checked.
//!
//! [`check`] is pure (the package and its files' bytes in, diagnostics out); [`check_dir`]
//! reads the files from the package folder.

pub mod hidden;
pub mod scan;
mod verdict;

use std::path::{Path, PathBuf};

use crate::common::Permissions;
use crate::diagnostic::{Diagnostic, Severity};
use crate::package::Package;
use crate::source::PackageDir;

use scan::{Found, Lang, Use};

/// The largest file the check reads; a larger one is reported as not checked.
pub const MAX_CHECKED_BYTES: u64 = 2 * 1024 * 1024;

/// Most diagnostics reported for one file.
const MAX_PER_FILE: usize = 50;

/// One file of a package: its path relative to the package folder and its content.
#[derive(Debug, Clone, Copy)]
pub struct PackageFile<'a> {
    /// Relative path, `/`-separated.
    pub path: &'a Path,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// The declaration that governs a file, and how it is named in messages.
struct Governing<'a> {
    permissions: &'a Permissions,
    /// "tool `fetch`'s `permission`" or "the package's `permissions`".
    name: String,
    /// Where to declare it, for the help line.
    declare_in: String,
}

/// Checks `files` of `package` against its declarations. `home` is the home folder that `~`
/// in the declarations was expanded to at load.
pub fn check(package: &Package, files: &[PackageFile<'_>], home: Option<&Path>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for file in files {
        let before = out.len();
        check_file(package, file, home, &mut out);
        out.truncate(before + MAX_PER_FILE);
    }
    out
}

/// Reads the files of `package`'s folder (as [`crate::skill_files`] lists them: no hidden
/// entries, state files or build litter) and checks them.
pub fn check_dir(package: &Package, home: Option<&Path>) -> Vec<Diagnostic> {
    let dir = PackageDir::new(&package.root);
    let mut names = Vec::new();
    crate::skill_files::walk(&package.root, "", 0, &mut names);
    let mut out = Vec::new();
    let mut read = Vec::new();
    for name in names {
        let rel = PathBuf::from(name.trim_start_matches('/'));
        match dir.read_limited(&package.root.join(&rel), MAX_CHECKED_BYTES) {
            Ok(bytes) => read.push((rel, bytes)),
            Err(_) => out.push(not_checked(package.root.join(&rel))),
        }
    }
    let files: Vec<PackageFile<'_>> = read
        .iter()
        .map(|(path, bytes)| PackageFile { path, bytes })
        .collect();
    out.extend(check(package, &files, home));
    out
}

/// Checks the files of `package` held in memory (`path` relative to the package folder,
/// `/`-separated; `bytes` `None` for a file larger than [`MAX_CHECKED_BYTES`]), selecting them
/// as [`check_dir`] would list them on disk, so an archive checked before it is written out
/// gets the diagnostics its folder would.
pub fn check_held(
    package: &Package,
    held: &[(String, Option<Vec<u8>>)],
    home: Option<&Path>,
) -> Vec<Diagnostic> {
    let by_path: std::collections::HashMap<&str, &Option<Vec<u8>>> =
        held.iter().map(|(p, b)| (p.as_str(), b)).collect();
    let selected = crate::skill_files::select(held.iter().map(|(p, _)| p.as_str()));
    let mut out = Vec::new();
    let mut files = Vec::new();
    for name in selected {
        match by_path.get(name) {
            Some(Some(bytes)) => files.push((PathBuf::from(name), bytes.as_slice())),
            _ => out.push(not_checked(package.root.join(name))),
        }
    }
    let files: Vec<PackageFile<'_>> = files
        .iter()
        .map(|(path, bytes)| PackageFile { path, bytes })
        .collect();
    out.extend(check(package, &files, home));
    out
}

/// The warning for a file too large to check, or unreadable.
fn not_checked(path: PathBuf) -> Diagnostic {
    Diagnostic::warning(
        "declaration-not-checked",
        path,
        format!("not checked: larger than {MAX_CHECKED_BYTES} bytes or unreadable"),
    )
    .with_help("the sandbox still grants only what is declared")
}

fn check_file(
    package: &Package,
    file: &PackageFile<'_>,
    home: Option<&Path>,
    out: &mut Vec<Diagnostic>,
) {
    let full = package.root.join(file.path);
    let name = file.path.to_string_lossy();
    if let Some(format) = binary_format(file.bytes) {
        out.push(
            Diagnostic::warning(
                "declaration-opaque-binary",
                &full,
                format!(
                    "an executable in {format} format, which the declaration check cannot read"
                ),
            )
            .with_help("ship its source instead; the sandbox still grants only what is declared"),
        );
        return;
    }
    let Ok(text) = std::str::from_utf8(file.bytes) else {
        return; // images, archives and other data: nothing a model reads as text
    };
    for run in hidden::hidden_text(text) {
        out.push(
            Diagnostic::error(
                "declaration-hidden-text",
                &full,
                format!(
                    "{} ({} hidden character{}) in text a model may read",
                    run.kind.describe(),
                    run.chars,
                    if run.chars == 1 { "" } else { "s" }
                ),
            )
            .at(run.line, run.column)
            .with_help(
                "remove it: a person reviewing the file cannot see what the model would read",
            ),
        );
    }
    let first_line = text.lines().next().unwrap_or("");
    let governing = governing(package, &full);
    if let Some(lang) = Lang::of(&name, first_line) {
        let severity = if package.has_manifest {
            Severity::Error
        } else {
            Severity::Warning
        };
        let found = scan::scan_code(lang, text);
        verdict::judge(&found, &governing, home, severity, None, &full, out);
    } else if name.ends_with(".md") {
        for (lang, first, block) in fenced_blocks(text) {
            // Instructions run with the model's own tools: what they send out is what matters.
            let found: Vec<Found> = scan::scan_code(lang, &block)
                .into_iter()
                .filter(|f| matches!(f.what, Use::Host(_) | Use::NetworkLibrary(_)))
                .map(|f| Found {
                    line: f.line + first,
                    ..f
                })
                .collect();
            let package_wide = package_governing(package);
            verdict::judge(
                &found,
                &package_wide,
                home,
                Severity::Warning,
                Some("declaration-instructions"),
                &full,
                out,
            );
        }
    }
}

/// The declaration a file at `full` is held to: its tool's `permission` when it lies in a
/// tool's folder, else the package's `permissions`.
fn governing<'a>(package: &'a Package, full: &Path) -> Governing<'a> {
    let tool = package.tools.iter().find(|tool| {
        tool.file
            .parent()
            .is_some_and(|dir| dir != package.root && full.starts_with(dir))
    });
    match tool {
        Some(tool) => Governing {
            permissions: &tool.permission,
            name: format!("tool `{}`'s `permission`", tool.name),
            declare_in: format!("`permission:` in {}", tool.file.display()),
        },
        None => package_governing(package),
    }
}

fn package_governing(package: &Package) -> Governing<'_> {
    Governing {
        permissions: &package.manifest.permissions,
        name: "the package's `permissions`".to_owned(),
        declare_in: if package.has_manifest {
            "`permissions:` in quiver.yaml".to_owned()
        } else {
            "a quiver.yaml with `permissions:`".to_owned()
        },
    }
}

/// The binary executable format `bytes` start with, if any.
fn binary_format(bytes: &[u8]) -> Option<&'static str> {
    const FORMATS: [(&[u8], &str); 7] = [
        (b"\x7fELF", "ELF"),
        (b"\xfe\xed\xfa\xce", "Mach-O"),
        (b"\xfe\xed\xfa\xcf", "Mach-O"),
        (b"\xce\xfa\xed\xfe", "Mach-O"),
        (b"\xcf\xfa\xed\xfe", "Mach-O"),
        (b"\0asm", "WebAssembly"),
        (b"MZ", "Windows PE"),
    ];
    FORMATS
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|(_, name)| *name)
}

/// The fenced code blocks of Markdown `text` in a language the scan knows: (language, lines
/// before the block's first line, the block's text).
fn fenced_blocks(text: &str) -> Vec<(Lang, u64, String)> {
    let mut out = Vec::new();
    let mut open: Option<(Option<Lang>, String, u64, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (&mut open, fence) {
            (None, Some(fence)) => {
                let info = trimmed.trim_start_matches(fence.chars().next().unwrap_or('`'));
                let tag = info
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                let lang = match tag.as_str() {
                    "sh" | "bash" | "shell" | "zsh" | "console" => Some(Lang::Shell),
                    "py" | "python" | "python3" => Some(Lang::Python),
                    "js" | "javascript" | "ts" | "typescript" | "node" => Some(Lang::JavaScript),
                    "rb" | "ruby" => Some(Lang::Ruby),
                    "pl" | "perl" => Some(Lang::Perl),
                    _ => None,
                };
                open = Some((lang, fence.to_owned(), index as u64 + 1, String::new()));
            }
            (Some((lang, fence, first, body)), _) => {
                if trimmed.starts_with(fence.as_str()) {
                    if let Some(lang) = lang {
                        out.push((*lang, *first, std::mem::take(body)));
                    }
                    open = None;
                } else {
                    body.push_str(line.trim_start_matches("$ "));
                    body.push('\n');
                }
            }
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
