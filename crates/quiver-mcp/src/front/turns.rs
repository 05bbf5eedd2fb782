//! Turns over MCP: what a skill widened or restricted for a turn, held per conversation and
//! turn id, and for a client that marks no turns, a widening only until the next call.

use std::sync::PoisonError;

use quiver_policy::TurnState;

use super::questions::now_nanos;
use super::{Front, MAX_HELD_TURNS};

/// A conversation's current turn, carried between its requests.
pub(super) struct HeldTurn {
    pub(super) id: Option<String>,
    pub(super) state: TurnState,
    /// Skills whose lists the last request applied (read, or read again): their
    /// `allowed-tools` pre-approval may still serve the next request when it names no turn.
    pub(super) widening: Vec<String>,
    pub(super) seen: u128,
}

/// What a request naming no turn id continues of the held turn: every skill's restriction
/// (`disallowed-tools`, never lifted silently), and the pre-approval (`allowed-tools`) only
/// of the skills the previous request applied, so a widening ends at the latest with the next
/// call. Lockouts last one request.
pub(super) fn unmarked_continuation(held: &HeldTurn) -> TurnState {
    let mut lists = TurnState::new();
    for rules in held.state.skills() {
        let mut rules = rules.clone();
        if !held.widening.contains(&rules.skill) {
            rules.allowed.clear();
        }
        lists.activate_skill(rules);
    }
    lists
}

/// The skills whose lists a request applied: those it left with a pre-approval that differs
/// from what it was given (a skill read, or read again after its widening had lapsed).
pub(super) fn applied_widenings(given: &TurnState, after: &TurnState) -> Vec<String> {
    after
        .skills()
        .iter()
        .filter(|rules| !rules.allowed.is_empty())
        .filter(|rules| !given.skills().iter().any(|g| g == *rules))
        .map(|rules| rules.skill.clone())
        .collect()
}

impl Front {
    /// The turn state a request of `session` continues (docs/mcp.md "Turns"): all of the held
    /// turn (skill lists and lockouts) for a request naming the held turn's id; for a request
    /// naming none, the held restrictions, and the pre-approvals only of skills the previous
    /// request applied (a widening never outlives the next call); nothing for a new turn id.
    pub(super) fn held_turn(&self, session: &str, turn: Option<&str>) -> TurnState {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        match (turns.get(session), turn) {
            (Some(held), Some(id)) if held.id.as_deref() == Some(id) => held.state.clone(),
            (Some(held), None) => unmarked_continuation(held),
            _ => TurnState::new(),
        }
    }

    /// Holds `state`, what a request given `given` left, as `session`'s current turn. Its
    /// widenings open until the next call are those the request applied, and those of the
    /// skills in `open`: the skill a request read again while its pre-approval still held (a
    /// read renews it), or the skills of a call still waiting for an answer. Past
    /// [`MAX_HELD_TURNS`] the least recently used conversation is ended.
    pub(super) fn hold_turn(
        &self,
        session: &str,
        turn: Option<&str>,
        open: &[&str],
        given: &TurnState,
        state: TurnState,
    ) {
        let mut widening = applied_widenings(given, &state);
        widening.extend(
            state
                .skills()
                .iter()
                .filter(|rules| !rules.allowed.is_empty() && open.contains(&rules.skill.as_str()))
                .map(|rules| rules.skill.clone()),
        );
        widening.sort();
        widening.dedup();
        let evicted = {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            let id = match turn {
                Some(turn) => Some(turn.to_owned()),
                None => turns.get(session).and_then(|h| h.id.clone()),
            };
            turns.insert(
                session.to_owned(),
                HeldTurn {
                    id,
                    state,
                    widening,
                    seen: now_nanos(),
                },
            );
            let oldest = (turns.len() > MAX_HELD_TURNS)
                .then(|| {
                    turns
                        .iter()
                        .min_by_key(|(_, h)| h.seen)
                        .map(|(s, _)| s.clone())
                })
                .flatten();
            if let Some(oldest) = &oldest {
                turns.remove(oldest);
            }
            oldest
        };
        if let Some(oldest) = evicted
            && let Err(error) = self.runtime.end_session(&oldest)
        {
            tracing::warn!(%error, session = %oldest, "cannot end an evicted MCP conversation");
        }
    }
}
