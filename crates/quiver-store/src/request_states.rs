//! Spent request states: the one-time nonces of the sealed `requestState`s an MCP client
//! returns with its answer to a question (docs/mcp.md), kept in the store so every instance on
//! one database sees them. Spending is one conditional insert (the first spender of a nonce
//! wins, whichever instance it runs on); the call it resumed stores its result under the nonce,
//! and a retry with the same state reads that result back instead of running the call again.
//! Rows live until their expiry (on the store's clock) and are pruned by later spends.

use serde_json::Value;

/// What spending a request state's nonce found.
#[derive(Debug, Clone, PartialEq)]
pub enum Spend {
    /// This spender is the first: it runs the call and then stores its result.
    First,
    /// Spent before, and the call it resumed has not stored its result yet (still running).
    Running,
    /// Spent before; the call it resumed ended with this result.
    Finished(Value),
}
