//! The spent one-time nonces of the MCP front's sealed request states, in the store so that
//! every instance on one database sees them (docs/instances.md): the front spends a nonce
//! here, and stores the result of the call it resumed for a retry to read back.

use std::time::Duration;

use quiver_store::Spend;
use serde_json::Value;

use super::{Runtime, RuntimeError};

impl Runtime {
    /// Spends a request state's one-time `nonce`, remembered for `keep` on the store's clock:
    /// exactly one spender of a nonce, on any instance, gets [`Spend::First`].
    pub fn spend_request_state(&self, nonce: &str, keep: Duration) -> Result<Spend, RuntimeError> {
        let keep = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
        Ok(self.store().spend_request_state(nonce, keep)?)
    }

    /// Stores `result`, what the call that spent `nonce` answered, for a retry to replay;
    /// `false` when one was stored already or the nonce expired.
    pub fn finish_request_state(&self, nonce: &str, result: &Value) -> Result<bool, RuntimeError> {
        Ok(self.store().finish_request_state(nonce, result)?)
    }
}
