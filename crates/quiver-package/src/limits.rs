//! `limits:` of a `tool.yaml`, and the same shape for the operator's ceiling in the config
//! file: resource limits a tool asks for instead of the sandbox's defaults. Each is optional;
//! what is left out keeps the default. The sandbox grants a value over the operator's ceiling
//! as the ceiling, with a warning (docs/sandbox.md).
//!
//! ```yaml
//! limits:
//!   memory: 256MiB      # all the call's processes together
//!   processes: 32       # processes and threads of the call together
//!   cpu: 0.5            # share of one core
//!   cpu_seconds: 10     # CPU time of each process
//!   tmp: 16MiB          # the private /tmp
//!   disk: 64MiB         # the package's data folder
//! ```

use std::num::NonZeroU64;

use serde::{Deserialize, Deserializer, Serialize};

/// Resource limits as declared; `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceLimits {
    /// Memory of all the call's processes together.
    pub memory: Option<Bytes>,
    /// Processes and threads of the call together.
    pub processes: Option<NonZeroU64>,
    /// CPU share of the call.
    pub cpu: Option<Cores>,
    /// CPU seconds of each of its processes.
    pub cpu_seconds: Option<NonZeroU64>,
    /// Size of its private `/tmp`.
    pub tmp: Option<Bytes>,
    /// Disk budget of the package's data folder.
    pub disk: Option<Bytes>,
}

/// A size in bytes, written as a number of bytes or with a unit: `512KiB`, `256MiB`, `1GiB`
/// (`K`, `KB`, `M`, `MB`, `G`, `GB` mean the same binary units). Never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Bytes(pub u64);

/// A CPU share in thousandths of one core, written as cores: `0.5`, `2`. More than zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Cores(pub u64);

/// Reads a size (`256MiB`, `1G`, `4096`); `None` when it is not one or is zero.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KiB" | "k" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        "T" | "TB" | "TiB" => 1 << 40,
        _ => return None,
    };
    let bytes = number * scale as f64;
    (1.0..1e18).contains(&bytes).then_some(bytes as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parsed = match NumberOrText::deserialize(deserializer)? {
            NumberOrText::Number(n) => parse_size(&n.to_string()),
            NumberOrText::Text(s) => parse_size(&s),
        };
        parsed.map(Bytes).ok_or_else(|| {
            serde::de::Error::custom("expected a size such as `256MiB`, `1GiB` or `65536` (bytes)")
        })
    }
}

impl<'de> Deserialize<'de> for Cores {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let cores = match NumberOrText::deserialize(deserializer)? {
            NumberOrText::Number(n) => Some(n),
            NumberOrText::Text(s) => s.trim().parse().ok(),
        };
        cores
            .filter(|c| *c > 0.0 && *c <= 1024.0)
            .map(|c| Cores(((c * 1000.0).round() as u64).max(1)))
            .ok_or_else(|| {
                serde::de::Error::custom("expected a number of cores such as `0.5` or `2`")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases = [
            ("4096", Some(4096)),
            ("512KiB", Some(512 << 10)),
            ("256MiB", Some(256 << 20)),
            ("256M", Some(256 << 20)),
            ("1.5GiB", Some(3 << 29)),
            ("1 GB", Some(1 << 30)),
            ("0", None),
            ("0MiB", None),
            ("lots", None),
            ("12 parsecs", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), want, "{text}");
        }
    }

    #[test]
    fn limits_as_written() {
        let cases: [(&str, Result<ResourceLimits, &str>); 5] = [
            ("{}", Ok(ResourceLimits::default())),
            (
                "{memory: 64MiB, processes: 8, cpu: 0.25, cpu_seconds: 3, tmp: 1MiB, disk: 2048}",
                Ok(ResourceLimits {
                    memory: Some(Bytes(64 << 20)),
                    processes: NonZeroU64::new(8),
                    cpu: Some(Cores(250)),
                    cpu_seconds: NonZeroU64::new(3),
                    tmp: Some(Bytes(1 << 20)),
                    disk: Some(Bytes(2048)),
                }),
            ),
            ("{memory: 0}", Err("expected a size")),
            ("{cpu: 0}", Err("number of cores")),
            ("{swap: 1GiB}", Err("swap")),
        ];
        for (text, want) in cases {
            let got = crate::yaml::parse::<ResourceLimits>(text, std::path::Path::new("t"), 1);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(diag), Err(part)) => {
                    assert!(diag.to_string().contains(part), "{text}: {diag}")
                }
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }
}
