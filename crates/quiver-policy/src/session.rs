//! Session-scoped grants: package consent and `once` approvals, keyed on (session, tool).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::decision::{Ask, Reuse};

/// What one session has been granted. The runtime stores it with the session and passes it to
/// every call; a new session starts empty, so it asks again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionGrants {
    /// The session these grants belong to.
    pub session: String,
    /// Package consent answers: `true` granted, `false` refused, absent not asked yet.
    pub consent: BTreeMap<String, bool>,
    /// Tools (`<package>.<tool>`) whose `once` approval was given in this session.
    pub once_approved: BTreeSet<String>,
}

impl SessionGrants {
    /// A new session's grants: nothing.
    pub fn new(session: &str) -> SessionGrants {
        SessionGrants {
            session: session.to_owned(),
            ..SessionGrants::default()
        }
    }

    /// The consent answer for `package` in this session, if asked.
    pub fn consent_for(&self, package: &str) -> Option<bool> {
        self.consent.get(package).copied()
    }

    /// The user allowed `package` for the rest of the session.
    pub fn grant_consent(&mut self, package: &str) {
        self.consent.insert(package.to_owned(), true);
    }

    /// The user refused `package`: its items are refused for the rest of the session.
    pub fn refuse_consent(&mut self, package: &str) {
        self.consent.insert(package.to_owned(), false);
    }

    /// Records a `once` approval of `tool` (`<package>.<tool>`) in this session.
    pub fn approve_once(&mut self, tool: &str) {
        self.once_approved.insert(tool.to_owned());
    }

    /// Whether `tool` (`<package>.<tool>`) has a `once` approval in this session.
    pub fn is_once_approved(&self, tool: &str) -> bool {
        self.once_approved.contains(tool)
    }

    /// Records every yes of an [`Ask`] that outlives the call: consent for its package, and a
    /// `once` approval when the question says it may be reused.
    pub fn record_granted(&mut self, ask: &Ask) {
        if ask.consent.is_some() {
            self.grant_consent(&ask.package);
        }
        if ask
            .approval
            .as_ref()
            .is_some_and(|a| a.reuse == Reuse::Session)
        {
            self.approve_once(&ask.tool_id());
        }
    }
}
