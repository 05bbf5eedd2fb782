//! Where an operator card stands at a moment: live, used, revoked or expired; and the error a
//! revoke of a card that is not live gets.

use std::fmt;

use serde::Serialize;

use crate::error::StoreError;
use crate::types::OperatorCard;

/// Where an operator card stands ([`OperatorCard::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorCardState {
    /// Unused, not revoked, and not expired: the next matching call uses it.
    Live,
    /// A call used it.
    Used,
    /// An operator revoked it before it was used or expired.
    Revoked,
    /// It expired unused.
    Expired,
}

impl OperatorCardState {
    /// The state in one word: `live`, `used`, `revoked` or `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorCardState::Live => "live",
            OperatorCardState::Used => "used",
            OperatorCardState::Revoked => "revoked",
            OperatorCardState::Expired => "expired",
        }
    }
}

impl fmt::Display for OperatorCardState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl OperatorCard {
    /// Where the card stands at `now` (Unix ms). A use or a revoke is final, whichever came
    /// first (the store lets only one happen).
    pub fn state(&self, now: i64) -> OperatorCardState {
        match (self.used_at, self.revoked_at) {
            (Some(_), _) => OperatorCardState::Used,
            (None, Some(_)) => OperatorCardState::Revoked,
            (None, None) if self.expires_at <= now => OperatorCardState::Expired,
            (None, None) => OperatorCardState::Live,
        }
    }
}

/// The error of revoking `card` at `now` when it is no longer live.
pub(crate) fn not_live(card: &OperatorCard, now: i64) -> StoreError {
    StoreError::Conflict(format!(
        "operator card {} cannot be revoked: it is {}",
        card.id,
        card.state(now)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cards_state() {
        let card = OperatorCard {
            id: "opc-1".into(),
            tool: "p.t".into(),
            arguments: serde_json::json!({}),
            session: None,
            created_by: "op".into(),
            created_at: 0,
            expires_at: 100,
            used_at: None,
            used_session: None,
            used_call: None,
            revoked_at: None,
            revoked_by: None,
        };
        let cases = [
            (None, None, 50, OperatorCardState::Live),
            (None, None, 99, OperatorCardState::Live),
            (None, None, 100, OperatorCardState::Expired),
            (Some(10), None, 50, OperatorCardState::Used),
            (Some(10), None, 500, OperatorCardState::Used),
            (None, Some(20), 50, OperatorCardState::Revoked),
            (None, Some(20), 500, OperatorCardState::Revoked),
        ];
        for (used_at, revoked_at, now, want) in cases {
            let card = OperatorCard {
                used_at,
                revoked_at,
                ..card.clone()
            };
            assert_eq!(card.state(now), want, "{used_at:?} {revoked_at:?} {now}");
        }
        assert_eq!(
            not_live(&card, 100).to_string(),
            "conflict: operator card opc-1 cannot be revoked: it is expired"
        );
    }
}
