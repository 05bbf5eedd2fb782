//! Spent request states on PostgreSQL ([`crate::request_states`]), on the database's clock.

use deadpool_postgres::GenericClient;

use super::ops::{exec, row};
use super::workflow_ops::DB_NOW;
use crate::codec::{decode, require};
use crate::error::Result;
use crate::request_states::Spend;

pub(super) async fn spend<C: GenericClient>(c: &C, nonce: &str, ttl_ms: i64) -> Result<Spend> {
    require(nonce, "request state nonce")?;
    let prune = format!("DELETE FROM request_states WHERE expires_at <= {DB_NOW}");
    exec(c, &prune, &[]).await?;
    // A concurrent spender's uncommitted row makes this insert wait for its commit, then do
    // nothing: exactly one spender inserts.
    let insert = format!(
        "INSERT INTO request_states (nonce, spent_at, expires_at) \
         VALUES ($1, {DB_NOW}, {DB_NOW} + $2) ON CONFLICT (nonce) DO NOTHING"
    );
    if exec(c, &insert, &[&nonce, &ttl_ms.max(0)]).await? > 0 {
        return Ok(Spend::First);
    }
    let found = row(
        c,
        "SELECT result FROM request_states WHERE nonce = $1",
        &[&nonce],
    )
    .await?;
    let result: Option<String> = match found {
        Some(r) => r.try_get(0)?,
        None => None,
    };
    match result {
        Some(text) => Ok(Spend::Finished(decode(&text, "request_states", "result")?)),
        None => Ok(Spend::Running),
    }
}

pub(super) async fn finish<C: GenericClient>(c: &C, nonce: &str, result: &str) -> Result<bool> {
    let set = exec(
        c,
        "UPDATE request_states SET result = $1 WHERE nonce = $2 AND result IS NULL",
        &[&result, &nonce],
    )
    .await?;
    Ok(set > 0)
}
