//! A package's or tool's sandbox permissions in words, for the consent and approval cards, and
//! which of them are open-ended (for `approval: on-risk` and the card's flags).
//!
//! Open-ended: any host (`*`), a local address (`localhost`, loopback, private, link-local or
//! unspecified literals: the machine's own services and its network), reading the whole file
//! system (`/`), a home folder (`/root`, `/home/<name>`, `/Users/<name>`, or their parent) or
//! a path with a `*`, any write outside the data folder, and `shell`. Environment names are
//! listed, not flagged: the operator chose what the runtime's environment holds.

use std::net::IpAddr;

use quiver_package::common::Permissions;
use serde::Serialize;

/// One permission in words, e.g. "read `/etc/hosts`", with why it is open-ended, if it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionLine {
    /// What it allows, in words.
    pub text: String,
    /// Why it is open-ended (`None`: a concrete allowlist entry).
    pub open_ended: Option<String>,
}

impl std::fmt::Display for PermissionLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.open_ended {
            Some(why) => write!(f, "{} [open-ended: {why}]", self.text),
            None => f.write_str(&self.text),
        }
    }
}

/// What `permission` allows beyond the package and data folders, one line per entry (hosts,
/// paths read, paths written, shell, environment names); empty when it allows nothing more.
pub fn describe_permissions(permission: &Permissions) -> Vec<PermissionLine> {
    let line = |text: String, open_ended: Option<String>| PermissionLine { text, open_ended };
    let mut lines = Vec::new();
    for host in &permission.network {
        lines.push(line(
            format!("reach `{host}` over HTTP and HTTPS"),
            open_host(host).map(str::to_owned),
        ));
    }
    for path in &permission.filesystem.read {
        lines.push(line(format!("read `{path}`"), open_path(path)));
    }
    for path in &permission.filesystem.write {
        let why = open_path(path).unwrap_or_else(|| "writes outside its data folder".to_owned());
        lines.push(line(format!("read and write `{path}`"), Some(why)));
    }
    if permission.shell {
        lines.push(line(
            "start other programs (shell)".to_owned(),
            Some("any program on the system".to_owned()),
        ));
    }
    if !permission.env.is_empty() {
        let names: Vec<String> = permission.env.iter().map(|n| format!("`{n}`")).collect();
        lines.push(line(
            format!(
                "read the runtime's environment variable{} {}",
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
            None,
        ));
    }
    lines
}

/// The open-ended parts of `permission`, each in a few words (empty when every permission is a
/// concrete allowlist): what `approval: on-risk` asks about.
pub fn open_ended_permissions(permission: &Permissions) -> Vec<String> {
    let mut parts = Vec::new();
    let hosts: Vec<&String> = permission
        .network
        .iter()
        .filter(|h| open_host(h).is_some())
        .collect();
    if hosts.iter().any(|h| h.as_str() == "*") {
        parts.push("any host".to_owned());
    }
    let local: Vec<String> = hosts
        .iter()
        .filter(|h| h.as_str() != "*")
        .map(|h| format!("`{h}`"))
        .collect();
    if !local.is_empty() {
        parts.push(format!("local addresses {}", local.join(", ")));
    }
    let reads: Vec<String> = permission
        .filesystem
        .read
        .iter()
        .filter(|p| open_path(p).is_some())
        .map(|p| format!("`{p}`"))
        .collect();
    if !reads.is_empty() {
        parts.push(format!("reads of [{}]", reads.join(", ")));
    }
    if permission.shell {
        parts.push("shell".to_owned());
    }
    if !permission.filesystem.write.is_empty() {
        parts.push(format!(
            "writes to {}",
            crate::rules::quoted(&permission.filesystem.write)
        ));
    }
    parts
}

/// Why a declared host is open-ended, if it is.
fn open_host(host: &str) -> Option<&'static str> {
    if host == "*" {
        return Some("any public host");
    }
    let name = host.trim_start_matches('[').trim_end_matches(']');
    if name.eq_ignore_ascii_case("localhost") || name.to_ascii_lowercase().ends_with(".localhost") {
        return Some("this machine's own services");
    }
    match name.parse::<IpAddr>().ok()? {
        IpAddr::V4(ip) if ip.is_loopback() || ip.is_unspecified() => {
            Some("this machine's own services")
        }
        IpAddr::V4(ip) if ip.is_private() || ip.is_link_local() => {
            Some("an address of the local network")
        }
        IpAddr::V6(ip) if ip.is_loopback() || ip.is_unspecified() => {
            Some("this machine's own services")
        }
        IpAddr::V6(ip) if ip.is_unique_local() || ip.is_unicast_link_local() => {
            Some("an address of the local network")
        }
        _ => None,
    }
}

/// Why a declared path is open-ended to read, if it is.
fn open_path(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Some("the whole file system".to_owned());
    }
    if path.contains('*') {
        return Some("a pattern, not a path".to_owned());
    }
    if trimmed == "~" {
        return Some("the home folder".to_owned());
    }
    let parts: Vec<&str> = trimmed.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        ["root"] => Some("the home folder".to_owned()),
        ["home" | "Users"] => Some("every home folder".to_owned()),
        ["home" | "Users", _] => Some("a home folder".to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_package::common::FilesystemPermissions;

    type List = &'static [&'static str];
    /// Hosts, reads, writes, shell, environment names, and the card's lines.
    type Described = (List, List, List, bool, List, &'static str);
    /// Hosts, reads, writes, shell, and what `on-risk` names.
    type OpenEnded = (List, List, List, bool, &'static str);

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn permissions(network: &[&str], read: &[&str], write: &[&str], shell: bool) -> Permissions {
        Permissions {
            network: strings(network),
            filesystem: FilesystemPermissions {
                read: strings(read),
                write: strings(write),
            },
            shell,
            env: Vec::new(),
        }
    }

    #[test]
    fn each_permission_in_words_with_open_ended_ones_flagged() {
        let cases: &[Described] = &[
            (&[], &[], &[], false, &[], ""),
            (
                &["api.weather.cn", "*.example.com"],
                &[],
                &[],
                false,
                &[],
                "reach `api.weather.cn` over HTTP and HTTPS\nreach `*.example.com` over HTTP and HTTPS",
            ),
            (
                &["*"],
                &[],
                &[],
                false,
                &[],
                "reach `*` over HTTP and HTTPS [open-ended: any public host]",
            ),
            (
                &[
                    "localhost",
                    "127.0.0.1",
                    "[::1]",
                    "169.254.169.254",
                    "10.0.0.8",
                ],
                &[],
                &[],
                false,
                &[],
                "reach `localhost` over HTTP and HTTPS [open-ended: this machine's own services]\n\
                 reach `127.0.0.1` over HTTP and HTTPS [open-ended: this machine's own services]\n\
                 reach `[::1]` over HTTP and HTTPS [open-ended: this machine's own services]\n\
                 reach `169.254.169.254` over HTTP and HTTPS [open-ended: an address of the local network]\n\
                 reach `10.0.0.8` over HTTP and HTTPS [open-ended: an address of the local network]",
            ),
            (
                &[],
                &[
                    "/",
                    "/usr/share/zoneinfo",
                    "/root",
                    "/home/alice",
                    "/home",
                    "/srv/*.csv",
                ],
                &[],
                false,
                &[],
                "read `/` [open-ended: the whole file system]\n\
                 read `/usr/share/zoneinfo`\n\
                 read `/root` [open-ended: the home folder]\n\
                 read `/home/alice` [open-ended: a home folder]\n\
                 read `/home` [open-ended: every home folder]\n\
                 read `/srv/*.csv` [open-ended: a pattern, not a path]",
            ),
            (
                &[],
                &["/home/alice/notes"],
                &["/tmp/out", "/"],
                true,
                &["SECRET", "TOKEN"],
                "read `/home/alice/notes`\n\
                 read and write `/tmp/out` [open-ended: writes outside its data folder]\n\
                 read and write `/` [open-ended: the whole file system]\n\
                 start other programs (shell) [open-ended: any program on the system]\n\
                 read the runtime's environment variables `SECRET`, `TOKEN`",
            ),
            (
                &[],
                &[],
                &[],
                false,
                &["SECRET"],
                "read the runtime's environment variable `SECRET`",
            ),
        ];
        for (network, read, write, shell, env, want) in cases {
            let mut p = permissions(network, read, write, *shell);
            p.env = strings(env);
            let got: Vec<String> = describe_permissions(&p)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got.join("\n"), *want);
        }
    }

    #[test]
    fn open_ended_parts_for_on_risk() {
        let cases: &[OpenEnded] = &[
            (&[], &[], &[], false, ""),
            (&["api.weather.cn"], &["/etc/hosts"], &[], false, ""),
            (&["*", "api.x.com"], &[], &[], false, "any host"),
            (
                &["localhost", "127.0.0.1"],
                &[],
                &[],
                false,
                "local addresses `localhost`, `127.0.0.1`",
            ),
            (
                &[],
                &["/", "/etc/hosts", "/home/bob"],
                &[],
                false,
                "reads of [`/`, `/home/bob`]",
            ),
            (
                &[],
                &[],
                &["/tmp/out"],
                true,
                "shell; writes to [`/tmp/out`]",
            ),
        ];
        for (network, read, write, shell, want) in cases {
            let p = permissions(network, read, write, *shell);
            assert_eq!(open_ended_permissions(&p).join("; "), *want, "{p:?}");
        }
    }
}
