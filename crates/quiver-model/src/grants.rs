//! How long each grant and restriction lasts (DESIGN.md §4): package consent and a `once`
//! approval for the session; a skill's `allowed-tools` and `disallowed-tools` and a lockout
//! after a refusal for the turn; and where the client marks no turns (a generic MCP client),
//! a widening until the next call at the latest and a restriction until the conversation ends.

/// How long a grant or restriction lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Until the session ends (package consent, a `once` approval, an opened package).
    Session,
    /// Until the turn ends (an `allowed-tools` pre-approval, a `disallowed-tools` removal, a
    /// lockout after a refusal).
    Turn,
    /// At most the next call: a widening in a conversation whose client marks no turns.
    NextCall,
    /// Until the conversation ends or the skill ends: a restriction where no turn is marked.
    Conversation,
}

/// Whether the client marks its turns (the runtime API, chat and MCP with `_meta` turn ids do;
/// a generic MCP client does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turns {
    /// Each turn is marked.
    Marked,
    /// No turn is marked.
    Unmarked,
}

impl Turns {
    /// How long a skill's `allowed-tools` pre-approval lasts.
    pub fn widening(self) -> Lifetime {
        match self {
            Turns::Marked => Lifetime::Turn,
            Turns::Unmarked => Lifetime::NextCall,
        }
    }

    /// How long a skill's `disallowed-tools` removal lasts.
    pub fn restriction(self) -> Lifetime {
        match self {
            Turns::Marked => Lifetime::Turn,
            Turns::Unmarked => Lifetime::Conversation,
        }
    }
}

/// What a session or turn holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The user allowed a package (or refused it).
    Consent,
    /// A `once` tool approved.
    OnceApproval,
    /// A package opened by `read_skill`: its exposed items pinned.
    Opened,
    /// An active skill's `allowed-tools`: the approval-mode question skipped.
    PreApproval,
    /// An active skill's `disallowed-tools`: the tool removed.
    Removal,
    /// A tool (or risk category) locked after a policy refusal.
    Lockout,
}

/// How long `grant` lasts for a client whose turns are `turns`.
pub fn lifetime(grant: Grant, turns: Turns) -> Lifetime {
    match grant {
        Grant::Consent | Grant::OnceApproval | Grant::Opened => Lifetime::Session,
        Grant::PreApproval => turns.widening(),
        Grant::Removal => turns.restriction(),
        Grant::Lockout => Lifetime::Turn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grant_lasts_as_the_design_says() {
        use Grant::*;
        use Lifetime::*;
        let cases = [
            (Consent, Turns::Marked, Session),
            (Consent, Turns::Unmarked, Session),
            (OnceApproval, Turns::Unmarked, Session),
            (Opened, Turns::Marked, Session),
            (PreApproval, Turns::Marked, Turn),
            (PreApproval, Turns::Unmarked, NextCall),
            (Removal, Turns::Marked, Turn),
            (Removal, Turns::Unmarked, Conversation),
            (Lockout, Turns::Marked, Turn),
        ];
        for (grant, turns, want) in cases {
            assert_eq!(lifetime(grant, turns), want, "{grant:?} {turns:?}");
        }
    }
}
