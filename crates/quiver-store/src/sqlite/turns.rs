//! Held turns and shared questions on SQLite ([`crate::turns`]).

use rusqlite::{Connection, OptionalExtension, params};

use super::ops::ensure_session;
use crate::codec::{decode, require};
use crate::error::Result;
use crate::turns::{Claim, HeldTurns, SharedQuestion};

pub(crate) fn held_turns(conn: &Connection, session: &str) -> Result<Option<HeldTurns>> {
    let found: Option<(String, i64)> = conn
        .prepare_cached("SELECT turns, version FROM held_turns WHERE session_id = ?1")?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    found
        .map(|(text, version)| {
            Ok(HeldTurns {
                turns: decode(&text, "held_turns", "turns")?,
                version,
            })
        })
        .transpose()
}

pub(crate) fn put_held_turns(
    conn: &Connection,
    session: &str,
    expected: Option<i64>,
    turns: &str,
    now: i64,
) -> Result<bool> {
    ensure_session(conn, session)?;
    let written = match expected {
        None => conn
            .prepare_cached(
                "INSERT INTO held_turns (session_id, turns, version, updated_at) \
                 VALUES (?1, ?2, 1, ?3) ON CONFLICT (session_id) DO NOTHING",
            )?
            .execute(params![session, turns, now])?,
        Some(version) => conn
            .prepare_cached(
                "UPDATE held_turns SET turns = ?2, version = version + 1, updated_at = ?3 \
                 WHERE session_id = ?1 AND version = ?4",
            )?
            .execute(params![session, turns, now, version])?,
    };
    Ok(written > 0)
}

pub(crate) fn claim_question(
    conn: &Connection,
    session: &str,
    key: &str,
    id: &str,
    ttl_ms: i64,
    now: i64,
) -> Result<Claim> {
    require(key, "question key")?;
    require(id, "question asker")?;
    ensure_session(conn, session)?;
    conn.prepare_cached(
        "INSERT INTO shared_questions (session_id, key, asker, asked_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (session_id, key) DO UPDATE SET asker = excluded.asker, \
         asked_at = excluded.asked_at, expires_at = excluded.expires_at, answer = NULL \
         WHERE shared_questions.expires_at <= ?4 OR shared_questions.answer IS NOT NULL",
    )?
    .execute(params![
        session,
        key,
        id,
        now,
        now.saturating_add(ttl_ms.max(0))
    ])?;
    let stood = question(conn, session, key)?;
    Ok(match stood {
        Some(found) if found.id != id => Claim::Shares(found),
        _ => Claim::Asks,
    })
}

pub(crate) fn answer_question(
    conn: &Connection,
    session: &str,
    key: &str,
    answer: &str,
) -> Result<bool> {
    let set = conn
        .prepare_cached(
            "UPDATE shared_questions SET answer = ?3 \
             WHERE session_id = ?1 AND key = ?2 AND answer IS NULL",
        )?
        .execute(params![session, key, answer])?;
    Ok(set > 0)
}

pub(crate) fn question(
    conn: &Connection,
    session: &str,
    key: &str,
) -> Result<Option<SharedQuestion>> {
    Ok(conn
        .prepare_cached(
            "SELECT asker, answer FROM shared_questions WHERE session_id = ?1 AND key = ?2",
        )?
        .query_row([session, key], |r| {
            Ok(SharedQuestion {
                id: r.get(0)?,
                answer: r.get(1)?,
            })
        })
        .optional()?)
}

pub(crate) fn release_question(
    conn: &Connection,
    session: &str,
    key: &str,
    id: &str,
) -> Result<bool> {
    let deleted = conn
        .prepare_cached(
            "DELETE FROM shared_questions \
             WHERE session_id = ?1 AND key = ?2 AND asker = ?3 AND answer IS NULL",
        )?
        .execute(params![session, key, id])?;
    Ok(deleted > 0)
}
