//! What an MCP conversation's requests share on every instance (docs/instances.md): the turns
//! it holds (the active skills' lists and the lockouts after a refusal, one JSON document per
//! session the front reads and writes, under a version so that two instances writing one
//! conversation's turns at once never lose a write), and the questions asked of its person
//! that a second request must not ask again (a package's consent): one row per session and
//! question, claimed by one conditional insert, so the request that loses the claim shares
//! the winner's question and its answer. Both kinds of row go with their session.

/// A conversation's held turns as stored, with the version a conditional write names.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldTurns {
    /// The document the front wrote.
    pub turns: serde_json::Value,
    /// Its version: 1 for the first write, one more for each later one.
    pub version: i64,
}

/// A question of a session shared by the requests that would ask it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedQuestion {
    /// The id of the request that asked it (the claim's winner).
    pub id: String,
    /// The answer, once one was given (by whichever request brought it).
    pub answer: Option<String>,
}

/// What claiming a question found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The claimant asks the question: no one else was asking it (or their question expired
    /// or was answered already).
    Asks,
    /// Another request asks it and has no answer yet: share that question.
    Shares(SharedQuestion),
}
