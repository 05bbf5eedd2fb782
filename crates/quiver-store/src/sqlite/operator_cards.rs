//! The SQL of operator cards: a person's approval given ahead for one exact call, used at most
//! once before it expires, unless an operator revokes it first. The use and the revoke are each
//! one conditional update in the writer's transaction, so of two calls (or a call and a revoke)
//! racing for one card exactly one gets it.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::ops::collect;
use crate::OPERATOR_CARDS_KEPT_MS;
use crate::card_state::not_live;
use crate::codec::{decode, encode, require};
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::OperatorCard;

const COLUMNS: &str = "id, tool, arguments, session_id, created_by, created_at, expires_at, \
     used_at, used_session, used_call, revoked_at, revoked_by";

fn card_row(row: &Row<'_>) -> Result<OperatorCard> {
    let arguments: String = row.get(2)?;
    Ok(OperatorCard {
        id: row.get(0)?,
        tool: row.get(1)?,
        arguments: decode(&arguments, "operator_cards", "arguments")?,
        session: row.get(3)?,
        created_by: row.get(4)?,
        created_at: row.get(5)?,
        expires_at: row.get(6)?,
        used_at: row.get(7)?,
        used_session: row.get(8)?,
        used_call: row.get(9)?,
        revoked_at: row.get(10)?,
        revoked_by: row.get(11)?,
    })
}

pub(crate) fn create(conn: &Connection, card: &OperatorCard) -> Result<OperatorCard> {
    require(&card.id, "operator card id")?;
    require(&card.tool, "operator card tool")?;
    require(&card.created_by, "operator card creator")?;
    if card.expires_at <= card.created_at {
        return Err(StoreError::Invalid(
            "an operator card must expire after it is made".to_owned(),
        ));
    }
    if card.used_at.is_some()
        || card.used_session.is_some()
        || card.used_call.is_some()
        || card.revoked_at.is_some()
        || card.revoked_by.is_some()
    {
        return Err(StoreError::Invalid(
            "a new operator card is unused and not revoked".to_owned(),
        ));
    }
    let taken = conn
        .prepare_cached("SELECT 1 FROM operator_cards WHERE id = ?1")?
        .exists([&card.id])?;
    if taken {
        return Err(StoreError::AlreadyExists {
            what: "operator card",
            id: card.id.clone(),
        });
    }
    conn.prepare_cached(
        "INSERT INTO operator_cards (id, tool, arguments, arguments_digest, session_id, \
         created_by, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        card.id,
        card.tool,
        encode(&card.arguments),
        argument_digest(&card.arguments, &[]),
        card.session,
        card.created_by,
        card.created_at,
        card.expires_at,
    ])?;
    Ok(card.clone())
}

pub(crate) fn list(conn: &Connection, now: i64) -> Result<Vec<OperatorCard>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM operator_cards WHERE COALESCE(used_at, revoked_at, expires_at) > ?1 \
         ORDER BY created_at DESC, id DESC"
    );
    collect(conn, &sql, [now - OPERATOR_CARDS_KEPT_MS], card_row)
}

pub(crate) fn use_card(
    conn: &Connection,
    tool: &str,
    digest: &str,
    session: &str,
    call_id: &str,
    now: i64,
) -> Result<Option<OperatorCard>> {
    let found: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM operator_cards WHERE tool = ?1 AND arguments_digest = ?2 \
             AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?3 \
             AND (session_id IS NULL OR session_id = ?4) ORDER BY created_at, id LIMIT 1",
        )?
        .query_row(params![tool, digest, now, session], |row| row.get(0))
        .optional()?;
    let Some(id) = found else {
        return Ok(None);
    };
    let changed = conn
        .prepare_cached(
            "UPDATE operator_cards SET used_at = ?2, used_session = ?3, used_call = ?4 \
             WHERE id = ?1 AND used_at IS NULL AND revoked_at IS NULL",
        )?
        .execute(params![id, now, session, call_id])?;
    if changed != 1 {
        return Ok(None);
    }
    let sql = format!("SELECT {COLUMNS} FROM operator_cards WHERE id = ?1");
    Ok(collect(conn, &sql, [&id], card_row)?.into_iter().next())
}

pub(crate) fn revoke(conn: &Connection, id: &str, by: &str, now: i64) -> Result<OperatorCard> {
    require(by, "operator card revoker")?;
    let changed = conn
        .prepare_cached(
            "UPDATE operator_cards SET revoked_at = ?2, revoked_by = ?3 \
         WHERE id = ?1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?2",
        )?
        .execute(params![id, now, by])?;
    let sql = format!("SELECT {COLUMNS} FROM operator_cards WHERE id = ?1");
    let card = collect(conn, &sql, [id], card_row)?
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::NotFound {
            what: "operator card",
            id: id.to_owned(),
        })?;
    // Revoked by this update: anything else (used, expired, revoked before) is a conflict.
    if changed == 1 {
        Ok(card)
    } else {
        Err(not_live(&card, now))
    }
}
