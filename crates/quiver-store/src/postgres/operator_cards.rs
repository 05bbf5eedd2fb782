//! The PostgreSQL SQL of operator cards (see the SQLite twin): the use is one conditional
//! `UPDATE ... WHERE used_at IS NULL` on the oldest matching card, taken `FOR UPDATE SKIP
//! LOCKED`, so of two calls racing for one card (in any instances) exactly one gets it. A revoke
//! is one conditional `UPDATE` of a live card: of a use and a revoke racing, one wins.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::ops::{exec, row, rows};
use crate::OPERATOR_CARDS_KEPT_MS;
use crate::card_state::not_live;
use crate::codec::{decode, encode, require};
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::OperatorCard;

const COLUMNS: &str = "id, tool, arguments, session_id, created_by, created_at, expires_at, \
     used_at, used_session, used_call, revoked_at, revoked_by";

fn card_row(r: &Row) -> Result<OperatorCard> {
    let arguments: String = r.try_get(2)?;
    Ok(OperatorCard {
        id: r.try_get(0)?,
        tool: r.try_get(1)?,
        arguments: decode(&arguments, "operator_cards", "arguments")?,
        session: r.try_get(3)?,
        created_by: r.try_get(4)?,
        created_at: r.try_get(5)?,
        expires_at: r.try_get(6)?,
        used_at: r.try_get(7)?,
        used_session: r.try_get(8)?,
        used_call: r.try_get(9)?,
        revoked_at: r.try_get(10)?,
        revoked_by: r.try_get(11)?,
    })
}

pub(super) async fn create<C: GenericClient>(c: &C, card: &OperatorCard) -> Result<OperatorCard> {
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
    let inserted = exec(
        c,
        "INSERT INTO operator_cards (id, tool, arguments, arguments_digest, session_id, \
         created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (id) DO NOTHING",
        &[
            &card.id,
            &card.tool,
            &encode(&card.arguments),
            &argument_digest(&card.arguments, &[]),
            &card.session,
            &card.created_by,
            &card.created_at,
            &card.expires_at,
        ],
    )
    .await?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            what: "operator card",
            id: card.id.clone(),
        });
    }
    Ok(card.clone())
}

pub(super) async fn list<C: GenericClient>(c: &C, now: i64) -> Result<Vec<OperatorCard>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM operator_cards WHERE COALESCE(used_at, revoked_at, expires_at) > $1 \
         ORDER BY created_at DESC, id DESC"
    );
    rows(c, &sql, &[&(now - OPERATOR_CARDS_KEPT_MS)])
        .await?
        .iter()
        .map(card_row)
        .collect()
}

pub(super) async fn use_card<C: GenericClient>(
    c: &C,
    tool: &str,
    digest: &str,
    session: &str,
    call_id: &str,
    now: i64,
) -> Result<Option<OperatorCard>> {
    let sql = format!(
        "UPDATE operator_cards SET used_at = $4, used_session = $3, used_call = $5 \
         WHERE id = (SELECT id FROM operator_cards WHERE tool = $1 AND arguments_digest = $2 \
         AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $4 \
         AND (session_id IS NULL OR session_id = $3) \
         ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
         AND used_at IS NULL AND revoked_at IS NULL \
         RETURNING {COLUMNS}"
    );
    row(c, &sql, &[&tool, &digest, &session, &now, &call_id])
        .await?
        .as_ref()
        .map(card_row)
        .transpose()
}

pub(super) async fn revoke<C: GenericClient>(
    c: &C,
    id: &str,
    by: &str,
    now: i64,
) -> Result<OperatorCard> {
    require(by, "operator card revoker")?;
    let sql = format!(
        "UPDATE operator_cards SET revoked_at = $2, revoked_by = $3 \
         WHERE id = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2 \
         RETURNING {COLUMNS}"
    );
    if let Some(revoked) = row(c, &sql, &[&id, &now, &by]).await? {
        return card_row(&revoked);
    }
    // Not revoked by this update: no such card, or one no longer live.
    let sql = format!("SELECT {COLUMNS} FROM operator_cards WHERE id = $1");
    match row(c, &sql, &[&id]).await? {
        Some(found) => Err(not_live(&card_row(&found)?, now)),
        None => Err(StoreError::NotFound {
            what: "operator card",
            id: id.to_owned(),
        }),
    }
}
