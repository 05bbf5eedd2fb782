//! Held turns and shared questions on PostgreSQL ([`crate::turns`]), on the database's clock.

use deadpool_postgres::GenericClient;

use super::ops::{ensure_session, exec, row};
use super::workflow_ops::DB_NOW;
use crate::codec::{decode, require};
use crate::error::Result;
use crate::turns::{Claim, HeldTurns, SharedQuestion};

pub(super) async fn held_turns<C: GenericClient>(
    c: &C,
    session: &str,
) -> Result<Option<HeldTurns>> {
    let found = row(
        c,
        "SELECT turns, version FROM held_turns WHERE session_id = $1",
        &[&session],
    )
    .await?;
    let Some(found) = found else {
        return Ok(None);
    };
    let text: String = found.try_get(0)?;
    Ok(Some(HeldTurns {
        turns: decode(&text, "held_turns", "turns")?,
        version: found.try_get(1)?,
    }))
}

pub(super) async fn put_held_turns<C: GenericClient>(
    c: &C,
    session: &str,
    expected: Option<i64>,
    turns: &str,
) -> Result<bool> {
    ensure_session(c, session).await?;
    // A concurrent writer's uncommitted insert or update makes these wait for its commit;
    // then the insert does nothing, and the update finds the version moved: one writer wins.
    let written = match expected {
        None => {
            let insert = format!(
                "INSERT INTO held_turns (session_id, turns, version, updated_at) \
                 VALUES ($1, $2, 1, {DB_NOW}) ON CONFLICT (session_id) DO NOTHING"
            );
            exec(c, &insert, &[&session, &turns]).await?
        }
        Some(version) => {
            let update = format!(
                "UPDATE held_turns SET turns = $2, version = version + 1, \
                 updated_at = {DB_NOW} WHERE session_id = $1 AND version = $3"
            );
            exec(c, &update, &[&session, &turns, &version]).await?
        }
    };
    Ok(written > 0)
}

pub(super) async fn claim_question<C: GenericClient>(
    c: &C,
    session: &str,
    key: &str,
    id: &str,
    ttl_ms: i64,
) -> Result<Claim> {
    require(key, "question key")?;
    require(id, "question asker")?;
    ensure_session(c, session).await?;
    let claim = format!(
        "INSERT INTO shared_questions (session_id, key, asker, asked_at, expires_at) \
         VALUES ($1, $2, $3, {DB_NOW}, {DB_NOW} + $4) \
         ON CONFLICT (session_id, key) DO UPDATE SET asker = excluded.asker, \
         asked_at = excluded.asked_at, expires_at = excluded.expires_at, answer = NULL \
         WHERE shared_questions.expires_at <= {DB_NOW} OR shared_questions.answer IS NOT NULL"
    );
    exec(c, &claim, &[&session, &key, &id, &ttl_ms.max(0)]).await?;
    Ok(match question(c, session, key).await? {
        Some(found) if found.id != id => Claim::Shares(found),
        _ => Claim::Asks,
    })
}

pub(super) async fn answer_question<C: GenericClient>(
    c: &C,
    session: &str,
    key: &str,
    answer: &str,
) -> Result<bool> {
    let set = exec(
        c,
        "UPDATE shared_questions SET answer = $3 \
         WHERE session_id = $1 AND key = $2 AND answer IS NULL",
        &[&session, &key, &answer],
    )
    .await?;
    Ok(set > 0)
}

pub(super) async fn question<C: GenericClient>(
    c: &C,
    session: &str,
    key: &str,
) -> Result<Option<SharedQuestion>> {
    let found = row(
        c,
        "SELECT asker, answer FROM shared_questions WHERE session_id = $1 AND key = $2",
        &[&session, &key],
    )
    .await?;
    found
        .map(|r| {
            Ok(SharedQuestion {
                id: r.try_get(0)?,
                answer: r.try_get(1)?,
            })
        })
        .transpose()
}

pub(super) async fn release_question<C: GenericClient>(
    c: &C,
    session: &str,
    key: &str,
    id: &str,
) -> Result<bool> {
    let deleted = exec(
        c,
        "DELETE FROM shared_questions \
         WHERE session_id = $1 AND key = $2 AND asker = $3 AND answer IS NULL",
        &[&session, &key, &id],
    )
    .await?;
    Ok(deleted > 0)
}
