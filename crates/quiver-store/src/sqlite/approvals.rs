//! The SQL of the approval queue: cards put in, answered exactly once, expired, withdrawn
//! when their process is gone, and found again by the call they were asked for (a client
//! that cannot ask retries the call once a person has answered).

use rusqlite::{Connection, Row, params};
use serde_json::Value;

use super::ops::{collect, ensure_session};
use crate::codec::{decode, encode, require};
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::{Approval, ApprovalCard, ApprovalStatus, CardQuestion, Decision};

const APPROVAL_COLUMNS: &str = "id, session_id, package, tool, arguments, reason, risk_category, \
     created_at, status, answered_by, answered_at, note, permissions, waiter, question";

fn approval_row(row: &Row<'_>) -> Result<Approval> {
    let arguments: String = row.get(4)?;
    let status: String = row.get(8)?;
    let permissions: String = row.get(12)?;
    let question: String = row.get(14)?;
    Ok(Approval {
        card: ApprovalCard {
            id: row.get(0)?,
            session: row.get(1)?,
            package: row.get(2)?,
            tool: row.get(3)?,
            arguments: decode(&arguments, "approvals", "arguments")?,
            reason: row.get(5)?,
            risk_category: row.get(6)?,
            created_at: row.get(7)?,
            permissions: decode(&permissions, "approvals", "permissions")?,
            waiter: row.get(13)?,
            question: CardQuestion::parse(&question).ok_or_else(|| StoreError::Corrupt {
                table: "approvals",
                detail: format!("unknown question {question:?}"),
            })?,
        },
        status: ApprovalStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            table: "approvals",
            detail: format!("unknown status {status:?}"),
        })?,
        answered_by: row.get(9)?,
        answered_at: row.get(10)?,
        note: row.get(11)?,
    })
}

pub(crate) fn enqueue_approval(conn: &Connection, card: &ApprovalCard) -> Result<Approval> {
    require(&card.id, "approval id")?;
    ensure_session(conn, &card.session)?;
    let taken = conn
        .prepare_cached("SELECT 1 FROM approvals WHERE id = ?1")?
        .exists([&card.id])?;
    if taken {
        return Err(StoreError::AlreadyExists {
            what: "approval",
            id: card.id.clone(),
        });
    }
    conn.prepare_cached(
        "INSERT INTO approvals (id, session_id, package, tool, arguments, reason, risk_category, \
         created_at, status, permissions, waiter, question, arguments_digest) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        card.id,
        card.session,
        card.package,
        card.tool,
        encode(&card.arguments),
        card.reason,
        card.risk_category,
        card.created_at,
        encode(&Value::from(card.permissions.clone())),
        card.waiter,
        card.question.as_str(),
        argument_digest(&card.arguments, &[]),
    ])?;
    Ok(Approval {
        card: card.clone(),
        status: ApprovalStatus::Pending,
        answered_by: None,
        answered_at: None,
        note: None,
    })
}

pub(crate) fn approval(conn: &Connection, id: &str) -> Result<Option<Approval>> {
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1");
    Ok(collect(conn, &sql, [id], approval_row)?.into_iter().next())
}

pub(crate) fn pending_approvals(conn: &Connection, session: Option<&str>) -> Result<Vec<Approval>> {
    match session {
        Some(session) => collect(
            conn,
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
                 AND session_id = ?1 ORDER BY created_at, id"
            ),
            [session],
            approval_row,
        ),
        None => collect(
            conn,
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
                 ORDER BY created_at, id"
            ),
            [],
            approval_row,
        ),
    }
}

/// Moves a pending approval to `status`; exactly once.
pub(crate) fn resolve_approval(
    conn: &Connection,
    id: &str,
    status: ApprovalStatus,
    by: Option<&str>,
    note: Option<&str>,
    now: i64,
) -> Result<Approval> {
    let changed = conn
        .prepare_cached(
            "UPDATE approvals SET status = ?2, answered_by = ?3, answered_at = ?4, note = ?5 \
             WHERE id = ?1 AND status = 'pending'",
        )?
        .execute(params![id, status.as_str(), by, now, note])?;
    let current = approval(conn, id)?.ok_or_else(|| StoreError::NotFound {
        what: "approval",
        id: id.to_owned(),
    })?;
    if changed == 0 {
        return Err(StoreError::AlreadyAnswered {
            id: id.to_owned(),
            status: current.status,
        });
    }
    Ok(current)
}

/// Withdraws every pending approval whose waiter `alive` says is gone; returns them.
pub(crate) fn withdraw_orphaned_approvals(
    conn: &Connection,
    alive: &dyn Fn(&str) -> bool,
    now: i64,
) -> Result<Vec<Approval>> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' \
         AND waiter IS NOT NULL ORDER BY created_at, id"
    );
    let mut withdrawn = Vec::new();
    for approval in collect(conn, &sql, [], approval_row)? {
        if approval.card.waiter.as_deref().is_some_and(|w| !alive(w)) {
            match resolve_approval(
                conn,
                &approval.card.id,
                ApprovalStatus::Withdrawn,
                None,
                Some("the process that asked is gone"),
                now,
            ) {
                Ok(done) => withdrawn.push(done),
                // Answered meanwhile: that answer stands.
                Err(StoreError::AlreadyAnswered { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(withdrawn)
}

/// The status an approver's decision leads to.
pub(crate) fn decided(decision: Decision) -> ApprovalStatus {
    match decision {
        Decision::Approve => ApprovalStatus::Approved,
        Decision::Deny => ApprovalStatus::Denied,
    }
}

/// The newest card asked for the very call `card` describes (same session, question, tool and
/// arguments) whose answer is not used yet: pending, or answered; `None` when there is none.
pub(crate) fn card_for_call(conn: &Connection, card: &ApprovalCard) -> Result<Option<Approval>> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE session_id = ?1 AND tool = ?2 \
         AND arguments_digest = ?3 AND question = ?4 AND used_at IS NULL \
         AND status IN ('pending', 'approved', 'denied') ORDER BY created_at DESC, id DESC LIMIT 1"
    );
    let digest = argument_digest(&card.arguments, &[]);
    let params = params![card.session, card.tool, digest, card.question.as_str()];
    Ok(collect(conn, &sql, params, approval_row)?
        .into_iter()
        .next())
}

/// Marks the answer of card `id` used, once: `false` when it was used already or is not
/// answered.
pub(crate) fn use_answer(conn: &Connection, id: &str, now: i64) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE approvals SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL \
             AND status IN ('approved', 'denied')",
        )?
        .execute(params![id, now])?;
    Ok(changed == 1)
}
