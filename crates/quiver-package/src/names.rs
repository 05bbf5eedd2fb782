//! Validated names: package ids and item names match `[a-z0-9][a-z0-9_-]{0,63}`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The longest package id or item name.
pub const MAX_NAME_LEN: usize = 64;

/// Skill names that are folder names of the format and so cannot name a skill.
pub const RESERVED_SKILL_NAMES: [&str; 4] = ["references", "assets", "scripts", "skill"];

/// A name that does not match `[a-z0-9][a-z0-9_-]{0,63}`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{name}` is not a valid name: {reason}")]
pub struct InvalidName {
    /// The rejected input.
    pub name: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

/// Checks `name` against `[a-z0-9][a-z0-9_-]{0,63}`.
pub fn check_name(name: &str) -> Result<(), InvalidName> {
    let fail = |reason| {
        Err(InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    let Some(first) = name.chars().next() else {
        return fail("it is empty");
    };
    if name.len() > MAX_NAME_LEN {
        return fail("it is longer than 64 characters");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return fail("it must start with a lowercase ASCII letter or a digit");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return fail("only lowercase ASCII letters, digits, `_` and `-` are allowed");
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $ty(String);

        impl $ty {
            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $ty {
            type Err = InvalidName;
            fn from_str(s: &str) -> Result<Self, InvalidName> {
                check_name(s)?;
                Ok(Self(s.to_owned()))
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A package id such as `weather`.
    PackageId
);
name_type!(
    /// The local name of a tool, agent, workflow, prompt section or skill inside its package.
    ItemName
);

impl PackageId {
    /// A valid id for `display`: the name itself when valid, else a stable ASCII id derived from
    /// it (`天气` → `pkg-` followed by 8 hex digits of its sha256, after any ASCII part).
    pub fn derive(display: &str) -> PackageId {
        PackageId(derive_name(display, "pkg"))
    }
}

impl ItemName {
    /// A valid item name for `display`, derived like [`PackageId::derive`].
    pub fn derive(display: &str) -> ItemName {
        ItemName(derive_name(display, "item"))
    }
}

fn derive_name(display: &str, prefix: &str) -> String {
    if check_name(display).is_ok() {
        return display.to_owned();
    }
    let ascii: String = display
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let ascii: Vec<&str> = ascii.split('-').filter(|s| !s.is_empty()).collect();
    let digest = Sha256::digest(display.as_bytes());
    let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let stem = ascii.join("-");
    let stem = if stem.is_empty() {
        prefix.to_owned()
    } else {
        stem
    };
    let stem: String = stem.chars().take(MAX_NAME_LEN - 9).collect();
    let stem = stem.trim_end_matches('-');
    let name = format!("{stem}-{hash}");
    if check_name(&name).is_ok() {
        name
    } else {
        format!("{prefix}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_cases() {
        let cases = [
            ("weather", true),
            ("a", true),
            ("0day", true),
            ("web-fetch_2", true),
            ("", false),
            ("-x", false),
            ("_x", false),
            ("Weather", false),
            ("天气", false),
            ("a.b", false),
            ("a b", false),
        ];
        for (name, ok) in cases {
            assert_eq!(check_name(name).is_ok(), ok, "{name}");
        }
        assert!(check_name(&"a".repeat(64)).is_ok());
        assert!(check_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn derived_ids_are_stable_and_valid() {
        let a = PackageId::derive("天气");
        assert_eq!(a, PackageId::derive("天气"));
        assert!(a.as_str().starts_with("pkg-"), "{a}");
        assert_ne!(a, PackageId::derive("天氣"));
        assert!(
            PackageId::derive("Weather Tools")
                .as_str()
                .starts_with("weather-tools-")
        );
        assert_eq!(PackageId::derive("ok-name").as_str(), "ok-name");
        let long = PackageId::derive(&"长".repeat(100));
        assert!(check_name(long.as_str()).is_ok());
        let long = PackageId::derive(&"A".repeat(100));
        assert!(check_name(long.as_str()).is_ok(), "{long}");
    }

    #[test]
    fn deserialize_quotes_the_bad_input() {
        let err = serde_json::from_str::<PackageId>("\"Bad Name\"").unwrap_err();
        assert!(err.to_string().contains("`Bad Name`"), "{err}");
    }
}
