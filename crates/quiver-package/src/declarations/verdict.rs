//! Each use found against the declaration that governs its file: covered, ignored, or a
//! diagnostic.

use std::collections::BTreeSet;
use std::path::Path;

use super::Governing;
use super::scan::{Found, Use};
use crate::common::{host_within, path_within};
use crate::diagnostic::{Diagnostic, Severity};

/// Hosts that reach nothing outside the sandbox or are reserved for examples (RFC 2606,
/// RFC 6761): a URL naming one is not a use of the network.
fn is_ignored_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let reserved_suffix = [".example", ".test", ".invalid", ".localhost", ".local"]
        .iter()
        .any(|s| host.ends_with(s));
    let example = ["example.com", "example.org", "example.net"]
        .iter()
        .any(|e| host == *e || host.ends_with(&format!(".{e}")));
    matches!(host, "localhost" | "0.0.0.0" | "::1")
        || host.starts_with("127.")
        || reserved_suffix
        || example
        // `http://host/`, `https://server:8080`: a placeholder, not a host anyone resolves.
        || !host.contains(['.', ':'])
}

/// Paths every tool may use whatever it declares: the sandbox's own devices, its view of
/// itself, and the system files programs need to start and resolve names.
const ALWAYS_GRANTED: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/dev/tty",
    "/dev/shm",
    "/proc/self",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
];

/// Environment names every tool has (the sandbox sets them) or a shell sets itself.
fn is_provided_env(name: &str) -> bool {
    const PROVIDED: &[&str] = &[
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "PWD",
        "OLDPWD",
        "IFS",
        "RANDOM",
        "LINENO",
        "SECONDS",
        "PPID",
        "UID",
        "EUID",
        "OPTARG",
        "OPTIND",
        "HOSTNAME",
        "SHELL",
        "USER",
        "TERM",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "BASH_SOURCE",
        "BASH_VERSION",
        "FUNCNAME",
        "PIPESTATUS",
        "REPLY",
        "HOSTTYPE",
        "OSTYPE",
    ];
    PROVIDED.contains(&name) || name.starts_with("QUIVER_") || name.starts_with("LC_")
}

/// Appends a diagnostic for each distinct use in `found` that `governing` does not declare.
/// `severity` is that of a contradiction; `code` replaces the per-dimension codes (for
/// instructions, which all share one).
pub(super) fn judge(
    found: &[Found],
    governing: &Governing<'_>,
    home: Option<&Path>,
    severity: Severity,
    code: Option<&'static str>,
    file: &Path,
    out: &mut Vec<Diagnostic>,
) {
    let declared = governing.permissions;
    let mut seen = BTreeSet::new();
    for found in found {
        let verdict = match &found.what {
            Use::Host(host) => (!is_ignored_host(host)
                && !declared.network.iter().any(|d| host_within(host, d)))
            .then(|| {
                (
                    "declaration-network",
                    format!("uses host `{host}`, which {} does not list under `network`", governing.name),
                    severity,
                )
            }),
            Use::NetworkLibrary(library) => declared.network.is_empty().then(|| {
                (
                    "declaration-network",
                    format!("uses the network (`{library}`), but {} declares no `network`", governing.name),
                    severity,
                )
            }),
            Use::Spawn(program) => (!declared.shell).then(|| {
                (
                    "declaration-shell",
                    format!("starts a program (`{program}`), but {} does not declare `shell: true`", governing.name),
                    severity,
                )
            }),
            Use::Path(path) => path_verdict(path, declared, home).map(|home_relative| {
                let message = format!(
                    "uses the path `{path}`, which {} does not list under `filesystem`",
                    governing.name
                );
                // In the sandbox `~` is the package's data folder: a home path reaches the real
                // home only when declared, so an undeclared one is worth a word, not a refusal.
                ("declaration-filesystem", message, if home_relative { Severity::Warning } else { severity })
            }),
            Use::Env(name) => (!is_provided_env(name) && !declared.env.contains(name)).then(|| {
                (
                    "declaration-env",
                    format!("reads the environment variable `{name}`, which {} does not list under `env`", governing.name),
                    severity,
                )
            }),
            Use::DynamicCode(what) => Some((
                "declaration-dynamic-code",
                format!("builds code at run time (`{what}`), so what it uses cannot be checked"),
                Severity::Warning,
            )),
        };
        let Some((dimension, message, severity)) = verdict else {
            continue;
        };
        if !seen.insert(message.clone()) {
            continue;
        }
        let help = if dimension == "declaration-dynamic-code" {
            "the sandbox still grants only what is declared".to_owned()
        } else {
            format!("declare it in {}, or remove the use", governing.declare_in)
        };
        out.push(
            Diagnostic::new(severity, code.unwrap_or(dimension), file, message)
                .at(found.line, found.column)
                .with_help(help),
        );
    }
}

/// `None` when `path` is covered (declared, always granted, or only a folder name); otherwise
/// whether it is under the home folder (`~`).
fn path_verdict(
    path: &str,
    declared: &crate::common::Permissions,
    home: Option<&Path>,
) -> Option<bool> {
    let home_relative = path == "~" || path.starts_with("~/");
    let expanded = match (home_relative, home) {
        (true, Some(home)) => format!("{}{}", home.display(), &path[1..]),
        _ => path.to_owned(),
    };
    let expanded = expanded.trim_end_matches('/');
    if expanded.is_empty() || ALWAYS_GRANTED.iter().any(|g| path_within(expanded, g)) {
        return None;
    }
    let fs = &declared.filesystem;
    let covered = fs.read.iter().chain(&fs.write).any(|d| {
        let d = d.trim_end_matches('/');
        path_within(expanded, d) || (home_relative && path_within(path, d))
    });
    (!covered).then_some(home_relative)
}
