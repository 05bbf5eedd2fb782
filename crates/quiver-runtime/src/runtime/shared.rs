//! What an MCP conversation's requests share on every instance on one store (docs/instances.md):
//! the turns the front holds for it, written only at the version read, and the questions asked
//! once for all its requests (a package's consent), claimed by one conditional insert.

use std::time::Duration;

use quiver_store::{Claim, HeldTurns, SharedQuestion};
use serde_json::Value;

use super::{Runtime, RuntimeError};

impl Runtime {
    /// The turns held for `session`'s conversation, with their version.
    pub fn held_turns(&self, session: &str) -> Result<Option<HeldTurns>, RuntimeError> {
        Ok(self.store().held_turns(session)?)
    }

    /// Stores `turns` for `session` if their version is still `expected` (`None`: none
    /// stored); `false` when another writer came first and nothing changed.
    pub fn put_held_turns(
        &self,
        session: &str,
        expected: Option<i64>,
        turns: &Value,
    ) -> Result<bool, RuntimeError> {
        Ok(self.store().put_held_turns(session, expected, turns)?)
    }

    /// Claims question `key` of `session` for request `id`, open for `open`: of requests
    /// claiming it at once on any instance, exactly one asks it ([`Claim::Asks`]).
    pub fn claim_question(
        &self,
        session: &str,
        key: &str,
        id: &str,
        open: Duration,
    ) -> Result<Claim, RuntimeError> {
        let ttl = i64::try_from(open.as_millis()).unwrap_or(i64::MAX);
        Ok(self.store().claim_question(session, key, id, ttl)?)
    }

    /// Records `answer` to question `key` of `session`, once, for every request sharing it.
    pub fn answer_question(
        &self,
        session: &str,
        key: &str,
        answer: &str,
    ) -> Result<bool, RuntimeError> {
        Ok(self.store().answer_question(session, key, answer)?)
    }

    /// Question `key` of `session` as it stands, if it is asked.
    pub fn shared_question(
        &self,
        session: &str,
        key: &str,
    ) -> Result<Option<SharedQuestion>, RuntimeError> {
        Ok(self.store().question(session, key)?)
    }

    /// Withdraws question `key` request `id` asked and nobody answered, so the next request
    /// asks anew.
    pub fn release_question(
        &self,
        session: &str,
        key: &str,
        id: &str,
    ) -> Result<bool, RuntimeError> {
        Ok(self.store().release_question(session, key, id)?)
    }
}
