//! What both backends share about values: JSON columns as compact text, argument checks, and
//! audit entries encoded before a transaction starts.

use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::types::{AuditDecision, AuditEntry, AuditStep};

/// A JSON value as compact text.
pub(crate) fn encode(value: &Value) -> String {
    // `Value`'s Display writes compact JSON and cannot fail.
    value.to_string()
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    text: &str,
    table: &'static str,
    column: &'static str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|source| StoreError::CorruptJson {
        table,
        column,
        source,
    })
}

/// [`StoreError::Invalid`] when `value` is empty.
pub(crate) fn require(value: &str, what: &str) -> Result<()> {
    if value.is_empty() {
        return Err(StoreError::Invalid(format!("{what} must not be empty")));
    }
    Ok(())
}

/// An audit entry with its JSON already encoded, so the encoding happens on the caller's
/// thread and the writer only binds text.
pub(crate) struct EncodedAudit {
    pub(crate) time: i64,
    pub(crate) kind: String,
    pub(crate) session: String,
    pub(crate) call_id: Option<String>,
    pub(crate) principal: String,
    pub(crate) origin: String,
    pub(crate) tool: Option<String>,
    pub(crate) skill: Option<String>,
    pub(crate) argument_digest: Option<String>,
    pub(crate) decisions: String,
    pub(crate) status: String,
    pub(crate) duration_ms: i64,
    pub(crate) cached: bool,
    pub(crate) detail: Option<String>,
}

impl EncodedAudit {
    /// Encodes an entry; an empty session id is [`StoreError::Invalid`].
    pub(crate) fn new(entry: &AuditEntry) -> Result<EncodedAudit> {
        require(&entry.session, "session id")?;
        Ok(EncodedAudit {
            time: entry.time,
            kind: entry.kind.as_str().to_owned(),
            session: entry.session.clone(),
            call_id: entry.call_id.clone(),
            principal: encode(&entry.principal),
            origin: encode(&entry.origin),
            tool: entry.tool.clone(),
            skill: entry.skill.clone(),
            argument_digest: entry.argument_digest.clone(),
            decisions: serde_json::to_string(&entry.decisions).map_err(StoreError::Encode)?,
            status: entry.status.as_str().to_owned(),
            duration_ms: i64::try_from(entry.duration_ms).unwrap_or(i64::MAX),
            cached: entry.cached,
            detail: entry.detail.as_ref().map(encode),
        })
    }
}

/// An audit decision as stored, its step not yet read.
#[derive(serde::Deserialize)]
struct StoredDecision {
    step: String,
    decision: String,
    reason: String,
}

impl StoredDecision {
    /// The decision with its step read; a step this build has no name for is
    /// [`AuditStep::Unrecognized`], its spelling kept at the start of the reason, so one old or
    /// foreign record never fails a query of the log.
    fn read(self) -> AuditDecision {
        let (step, reason) = match self.step.parse::<AuditStep>() {
            Ok(step) => (step, self.reason),
            Err(_) => (
                AuditStep::Unrecognized,
                format!("recorded as step `{}`: {}", self.step, self.reason),
            ),
        };
        AuditDecision {
            step,
            decision: self.decision,
            reason,
        }
    }
}

/// The decisions of an audit record, as stored (JSON text).
pub(crate) fn decisions(text: &str) -> Result<Vec<AuditDecision>> {
    let stored: Vec<StoredDecision> = decode(text, "audit", "decisions")?;
    Ok(stored.into_iter().map(StoredDecision::read).collect())
}
