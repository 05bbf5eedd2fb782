//! Spent request states on SQLite ([`crate::request_states`]).

use rusqlite::{Connection, OptionalExtension, params};

use crate::codec::{decode, require};
use crate::error::Result;
use crate::request_states::Spend;

pub(crate) fn spend(conn: &Connection, nonce: &str, ttl_ms: i64, now: i64) -> Result<Spend> {
    require(nonce, "request state nonce")?;
    conn.prepare_cached("DELETE FROM request_states WHERE expires_at <= ?1")?
        .execute([now])?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO request_states (nonce, spent_at, expires_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (nonce) DO NOTHING",
        )?
        .execute(params![nonce, now, now.saturating_add(ttl_ms.max(0))])?;
    if inserted > 0 {
        return Ok(Spend::First);
    }
    let result: Option<Option<String>> = conn
        .prepare_cached("SELECT result FROM request_states WHERE nonce = ?1")?
        .query_row([nonce], |r| r.get(0))
        .optional()?;
    match result.flatten() {
        Some(text) => Ok(Spend::Finished(decode(&text, "request_states", "result")?)),
        None => Ok(Spend::Running),
    }
}

pub(crate) fn finish(conn: &Connection, nonce: &str, result: &str) -> Result<bool> {
    let set = conn
        .prepare_cached(
            "UPDATE request_states SET result = ?1 WHERE nonce = ?2 AND result IS NULL",
        )?
        .execute(params![result, nonce])?;
    Ok(set > 0)
}
