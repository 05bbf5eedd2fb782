//! Small types shared by several files of the format.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// What a package (its ceiling) or a tool (within the ceiling) may do. The default is nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Permissions {
    /// Hosts the tool may reach (`api.example.com`, `*.example.com`, or `*` for any).
    pub network: Vec<String>,
    /// Paths the tool may read and write beyond its package and data folders.
    pub filesystem: FilesystemPermissions,
    /// Whether the tool may start other programs.
    pub shell: bool,
    /// Environment variables passed through to the tool.
    pub env: Vec<String>,
}

/// Extra filesystem access: `{read: [...], write: [...]}`, or (seed 001's shape) a plain list,
/// read as the paths readable (the loader adds a `permission-filesystem-list` warning).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FilesystemPermissions {
    /// Paths readable by the tool.
    pub read: Vec<String>,
    /// Paths writable by the tool.
    pub write: Vec<String>,
}

impl<'de> Deserialize<'de> for FilesystemPermissions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, default)]
        #[derive(Default)]
        struct Parts {
            read: Vec<String>,
            write: Vec<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<String>),
            Parts(Parts),
        }
        Ok(
            match Raw::deserialize(deserializer).map_err(|_| {
                serde::de::Error::custom(
                    "`filesystem` must be `{read: [...], write: [...]}` or a list of paths to read",
                )
            })? {
                Raw::List(read) => FilesystemPermissions {
                    read,
                    write: Vec::new(),
                },
                Raw::Parts(p) => FilesystemPermissions {
                    read: p.read,
                    write: p.write,
                },
            },
        )
    }
}

/// Whether the `filesystem` of the mapping `key` (`permission` of a tool, `permissions` of a
/// manifest) is written as a list, seed 001's shape. Parses `text` again only when it
/// mentions `filesystem` at all.
fn filesystem_is_list(text: &str, file: &std::path::Path, key: &str) -> bool {
    text.contains("filesystem")
        && crate::yaml::parse::<serde_json::Value>(text, file, 1)
            .is_ok_and(|v| v[key]["filesystem"].is_array())
}

/// The checks of a `permission` (tool) or `permissions` (manifest) mapping once parsed: a note
/// for a `filesystem` written as a list, then `~/` expanded in every path, with an error for
/// a path that cannot be.
pub(crate) fn check_permission_paths(
    permissions: &mut Permissions,
    text: &str,
    file: &std::path::Path,
    key: &str,
    line: Option<u64>,
) -> Vec<crate::Diagnostic> {
    let mut diags = Vec::new();
    if filesystem_is_list(text, file, key) {
        diags.push(filesystem_list_warning(file, line));
    }
    for path in permissions.expand_home() {
        diags.push(
            crate::Diagnostic::error(
                "permission-path-invalid",
                file,
                format!("`{path}` cannot be expanded: only `~/` (the home folder) is"),
            )
            .at_line(line)
            .with_help("write the full path, or `~/...` for a path in the home folder"),
        );
    }
    diags
}

/// The warning for a `filesystem` written as a list.
fn filesystem_list_warning(file: &std::path::Path, line: Option<u64>) -> crate::Diagnostic {
    crate::Diagnostic::warning(
        "permission-filesystem-list",
        file,
        "`filesystem` is a list; it is read as the paths the tool may read",
    )
    .at_line(line)
    .with_help("write `filesystem: {read: [...]}` (and `write: [...]` for paths it may change)")
}

impl Permissions {
    /// Expands a leading `~/` (or a lone `~`) of every filesystem path to the home folder, as
    /// a shell would, so the sandbox grants the folder meant. Returns the paths that cannot be
    /// expanded (`~user/...`, or `~` without `HOME`), left as written.
    pub fn expand_home(&mut self) -> Vec<String> {
        let home = crate::env::home();
        let mut bad = Vec::new();
        for path in self
            .filesystem
            .read
            .iter_mut()
            .chain(self.filesystem.write.iter_mut())
        {
            if !path.starts_with('~') {
                continue;
            }
            let rest = match path.strip_prefix("~/") {
                Some(rest) => rest,
                None if path == "~" => "",
                None => {
                    bad.push(path.clone());
                    continue;
                }
            };
            match &home {
                Some(home) => {
                    *path = std::path::Path::new(home)
                        .join(rest)
                        .to_string_lossy()
                        .trim_end_matches('/')
                        .to_owned();
                }
                None => bad.push(path.clone()),
            }
        }
        bad
    }

    /// Whether any permission is open-ended (any host, a shell, or writes outside the data
    /// folder), which makes `on-risk` approval ask even for reading tools.
    pub fn is_open_ended(&self) -> bool {
        self.network.iter().any(|h| h == "*") || self.shell || !self.filesystem.write.is_empty()
    }

    /// The entries of `self` that `ceiling` does not allow, as readable strings.
    pub fn excess_over(&self, ceiling: &Permissions) -> Vec<String> {
        let mut excess = Vec::new();
        for host in &self.network {
            if !ceiling.network.iter().any(|c| host_within(host, c)) {
                excess.push(format!("network `{host}`"));
            }
        }
        for path in &self.filesystem.read {
            let allowed = ceiling
                .filesystem
                .read
                .iter()
                .chain(&ceiling.filesystem.write);
            if !allowed.clone().any(|c| path_within(path, c)) {
                excess.push(format!("filesystem read `{path}`"));
            }
        }
        for path in &self.filesystem.write {
            if !ceiling
                .filesystem
                .write
                .iter()
                .any(|c| path_within(path, c))
            {
                excess.push(format!("filesystem write `{path}`"));
            }
        }
        if self.shell && !ceiling.shell {
            excess.push("shell".to_owned());
        }
        for var in &self.env {
            if !ceiling.env.contains(var) {
                excess.push(format!("env `{var}`"));
            }
        }
        excess
    }
}

/// Whether host pattern `host` is covered by ceiling pattern `ceiling`.
pub fn host_within(host: &str, ceiling: &str) -> bool {
    if ceiling == "*" || ceiling.eq_ignore_ascii_case(host) {
        return true;
    }
    match ceiling.strip_prefix("*.") {
        Some(suffix) => {
            let host = host.strip_prefix("*.").unwrap_or(host);
            host.len() > suffix.len()
                && host
                    .to_ascii_lowercase()
                    .ends_with(&format!(".{}", suffix.to_ascii_lowercase()))
        }
        None => false,
    }
}

/// Whether `path` is `ceiling` or lies under it, compared as written.
pub(crate) fn path_within(path: &str, ceiling: &str) -> bool {
    let ceiling = ceiling.trim_end_matches('/');
    path == ceiling || path.starts_with(&format!("{ceiling}/"))
}

/// A list given either as a YAML list or as one string of space-separated words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct WordList(pub Vec<String>);

impl<'de> Deserialize<'de> for WordList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        Ok(match Raw::deserialize(deserializer)? {
            Raw::One(s) => WordList(s.split_whitespace().map(str::to_owned).collect()),
            Raw::Many(v) => WordList(v),
        })
    }
}

/// Parses a duration: a number of seconds, or a string such as `500ms`, `30s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "" | "s" | "sec" | "secs" | "seconds" => 1.0,
        "ms" => 0.001,
        "m" | "min" | "mins" | "minutes" => 60.0,
        "h" | "hours" => 3600.0,
        _ => return None,
    };
    let secs = number * factor;
    (0.0..1e9)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}

/// A duration read from YAML by [`parse_duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Seconds(#[serde(with = "duration_secs")] pub Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        let parsed = match Raw::deserialize(deserializer)? {
            Raw::Number(n) => parse_duration(&n.to_string()),
            Raw::Text(s) => parse_duration(&s),
        };
        parsed.map(Seconds).ok_or_else(|| {
            serde::de::Error::custom("expected a duration such as `30`, `30s`, `500ms` or `2m`")
        })
    }
}

mod duration_secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("30", Some(30.0)),
            ("30s", Some(30.0)),
            ("500ms", Some(0.5)),
            ("2m", Some(120.0)),
            ("1.5h", Some(5400.0)),
            ("", None),
            ("s", None),
            ("10 parsecs", None),
            ("-1", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_duration(text).map(|d| d.as_secs_f64()),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn hosts() {
        let cases = [
            ("api.x.com", "api.x.com", true),
            ("API.x.com", "api.x.com", true),
            ("api.x.com", "*.x.com", true),
            ("x.com", "*.x.com", false),
            ("evilx.com", "*.x.com", false),
            ("a.b.x.com", "*.x.com", true),
            ("*.a.x.com", "*.x.com", true),
            ("anything", "*", true),
            ("*", "api.x.com", false),
        ];
        for (host, ceiling, want) in cases {
            assert_eq!(host_within(host, ceiling), want, "{host} within {ceiling}");
        }
    }

    #[test]
    fn excess() {
        let ceiling = Permissions {
            network: vec!["*.example.com".into()],
            filesystem: FilesystemPermissions {
                read: vec!["/srv/a".into()],
                write: vec![],
            },
            shell: false,
            env: vec!["TOKEN".into()],
        };
        let tool = Permissions {
            network: vec!["api.example.com".into(), "evil.net".into()],
            filesystem: FilesystemPermissions {
                read: vec!["/srv/a/b".into()],
                write: vec!["/tmp".into()],
            },
            shell: true,
            env: vec!["TOKEN".into(), "HOME".into()],
        };
        assert_eq!(
            tool.excess_over(&ceiling),
            [
                "network `evil.net`",
                "filesystem write `/tmp`",
                "shell",
                "env `HOME`"
            ]
        );
        assert!(Permissions::default().excess_over(&ceiling).is_empty());
    }
}
