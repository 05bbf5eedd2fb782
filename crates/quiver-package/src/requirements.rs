//! The rule for a package's `requirements.txt`: every requirement pinned to one exact version
//! from the package index, so what `quiver install` puts in the package's Python environment is
//! decided by the file alone (DESIGN.md §2: installed at install time, never at call time).
//!
//! Accepted, one requirement per line (a line ending in `\` continues on the next):
//!
//! - `name==1.2.3`, `name[extra,other]==1.2.3`, with an environment marker after `;`;
//! - `--hash=sha256:<64 hex>` after the requirement, any number of times; when one requirement
//!   has a hash every one must (pip's hash-checking mode);
//! - `#` comments (at the start of a line or after a space) and blank lines.
//!
//! Refused, each a diagnostic with its line: a range or a wildcard (`>=`, `~=`, `!=`, `<`,
//! `==1.*`, `===`) or no version at all (`requirements-unpinned`); a URL, a VCS reference, a
//! path, `-e`, an include (`-r`, `-c`) or an option that changes where pip looks
//! (`--index-url`, `--extra-index-url`, `--find-links`, ...) (`requirements-unsupported`); some
//! requirements hashed and others not (`requirements-hash-missing`).
//!
//! ```
//! let (found, problems) = quiver_package::requirements::parse("requests==2.32.3\nidna>=3\n");
//! assert_eq!(found[0].name, "requests");
//! assert_eq!((problems[0].line, problems[0].code), (2, "requirements-unpinned"));
//! ```

use std::path::Path;

use crate::Diagnostic;

/// One accepted requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The distribution name as written.
    pub name: String,
    /// Its extras (`name[extra]`).
    pub extras: Vec<String>,
    /// The exact version.
    pub version: String,
    /// Its `sha256:` hashes.
    pub hashes: Vec<String>,
    /// The line it starts on (1-based).
    pub line: u64,
    /// The requirement as written, comment and continuations removed.
    pub text: String,
}

/// A line that is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line it starts on (1-based).
    pub line: u64,
    /// The diagnostic code.
    pub code: &'static str,
    /// Why, naming the offending text.
    pub message: String,
}

/// The requirements of `text` and the lines refused.
pub fn parse(text: &str) -> (Vec<Requirement>, Vec<Problem>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (line, logical) in logical_lines(text) {
        if logical.is_empty() {
            continue;
        }
        match requirement(&logical) {
            Ok(mut r) => {
                r.line = line;
                found.push(r);
            }
            Err((code, message)) => problems.push(Problem {
                line,
                code,
                message,
            }),
        }
    }
    let hashed = found.iter().filter(|r| !r.hashes.is_empty()).count();
    if hashed > 0 && hashed < found.len() {
        for r in found.iter().filter(|r| r.hashes.is_empty()) {
            problems.push(Problem {
                line: r.line,
                code: "requirements-hash-missing",
                message: format!(
                    "`{}` has no `--hash` while other requirements do; pip checks hashes for all or none",
                    r.text
                ),
            });
        }
        problems.sort_by_key(|p| p.line);
    }
    (found, problems)
}

/// The diagnostics of [`parse`] for the file `file`, each with its line and help.
pub fn diagnostics(problems: &[Problem], file: &Path) -> Vec<Diagnostic> {
    problems
        .iter()
        .map(|p| {
            let help = match p.code {
                "requirements-unpinned" => {
                    "pin one exact version (`name==1.2.3`), as `pip freeze` or `pip-compile` writes it"
                }
                "requirements-hash-missing" => {
                    "give every requirement its `--hash=sha256:...`, or none"
                }
                _ => {
                    "list packages from the index as `name==1.2.3`; `quiver install --wheels DIR` installs from a local wheel folder"
                }
            };
            Diagnostic::error(p.code, file, p.message.clone())
                .at(p.line, 1)
                .with_help(help)
        })
        .collect()
}

/// Logical lines: comments removed, `\` continuations joined, each with the line it starts on.
fn logical_lines(text: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut current: Option<(u64, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        let (body, continues) = match line.trim_end().strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        let entry = current.get_or_insert_with(|| (i as u64 + 1, String::new()));
        entry.1.push(' ');
        entry.1.push_str(body);
        if !continues && let Some((n, text)) = current.take() {
            out.push((n, text.trim().to_owned()));
        }
    }
    if let Some((n, text)) = current {
        out.push((n, text.trim().to_owned()));
    }
    out
}

/// `line` without a `#` comment (one at the start, or after whitespace, as pip reads it).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

type Refusal = (&'static str, String);

fn unsupported(message: String) -> Refusal {
    ("requirements-unsupported", message)
}

fn unpinned(message: String) -> Refusal {
    ("requirements-unpinned", message)
}

/// One logical line as a requirement.
fn requirement(line: &str) -> Result<Requirement, Refusal> {
    let first = line.split_whitespace().next().unwrap_or_default();
    if first.starts_with('-') {
        let what = match first.split('=').next().unwrap_or(first) {
            "-r" | "--requirement" | "-c" | "--constraint" => "an include of another file",
            "-e" | "--editable" => "an editable install",
            "-i" | "--index-url" | "--extra-index-url" | "-f" | "--find-links" | "--no-index" => {
                "an option that changes where pip looks for packages"
            }
            _ => "an option",
        };
        return Err(unsupported(format!(
            "`{line}` is {what}, which `requirements.txt` may not hold"
        )));
    }
    if line.contains("://") || line.starts_with("git+") || line.contains(" @ ") {
        return Err(unsupported(format!(
            "`{line}` names a URL or a version-control reference, not a version from the package index"
        )));
    }
    // The requirement, then its options (`--hash=...`); a marker may hold spaces.
    let (spec, options) = match line.find(" --").or_else(|| line.find("\t--")) {
        Some(at) => (line[..at].trim(), line[at..].trim()),
        None => (line.trim(), ""),
    };
    let mut hashes = Vec::new();
    for option in options.split_whitespace() {
        match option.strip_prefix("--hash=") {
            Some(hash) if is_sha256(hash) => hashes.push(hash.to_owned()),
            Some(hash) => {
                return Err(unsupported(format!(
                    "`--hash={hash}` is not `sha256:` and 64 hexadecimal digits"
                )));
            }
            None => {
                return Err(unsupported(format!(
                    "`{option}` is an option, which `requirements.txt` may not hold (only `--hash=sha256:...` may follow a requirement)"
                )));
            }
        }
    }
    let (spec, _marker) = match spec.split_once(';') {
        Some((spec, marker)) => (spec.trim(), Some(marker.trim())),
        None => (spec, None),
    };
    let name_len = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(spec.len());
    let name = &spec[..name_len];
    let valid_name = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid_name {
        return Err(unsupported(format!(
            "`{line}` is not a requirement from the package index (a path or a file name?)"
        )));
    }
    let mut rest = spec[name_len..].trim_start();
    let mut extras = Vec::new();
    if let Some(after) = rest.strip_prefix('[') {
        let Some((inside, tail)) = after.split_once(']') else {
            return Err(unsupported(format!(
                "`{line}`: the extras' `[` is not closed"
            )));
        };
        extras = inside
            .split(',')
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        rest = tail.trim_start();
    }
    let pinned = |why: &str| {
        unpinned(format!(
            "`{spec}` {why}; only one exact version is installed"
        ))
    };
    let Some(version) = rest.strip_prefix("==") else {
        return Err(if rest.is_empty() {
            pinned("names no version")
        } else {
            pinned("allows a range of versions")
        });
    };
    let version = version.trim();
    let exact = !version.is_empty()
        && !version.starts_with('=')
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '_' | '-'));
    if !exact {
        return Err(pinned("is not one exact version"));
    }
    Ok(Requirement {
        name: name.to_owned(),
        extras,
        version: version.to_owned(),
        hashes,
        line: 0,
        text: line.to_owned(),
    })
}

fn is_sha256(hash: &str) -> bool {
    hash.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file, what is accepted from it as (name, version), what is refused as (line, code).
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [(u64, &'static str)],
    );

    const HASH: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn only_exact_pins_from_the_index_pass() {
        let cases: &[Case] = &[
            ("requests==2.32.3\n", &[("requests", "2.32.3")], &[]),
            (
                "# comment\n\n  \nidna==3.7  # why\n",
                &[("idna", "3.7")],
                &[],
            ),
            (
                "Foo.Bar_baz-2==1.0.post1\n",
                &[("Foo.Bar_baz-2", "1.0.post1")],
                &[],
            ),
            (
                "requests[socks,security]==2.32.3\n",
                &[("requests", "2.32.3")],
                &[],
            ),
            ("pkg == 1.0\n", &[("pkg", "1.0")], &[]),
            (
                "tomli==2.0.1 ; python_version < \"3.11\"\n",
                &[("tomli", "2.0.1")],
                &[],
            ),
            ("torch==2.3.0+cpu\n", &[("torch", "2.3.0+cpu")], &[]),
            ("x==1!2.0\n", &[("x", "1!2.0")], &[]),
            ("a>=1\n", &[], &[(1, "requirements-unpinned")]),
            ("a~=1.2\n", &[], &[(1, "requirements-unpinned")]),
            ("a!=1.2\n", &[], &[(1, "requirements-unpinned")]),
            ("a<2\n", &[], &[(1, "requirements-unpinned")]),
            ("a==1.*\n", &[], &[(1, "requirements-unpinned")]),
            ("a===1.0\n", &[], &[(1, "requirements-unpinned")]),
            ("a==1.0,<2\n", &[], &[(1, "requirements-unpinned")]),
            ("a\n", &[], &[(1, "requirements-unpinned")]),
            ("a[x]\n", &[], &[(1, "requirements-unpinned")]),
            (
                "ok==1\nbad\n",
                &[("ok", "1")],
                &[(2, "requirements-unpinned")],
            ),
            (
                "https://example.com/a.whl\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "a @ https://example.com/a.whl\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "git+https://github.com/a/b@v1#egg=b\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            ("-e .\n", &[], &[(1, "requirements-unsupported")]),
            ("-r other.txt\n", &[], &[(1, "requirements-unsupported")]),
            (
                "-c constraints.txt\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "--index-url https://evil.example/simple\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "--extra-index-url=https://evil.example\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "--find-links /tmp/w\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "-i https://evil.example/simple\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            ("./local/pkg\n", &[], &[(1, "requirements-unsupported")]),
            (
                "pkg-1.0-py3-none-any.whl\n",
                &[],
                &[(1, "requirements-unpinned")],
            ),
            (
                "a==1 --trusted-host x\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
            (
                "a==1 --hash=md5:abc\n",
                &[],
                &[(1, "requirements-unsupported")],
            ),
        ];
        for (text, accepted, refused) in cases {
            let (found, problems) = parse(text);
            let got: Vec<(&str, &str)> = found
                .iter()
                .map(|r| (r.name.as_str(), r.version.as_str()))
                .collect();
            assert_eq!(&got, accepted, "{text:?}");
            let got: Vec<(u64, &str)> = problems.iter().map(|p| (p.line, p.code)).collect();
            assert_eq!(&got, refused, "{text:?}");
        }
    }

    #[test]
    fn hashes_continue_lines_and_must_cover_every_requirement() {
        let text = format!(
            "# pinned\na==1.0 \\\n    --hash={HASH} \\\n    --hash={HASH}\nb==2.0 --hash={HASH}\n"
        );
        let (found, problems) = parse(&text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!((found[0].line, found[0].hashes.len()), (2, 2));
        assert_eq!((found[1].line, found[1].hashes.len()), (5, 1));

        let text = format!("a==1.0 --hash={HASH}\nb==2.0\n");
        let (found, problems) = parse(&text);
        assert_eq!(found.len(), 2);
        assert_eq!(
            problems
                .iter()
                .map(|p| (p.line, p.code))
                .collect::<Vec<_>>(),
            [(2, "requirements-hash-missing")]
        );
    }

    #[test]
    fn diagnostics_name_the_file_and_line() {
        let (_, problems) = parse("ok==1\nrequests>=2\n");
        let d = diagnostics(&problems, Path::new("pkg/requirements.txt"));
        assert_eq!(d.len(), 1);
        assert!(d[0].is_error());
        assert_eq!(d[0].code, "requirements-unpinned");
        assert_eq!(d[0].file, Path::new("pkg/requirements.txt"));
        assert_eq!(d[0].line, Some(2));
        assert!(d[0].message.contains("requests>=2"), "{}", d[0].message);
    }
}
