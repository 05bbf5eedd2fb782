//! Turns over MCP: what a skill widened or restricted for a turn, and the lockouts after a
//! refusal, held per conversation and turn id in the store (so every instance sharing the
//! database sees them), and for a client that marks no turns, a widening only until the next
//! call.
//!
//! A conversation's turns are one document in the store, written only at the version read;
//! each turn in it carries a version of its own. A request remembers the version of the turn
//! it read ([`TurnRead`]); when it writes, the turn has either not moved (its state replaces
//! the turn's) or another request of the same turn wrote meanwhile (two requests of one turn
//! at once, on one instance or two): then the two are merged, never overwritten with less
//! ([`HeldTurns::with`]).

use quiver_policy::TurnState;
use serde::{Deserialize, Serialize};

use super::{Front, FrontError, MAX_HELD_TURNS};

/// How often a write of a conversation's turns is tried again after losing to another
/// writer before the request fails.
const WRITE_TRIES: usize = 32;

/// One turn of a conversation, carried between its requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct HeldTurn {
    /// The client's turn id; `None` for the turn of a client that marks none.
    pub(super) id: Option<String>,
    pub(super) state: TurnState,
    /// Skills whose lists the last request applied (read, or read again): their
    /// `allowed-tools` pre-approval may still serve the next request when it names no turn.
    pub(super) widening: Vec<String>,
    /// This turn's version: one more for each write.
    pub(super) v: u64,
}

/// A conversation's turns as stored: the turns written most recently, the last written last
/// (the one a request naming no turn continues), at most [`MAX_HELD_TURNS`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct HeldTurns {
    pub(super) turns: Vec<HeldTurn>,
}

/// What a request read of its conversation's turns: the turn it continues (the id it named,
/// or the held turn's when it named none) and that turn's version then (`None`: not held).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct TurnRead {
    pub(super) id: Option<String>,
    pub(super) v: Option<u64>,
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

impl HeldTurns {
    /// The turn state a request naming `turn` (or none) continues, and what it read: all of
    /// the turn of that id (skill lists and lockouts); for a request naming none, the
    /// continuation of the turn written last; nothing for a turn not held.
    pub(super) fn continued(&self, turn: Option<&str>) -> (TurnState, TurnRead) {
        match turn {
            Some(id) => match self.turns.iter().find(|t| t.id.as_deref() == Some(id)) {
                Some(held) => (
                    held.state.clone(),
                    TurnRead {
                        id: held.id.clone(),
                        v: Some(held.v),
                    },
                ),
                None => (
                    TurnState::new(),
                    TurnRead {
                        id: Some(id.to_owned()),
                        v: None,
                    },
                ),
            },
            None => match self.turns.last() {
                Some(held) => (
                    unmarked_continuation(held),
                    TurnRead {
                        id: held.id.clone(),
                        v: Some(held.v),
                    },
                ),
                None => (TurnState::new(), TurnRead::default()),
            },
        }
    }

    /// These turns with what a request that read `read` left: `state` and the skills whose
    /// widening stays open until the next call. When the turn has not moved since the read,
    /// the request's state replaces it (a request naming no turn uses up the widenings it was
    /// given, and in the turn of a client that marks none, drops the lockouts it was not
    /// given; a marked turn keeps its lockouts and restrictions). When another request of the turn wrote
    /// meanwhile (the two ran at once), nothing of either is lost: the lockouts and the skills'
    /// lists of both are kept, and the widenings both left open. The turn becomes the one
    /// written last; past [`MAX_HELD_TURNS`] the one written longest ago is dropped. `None`
    /// when nothing would change, and the turn's new version otherwise.
    pub(super) fn with(
        &self,
        read: &TurnRead,
        state: TurnState,
        widening: Vec<String>,
    ) -> Option<(HeldTurns, u64)> {
        let mut turns = self.turns.clone();
        let written = match turns.iter().position(|t| t.id == read.id) {
            Some(index) => {
                let stored = turns.remove(index);
                let unchanged = index == self.turns.len() - 1
                    && stored.state == state
                    && stored.widening == widening;
                if unchanged {
                    return None;
                }
                if Some(stored.v) == read.v {
                    let mut state = state;
                    // A marked turn's lockouts and restrictions outlast a request naming no
                    // turn that continued it (given none of its lockouts).
                    if stored.id.is_some() {
                        state.absorb(&stored.state);
                    }
                    HeldTurn {
                        state,
                        widening,
                        v: stored.v + 1,
                        ..stored
                    }
                } else {
                    let mut merged = state;
                    merged.absorb(&stored.state);
                    let mut open = widening;
                    open.extend(stored.widening.iter().cloned());
                    open.sort();
                    open.dedup();
                    HeldTurn {
                        state: merged,
                        widening: open,
                        v: stored.v + 1,
                        ..stored
                    }
                }
            }
            None => HeldTurn {
                id: read.id.clone(),
                state,
                widening,
                v: 1,
            },
        };
        let v = written.v;
        turns.push(written);
        let excess = turns.len().saturating_sub(MAX_HELD_TURNS);
        turns.drain(..excess);
        Some((HeldTurns { turns }, v))
    }
}

impl Front {
    /// `session`'s held turns, as stored, with their version (`None`: none stored).
    fn stored_turns(&self, session: &str) -> Result<(HeldTurns, Option<i64>), FrontError> {
        let Some(stored) = self.runtime.held_turns(session)? else {
            return Ok((HeldTurns::default(), None));
        };
        let turns = serde_json::from_value(stored.turns)
            .map_err(|e| FrontError::Turn(format!("the stored turns cannot be read: {e}")))?;
        Ok((turns, Some(stored.version)))
    }

    /// The turn state a request of `session` continues (docs/mcp.md "Turns"), read from the
    /// store, and what it read: all of the held turn (skill lists and lockouts) for a request
    /// naming that turn's id; for a request naming none, the held restrictions, and the
    /// pre-approvals only of skills the previous request applied (a widening never outlives
    /// the next call); nothing for a new turn id.
    pub(super) fn held_turn(
        &self,
        session: &str,
        turn: Option<&str>,
    ) -> Result<(TurnState, TurnRead), FrontError> {
        Ok(self.stored_turns(session)?.0.continued(turn))
    }

    /// Stores `state`, what a request given `given` after reading `read` left, as the turn it
    /// continued, before the request's answer goes back (so a refusal's lockout is stored with
    /// the refusal, and seen by the next request on any instance). Its widenings open until the
    /// next call are those the request applied, and those of the skills in `open`: the skill a
    /// request read again while its pre-approval still held (a read renews it), or the skills
    /// of a call still waiting for an answer. A write that loses to another writer reads
    /// again and merges ([`HeldTurns::with`]). Returns what a later write of the same request
    /// reads as its starting point.
    pub(super) fn hold_turn(
        &self,
        session: &str,
        read: &TurnRead,
        open: &[&str],
        given: &TurnState,
        state: TurnState,
    ) -> Result<TurnRead, FrontError> {
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
        for _ in 0..WRITE_TRIES {
            let (stored, version) = self.stored_turns(session)?;
            let Some((next, v)) = stored.with(read, state.clone(), widening.clone()) else {
                let v = stored.turns.iter().find(|t| t.id == read.id).map(|t| t.v);
                return Ok(TurnRead {
                    id: read.id.clone(),
                    v,
                });
            };
            let document = serde_json::to_value(&next)
                .map_err(|e| FrontError::Turn(format!("the turns cannot be written: {e}")))?;
            if self.runtime.put_held_turns(session, version, &document)? {
                return Ok(TurnRead {
                    id: read.id.clone(),
                    v: Some(v),
                });
            }
        }
        Err(FrontError::Turn(format!(
            "the conversation's turn could not be stored: {WRITE_TRIES} other writes came first"
        )))
    }
}

#[cfg(test)]
mod tests {
    use quiver_package::tool::RiskCategory;
    use quiver_policy::{Lockout, Refusal, RefusalReason, SkillTurnRules};

    use super::*;

    fn locked(tool: &str) -> TurnState {
        let mut state = TurnState::new();
        state.record_refusal(&Refusal::new(
            RefusalReason::NeedsHumanApproval,
            Lockout {
                tool: tool.into(),
                categories: vec![RiskCategory::Member],
            },
        ));
        state
    }

    fn skill(state: &mut TurnState, id: &str, allowed: &[&str]) {
        let allowed: Vec<String> = allowed.iter().map(|s| (*s).to_owned()).collect();
        state.activate_skill(SkillTurnRules::new(id, "pkg", &allowed, &["drop".into()]));
    }

    fn turn(id: Option<&str>, state: TurnState, widening: &[&str], v: u64) -> HeldTurn {
        HeldTurn {
            id: id.map(str::to_owned),
            state,
            widening: widening.iter().map(|s| (*s).to_owned()).collect(),
            v,
        }
    }

    fn read(id: Option<&str>, v: Option<u64>) -> TurnRead {
        TurnRead {
            id: id.map(str::to_owned),
            v,
        }
    }

    /// What the next request of each turn id is given after a write: (case, stored turns,
    /// the write's read, its state, its widenings, the turn it then reads, whether the tool
    /// `pkg.kick` and `pkg.pay` are locked there, the widenings held).
    #[test]
    fn a_write_replaces_a_turn_not_moved_and_merges_one_that_moved() {
        let mut with_skill = TurnState::new();
        skill(&mut with_skill, "pkg/a", &["post"]);
        let mut kick_and_skill = locked("pkg.kick");
        skill(&mut kick_and_skill, "pkg/a", &["post"]);
        type Case<'a> = (
            &'a str,
            Vec<HeldTurn>,
            TurnRead,
            TurnState,
            &'a [&'a str],
            Option<&'a str>,
            (bool, bool),
            &'a [&'a str],
        );
        let cases: Vec<Case> = vec![
            (
                "a first write holds the turn",
                vec![],
                read(Some("m1"), None),
                locked("pkg.kick"),
                &[],
                Some("m1"),
                (true, false),
                &[],
            ),
            (
                "not moved: the request's state replaces the turn's",
                vec![turn(Some("m1"), locked("pkg.kick"), &[], 3)],
                read(Some("m1"), Some(3)),
                kick_and_skill.clone(),
                &["pkg/a"],
                Some("m1"),
                (true, false),
                &["pkg/a"],
            ),
            (
                "moved by a request of the same turn: both lockouts kept",
                vec![turn(Some("m1"), locked("pkg.pay"), &[], 4)],
                read(Some("m1"), Some(3)),
                locked("pkg.kick"),
                &[],
                Some("m1"),
                (true, true),
                &[],
            ),
            (
                "a new turn started by two requests at once: both lockouts kept",
                vec![turn(Some("m2"), locked("pkg.pay"), &[], 1)],
                read(Some("m2"), None),
                locked("pkg.kick"),
                &[],
                Some("m2"),
                (true, true),
                &[],
            ),
            (
                "an unmarked request that used a widening ends it",
                vec![turn(None, with_skill.clone(), &["pkg/a"], 2)],
                read(None, Some(2)),
                with_skill.clone(),
                &[],
                None,
                (false, false),
                &[],
            ),
            (
                "an unmarked widening another request left meanwhile stays for the next call",
                vec![turn(None, with_skill.clone(), &["pkg/a"], 3)],
                read(None, Some(2)),
                TurnState::new(),
                &[],
                None,
                (false, false),
                &["pkg/a"],
            ),
            (
                "a request naming no turn that continued a marked turn keeps its lockouts",
                vec![turn(Some("m1"), locked("pkg.kick"), &[], 2)],
                read(Some("m1"), Some(2)),
                TurnState::new(),
                &[],
                Some("m1"),
                (true, false),
                &[],
            ),
            (
                "another turn's lockouts are not this turn's",
                vec![turn(Some("m1"), locked("pkg.pay"), &[], 2)],
                read(Some("m2"), None),
                locked("pkg.kick"),
                &[],
                Some("m2"),
                (true, false),
                &[],
            ),
        ];
        for (name, stored, read, state, widening, next, locks, open) in cases {
            let held = HeldTurns { turns: stored };
            let widening = widening.iter().map(|s| (*s).to_owned()).collect();
            let (after, v) = held.with(&read, state, widening).unwrap();
            let written = after.turns.last().unwrap();
            assert_eq!(written.id.as_deref(), next, "{name}");
            assert_eq!(written.v, v, "{name}");
            let (given, _) = after.continued(next);
            assert_eq!(
                (
                    given.is_tool_locked("pkg.kick"),
                    given.is_tool_locked("pkg.pay")
                ),
                locks,
                "{name}"
            );
            assert_eq!(written.widening, open, "{name}");
        }
    }

    #[test]
    fn turns_of_other_ids_stay_apart_and_the_oldest_goes_past_the_bound() {
        let mut held = HeldTurns::default();
        for n in 0..MAX_HELD_TURNS + 2 {
            let id = format!("m{n}");
            let (next, _) = held
                .with(&read(Some(&id), None), locked(&format!("pkg.t{n}")), vec![])
                .unwrap();
            held = next;
        }
        assert_eq!(held.turns.len(), MAX_HELD_TURNS);
        // The two written first are gone: a request naming them starts afresh.
        assert!(!held.continued(Some("m0")).0.is_tool_locked("pkg.t0"));
        assert_eq!(held.continued(Some("m0")).1.v, None);
        // A late request of an older turn still held finds that turn's lockout, not the
        // newest turn's; a request naming none continues the turn written last.
        let (older, _) = held.continued(Some("m3"));
        assert!(older.is_tool_locked("pkg.t3") && !older.is_tool_locked("pkg.t9"));
        let last = format!("m{}", MAX_HELD_TURNS + 1);
        assert_eq!(held.continued(None).1.id.as_deref(), Some(last.as_str()));
        // Writing what is held changes nothing.
        let (state, read) = held.continued(Some("m3"));
        let (moved, _) = held.with(&read, state.clone(), vec![]).unwrap();
        assert_eq!(moved.turns.last().unwrap().id.as_deref(), Some("m3"));
        let (_, read) = moved.continued(Some("m3"));
        assert!(moved.with(&read, state, vec![]).is_none());
    }
}
