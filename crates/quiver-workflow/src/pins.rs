//! The gate of a run's pinned packages: an engine drives a run (claims an attempt, takes it
//! over after a lease ran out, resolves its timer, event or approval, runs an operator's retry)
//! only when every package content digest its definition pins ([`Definition::packages`]) is
//! the one its runner has loaded now ([`StepRunner::package_digest`]). Otherwise it leaves the
//! run as it is (no claim, no epoch raised, no status changed), says why once per run at
//! `info`, and the run waits for an instance that has loaded those digests.
//!
//! [`Definition::packages`]: crate::Definition::packages
//! [`StepRunner::package_digest`]: crate::StepRunner::package_digest

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Mutex, PoisonError};

/// A pin the loaded packages do not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The package id.
    pub package: String,
    /// The content digest the run pins.
    pub pinned: String,
    /// The content digest loaded here, if the package is loaded at all.
    pub loaded: Option<String>,
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.package, self.pinned)
    }
}

/// The pins of `pins` that `loaded` (package id → the content digest loaded now, `None` when
/// not loaded) does not meet, by package id. Empty: the run may be driven here.
pub fn unmet(
    pins: &BTreeMap<String, String>,
    loaded: &dyn Fn(&str) -> Option<String>,
) -> Vec<Unmet> {
    pins.iter()
        .filter_map(|(package, pinned)| {
            let here = loaded(package);
            (here.as_deref() != Some(pinned.as_str())).then(|| Unmet {
                package: package.clone(),
                pinned: pinned.clone(),
                loaded: here,
            })
        })
        .collect()
}

/// Why `run` is left alone here: `run … needs p@sha256:… which this instance has not loaded (it
/// has p@sha256:…)`, one clause per unmet pin.
pub fn describe(run: &str, unmet: &[Unmet]) -> String {
    let clauses: Vec<String> = unmet
        .iter()
        .map(|u| {
            let has = match &u.loaded {
                Some(digest) => format!("it has {}@{digest}", u.package),
                None => format!("it has no package {}", u.package),
            };
            format!("{u} which this instance has not loaded ({has})")
        })
        .collect();
    format!("run {run} needs {}", clauses.join(", and "))
}

/// What a run left alone waits for: `an instance that has loaded p@sha256:…, q@sha256:…`.
pub fn waiting_for(unmet: &[Unmet]) -> String {
    let pins: Vec<String> = unmet.iter().map(Unmet::to_string).collect();
    format!("an instance that has loaded {}", pins.join(", "))
}

/// Logs [`describe`] at `info` once per run and reason in this process.
pub(crate) fn log_once(run: &str, unmet: &[Unmet]) {
    static LOGGED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let text = describe(run, unmet);
    let mut logged = LOGGED.lock().unwrap_or_else(PoisonError::into_inner);
    let logged = logged.get_or_insert_with(HashSet::new);
    if logged.len() >= 10_000 {
        logged.clear();
    }
    if logged.insert(text.clone()) {
        tracing::info!(run = %run, "{text}; the run is left for an instance that has");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Pins, and the unmet ones: package, pinned, loaded.
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static str, Option<&'static str>)],
    );

    #[test]
    fn pins_against_what_is_loaded() {
        let loaded = map(&[("p", "sha256:p1"), ("q", "sha256:q2")]);
        let here = |id: &str| loaded.get(id).cloned();
        let cases: [Case; 6] = [
            // No pins (a definition stored before pinning): runs anywhere.
            (&[], &[]),
            (&[("p", "sha256:p1")], &[]),
            (&[("p", "sha256:p1"), ("q", "sha256:q2")], &[]),
            // Another version of a loaded package.
            (
                &[("p", "sha256:p2")],
                &[("p", "sha256:p2", Some("sha256:p1"))],
            ),
            // A package not loaded here at all.
            (&[("r", "sha256:r1")], &[("r", "sha256:r1", None)]),
            // One met, one not.
            (
                &[("p", "sha256:p1"), ("q", "sha256:q1")],
                &[("q", "sha256:q1", Some("sha256:q2"))],
            ),
        ];
        for (pins, want) in cases {
            let got = unmet(&map(pins), &here);
            let want: Vec<Unmet> = want
                .iter()
                .map(|(p, d, l)| Unmet {
                    package: (*p).to_owned(),
                    pinned: (*d).to_owned(),
                    loaded: l.map(str::to_owned),
                })
                .collect();
            assert_eq!(got, want, "{pins:?}");
        }
    }

    #[test]
    fn what_the_operator_reads() {
        let unmet = [
            Unmet {
                package: "p".into(),
                pinned: "sha256:aa".into(),
                loaded: Some("sha256:bb".into()),
            },
            Unmet {
                package: "q".into(),
                pinned: "sha256:cc".into(),
                loaded: None,
            },
        ];
        assert_eq!(
            describe("run-1", &unmet[..1]),
            "run run-1 needs p@sha256:aa which this instance has not loaded (it has p@sha256:bb)"
        );
        assert_eq!(
            describe("run-1", &unmet),
            "run run-1 needs p@sha256:aa which this instance has not loaded (it has p@sha256:bb), and q@sha256:cc which this instance has not loaded (it has no package q)"
        );
        assert_eq!(
            waiting_for(&unmet),
            "an instance that has loaded p@sha256:aa, q@sha256:cc"
        );
    }
}
