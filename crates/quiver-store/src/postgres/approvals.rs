//! The PostgreSQL SQL of the approval queue: every resolution is one conditional
//! `UPDATE ... WHERE status = 'pending' RETURNING`, so of two answers (from two processes)
//! exactly one is recorded, and an answer is used at most once the same way.

use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;

use super::listen::notify;
use super::ops::{ensure_session, exec, row, rows};
use crate::changes::{Change, ChangeKind};
use crate::codec::{decode, encode, require};
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::{Approval, ApprovalCard, ApprovalStatus, CardQuestion};

const APPROVAL_COLUMNS: &str = "id, session_id, package, tool, arguments, reason, risk_category, \
     created_at, status, answered_by, answered_at, note, permissions, waiter, question";

fn approval_row(r: &Row) -> Result<Approval> {
    let arguments: String = r.try_get(4)?;
    let status: String = r.try_get(8)?;
    let permissions: String = r.try_get(12)?;
    let question: String = r.try_get(14)?;
    Ok(Approval {
        card: ApprovalCard {
            id: r.try_get(0)?,
            session: r.try_get(1)?,
            package: r.try_get(2)?,
            tool: r.try_get(3)?,
            arguments: decode(&arguments, "approvals", "arguments")?,
            reason: r.try_get(5)?,
            risk_category: r.try_get(6)?,
            created_at: r.try_get(7)?,
            permissions: decode(&permissions, "approvals", "permissions")?,
            waiter: r.try_get(13)?,
            question: CardQuestion::parse(&question).ok_or_else(|| StoreError::Corrupt {
                table: "approvals",
                detail: format!("unknown question {question:?}"),
            })?,
        },
        status: ApprovalStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            table: "approvals",
            detail: format!("unknown status {status:?}"),
        })?,
        answered_by: r.try_get(9)?,
        answered_at: r.try_get(10)?,
        note: r.try_get(11)?,
    })
}

pub(super) async fn enqueue_approval<C: GenericClient>(
    c: &C,
    channel: &str,
    card: &ApprovalCard,
) -> Result<Approval> {
    require(&card.id, "approval id")?;
    ensure_session(c, &card.session).await?;
    let inserted = exec(
        c,
        "INSERT INTO approvals (id, session_id, package, tool, arguments, reason, risk_category, \
         created_at, status, permissions, waiter, question, arguments_digest) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11, $12) \
         ON CONFLICT (id) DO NOTHING",
        &[
            &card.id,
            &card.session,
            &card.package,
            &card.tool,
            &encode(&card.arguments),
            &card.reason,
            &card.risk_category,
            &card.created_at,
            &encode(&Value::from(card.permissions.clone())),
            &card.waiter,
            &card.question.as_str(),
            &argument_digest(&card.arguments, &[]),
        ],
    )
    .await?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            what: "approval",
            id: card.id.clone(),
        });
    }
    notify(c, channel, &Change::new(ChangeKind::Approval, &card.id)).await?;
    Ok(Approval {
        card: card.clone(),
        status: ApprovalStatus::Pending,
        answered_by: None,
        answered_at: None,
        note: None,
    })
}

pub(super) async fn approval<C: GenericClient>(c: &C, id: &str) -> Result<Option<Approval>> {
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1");
    row(c, &sql, &[&id])
        .await?
        .as_ref()
        .map(approval_row)
        .transpose()
}

pub(super) async fn pending_approvals<C: GenericClient>(
    c: &C,
    session: Option<&str>,
) -> Result<Vec<Approval>> {
    let found = match session {
        Some(session) => {
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
                 AND session_id = $1 ORDER BY created_at, id"
            );
            rows(c, &sql, &[&session]).await?
        }
        None => {
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
                 ORDER BY created_at, id"
            );
            rows(c, &sql, &[]).await?
        }
    };
    found.iter().map(approval_row).collect()
}

/// Moves a pending approval to `status`, exactly once: the conditional update returns the row
/// only to the one transaction that moved it.
pub(super) async fn resolve_approval<C: GenericClient>(
    c: &C,
    channel: &str,
    id: &str,
    status: ApprovalStatus,
    by: Option<&str>,
    note: Option<&str>,
    now: i64,
) -> Result<Approval> {
    let sql = format!(
        "UPDATE approvals SET status = $2, answered_by = $3, answered_at = $4, note = $5 \
         WHERE id = $1 AND status = 'pending' RETURNING {APPROVAL_COLUMNS}"
    );
    if let Some(moved) = row(c, &sql, &[&id, &status.as_str(), &by, &now, &note]).await? {
        // Sent on commit: waiters in other processes wake at once (see `listen`).
        notify(c, channel, &Change::new(ChangeKind::Approval, id)).await?;
        return approval_row(&moved);
    }
    match approval(c, id).await? {
        Some(current) => Err(StoreError::AlreadyAnswered {
            id: id.to_owned(),
            status: current.status,
        }),
        None => Err(StoreError::NotFound {
            what: "approval",
            id: id.to_owned(),
        }),
    }
}

/// The pending approvals that have a waiter, oldest first.
pub(super) async fn waited_approvals<C: GenericClient>(c: &C) -> Result<Vec<Approval>> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
         AND waiter IS NOT NULL ORDER BY created_at, id"
    );
    rows(c, &sql, &[]).await?.iter().map(approval_row).collect()
}

pub(super) async fn card_for_call<C: GenericClient>(
    c: &C,
    card: &ApprovalCard,
) -> Result<Option<Approval>> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE session_id = $1 AND tool = $2 \
         AND arguments_digest = $3 AND question = $4 AND used_at IS NULL \
         AND status IN ('pending', 'approved', 'denied') ORDER BY created_at DESC, id DESC LIMIT 1"
    );
    let digest = argument_digest(&card.arguments, &[]);
    row(
        c,
        &sql,
        &[&card.session, &card.tool, &digest, &card.question.as_str()],
    )
    .await?
    .as_ref()
    .map(approval_row)
    .transpose()
}

pub(super) async fn use_answer<C: GenericClient>(c: &C, id: &str, now: i64) -> Result<bool> {
    let changed = exec(
        c,
        "UPDATE approvals SET used_at = $2 WHERE id = $1 AND used_at IS NULL \
         AND status IN ('approved', 'denied')",
        &[&id, &now],
    )
    .await?;
    Ok(changed == 1)
}
