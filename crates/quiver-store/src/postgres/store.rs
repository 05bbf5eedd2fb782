//! [`Store`] on the [`PostgresStore`]: each method one transaction (a write) or one query (a
//! read) on a pooled connection.

use std::time::Duration;

use serde_json::Value;

use super::ops::{self, SetTable};
use super::{
    PostgresStore, approvals, audit, listen, operator_cards, read, request_states, turns, write,
};
use crate::Store;
use crate::changes::{Change, ChangeKind, Changes};
use crate::codec::{EncodedAudit, encode};
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::{
    Approval, ApprovalCard, ApprovalStatus, AuditEntry, AuditQuery, AuditRecord, Consent, Decision,
    NewSession, OnceApproval, OperatorCard, PresenceStamp, Purged, Session, SessionFilter,
    SessionPresence, TurnStart, now_ms,
};

/// Whether the process a waiter string names may be gone, as far as this machine can tell: a
/// waiter of another machine (another boot id) is left to its own machine, since several
/// instances share this database.
fn gone_here(waiter: &str) -> bool {
    let boot = |w: &str| w.split(':').next().map(str::to_owned);
    let here = crate::waiter::current().and_then(|w| boot(&w));
    here.is_some() && boot(waiter) == here && !crate::waiter::alive(waiter)
}

impl Store for PostgresStore {
    fn create_session(&self, new: &NewSession) -> Result<Session> {
        let new = new.clone();
        write!(self, |tx| ops::create_session(&tx, &new, now_ms()).await)
    }

    fn session(&self, id: &str) -> Result<Option<Session>> {
        let id = id.to_owned();
        read!(self, |c| ops::session(&c, &id).await)
    }

    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        let filter = filter.clone();
        read!(self, |c| ops::list_sessions(&c, &filter).await)
    }

    fn touch_session(&self, id: &str) -> Result<()> {
        let id = id.to_owned();
        write!(self, |tx| ops::touch_session(&tx, &id, now_ms()).await)
    }

    fn set_session_state(&self, id: &str, state: &Value) -> Result<()> {
        let (id, state) = (id.to_owned(), encode(state));
        write!(self, |tx| ops::set_session_state(
            &tx,
            &id,
            &state,
            now_ms()
        )
        .await)
    }

    fn set_operator_value(&self, key: &str, value: &Value, by: &str) -> Result<()> {
        let (key, value, by) = (key.to_owned(), encode(value), by.to_owned());
        let channel = self.channel.clone();
        write!(self, |tx| {
            ops::set_operator_value(&tx, &key, &value, &by, now_ms()).await?;
            let change = Change::new(ChangeKind::Control, &key);
            listen::notify(&tx, &channel, &change).await
        })
    }

    fn operator_values(&self) -> Result<std::collections::BTreeMap<String, Value>> {
        read!(self, |c| ops::operator_values(&c).await)
    }

    fn end_session(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        write!(self, |tx| ops::end_session(&tx, &id, now_ms()).await)
    }

    fn purge_idle_sessions(&self, agent: &str, before: i64, limit: usize) -> Result<Purged> {
        let agent = agent.to_owned();
        write!(self, |tx| {
            ops::purge_idle_sessions(&tx, &agent, before, limit).await
        })
    }

    fn delete_session(&self, id: &str) -> Result<Purged> {
        let ids = vec![id.to_owned()];
        write!(self, |tx| ops::delete_sessions(&tx, &ids).await)
    }

    fn load_tool(&self, session: &str, tool: &str, capacity: usize) -> Result<Vec<String>> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        // A load that would change nothing (the tool is the most recently used already) is
        // not written: one query instead of a transaction on the session's row. It is ordered
        // at its read, before any load that read did not see.
        let (s, t) = (session.clone(), tool.clone());
        if capacity > 0
            && read!(self, |c| ops::load_changes_nothing(&c, &s, &t, capacity)
                .await)?
        {
            return Ok(Vec::new());
        }
        write!(self, |tx| ops::load_tool(&tx, &session, &tool, capacity)
            .await)
    }

    fn loaded_tools(&self, session: &str) -> Result<Vec<String>> {
        let session = session.to_owned();
        read!(self, |c| ops::loaded_tools(&c, &session).await)
    }

    fn touch_tool(&self, session: &str, tool: &str) -> Result<bool> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        write!(self, |tx| ops::touch_tool(&tx, &session, &tool).await)
    }

    fn unload_tool(&self, session: &str, tool: &str) -> Result<bool> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        write!(self, |tx| {
            ops::set_remove(&tx, SetTable::Tools, &session, &tool).await
        })
    }

    fn open_package(&self, session: &str, package: &str) -> Result<bool> {
        let (session, package) = (session.to_owned(), package.to_owned());
        write!(self, |tx| {
            ops::set_add(&tx, SetTable::Packages, &session, &package, now_ms()).await
        })
    }

    fn close_package(&self, session: &str, package: &str) -> Result<bool> {
        let (session, package) = (session.to_owned(), package.to_owned());
        write!(self, |tx| {
            ops::set_remove(&tx, SetTable::Packages, &session, &package).await
        })
    }

    fn opened_packages(&self, session: &str) -> Result<Vec<String>> {
        let session = session.to_owned();
        read!(self, |c| ops::set_list(&c, SetTable::Packages, &session)
            .await)
    }

    fn activate_skill(&self, session: &str, skill: &str) -> Result<bool> {
        let (session, skill) = (session.to_owned(), skill.to_owned());
        write!(self, |tx| {
            ops::set_add(&tx, SetTable::Skills, &session, &skill, now_ms()).await
        })
    }

    fn end_skill(&self, session: &str, skill: &str) -> Result<bool> {
        let (session, skill) = (session.to_owned(), skill.to_owned());
        write!(self, |tx| {
            ops::set_remove(&tx, SetTable::Skills, &session, &skill).await
        })
    }

    fn end_all_skills(&self, session: &str) -> Result<Vec<String>> {
        let session = session.to_owned();
        write!(self, |tx| ops::set_clear(&tx, SetTable::Skills, &session)
            .await)
    }

    fn active_skills(&self, session: &str) -> Result<Vec<String>> {
        let session = session.to_owned();
        read!(self, |c| ops::set_list(&c, SetTable::Skills, &session)
            .await)
    }

    fn presence_stamp(&self, session: &str) -> Result<Option<PresenceStamp>> {
        let session = session.to_owned();
        read!(self, |c| ops::presence_stamp(&c, &session).await)
    }

    fn presence(&self, session: &str) -> Result<SessionPresence> {
        Ok(self.stamped_presence(session)?.1)
    }

    fn stamped_presence(&self, session: &str) -> Result<(Option<PresenceStamp>, SessionPresence)> {
        let session = session.to_owned();
        read!(self, |c| ops::stamped_presence(&c, &session).await)
    }

    fn turn_start(&self, session: &str) -> Result<TurnStart> {
        let id = session.to_owned();
        // four queries sent at once on one connection: one round trip
        read!(self, |c| {
            let (session, operator, consents, once_approvals) = tokio::try_join!(
                ops::session(&c, &id),
                ops::operator_values(&c),
                ops::consents(&c, &id),
                ops::once_approvals(&c, &id),
            )?;
            Ok(TurnStart {
                session,
                operator,
                consents,
                once_approvals,
            })
        })
    }

    fn set_consent(
        &self,
        session: &str,
        package: &str,
        granted: bool,
        by: &str,
    ) -> Result<Consent> {
        let (session, package, by) = (session.to_owned(), package.to_owned(), by.to_owned());
        write!(self, |tx| {
            ops::set_consent(&tx, &session, &package, granted, &by, now_ms()).await
        })
    }

    fn consent(&self, session: &str, package: &str) -> Result<Option<Consent>> {
        let (session, package) = (session.to_owned(), package.to_owned());
        read!(self, |c| ops::consent(&c, &session, &package).await)
    }

    fn consents(&self, session: &str) -> Result<Vec<Consent>> {
        let session = session.to_owned();
        read!(self, |c| ops::consents(&c, &session).await)
    }

    fn grant_once(&self, session: &str, tool: &str, by: &str) -> Result<OnceApproval> {
        let (session, tool, by) = (session.to_owned(), tool.to_owned(), by.to_owned());
        write!(self, |tx| {
            ops::grant_once(&tx, &session, &tool, &by, now_ms()).await
        })
    }

    fn once_approval(&self, session: &str, tool: &str) -> Result<Option<OnceApproval>> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        read!(self, |c| ops::once_approval(&c, &session, &tool).await)
    }

    fn once_approvals(&self, session: &str) -> Result<Vec<OnceApproval>> {
        let session = session.to_owned();
        read!(self, |c| ops::once_approvals(&c, &session).await)
    }

    fn keep_output(&self, session: &str, call_id: &str, text: &str) -> Result<()> {
        let (session, call_id, text) = (session.to_owned(), call_id.to_owned(), text.to_owned());
        write!(self, |tx| {
            ops::keep_output(&tx, &session, &call_id, &text).await
        })
    }

    fn kept_output(&self, session: &str, call_id: &str) -> Result<Option<String>> {
        let (session, call_id) = (session.to_owned(), call_id.to_owned());
        read!(self, |c| ops::kept_output(&c, &session, &call_id).await)
    }

    fn cached_result(&self, key: &str, now: i64) -> Result<Option<Value>> {
        let key = key.to_owned();
        read!(self, |c| ops::cached_result(&c, &key, now).await)
    }

    fn cache_result(&self, key: &str, result: &Value, now: i64, expires_at: i64) -> Result<()> {
        let (key, result) = (key.to_owned(), encode(result));
        write!(self, |tx| {
            ops::cache_result(&tx, &key, &result, now, expires_at).await
        })
    }

    fn enqueue_approval(&self, card: &ApprovalCard) -> Result<Approval> {
        let (card, channel) = (card.clone(), self.channel.clone());
        write!(self, |tx| approvals::enqueue_approval(&tx, &channel, &card)
            .await)
    }

    fn approval(&self, id: &str) -> Result<Option<Approval>> {
        let id = id.to_owned();
        read!(self, |c| approvals::approval(&c, &id).await)
    }

    fn pending_approvals(&self, session: Option<&str>) -> Result<Vec<Approval>> {
        let session = session.map(str::to_owned);
        read!(self, |c| {
            approvals::pending_approvals(&c, session.as_deref()).await
        })
    }

    fn answer_approval(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        note: Option<&str>,
    ) -> Result<Approval> {
        let (id, by, note) = (id.to_owned(), by.to_owned(), note.map(str::to_owned));
        let channel = self.channel.clone();
        let status = match decision {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Deny => ApprovalStatus::Denied,
        };
        write!(self, |tx| {
            approvals::resolve_approval(
                &tx,
                &channel,
                &id,
                status,
                Some(&by),
                note.as_deref(),
                now_ms(),
            )
            .await
        })
    }

    fn expire_approval(&self, id: &str) -> Result<Approval> {
        let (id, channel) = (id.to_owned(), self.channel.clone());
        write!(self, |tx| {
            approvals::resolve_approval(
                &tx,
                &channel,
                &id,
                ApprovalStatus::Expired,
                None,
                None,
                now_ms(),
            )
            .await
        })
    }

    fn withdraw_orphaned_approvals(&self) -> Result<Vec<Approval>> {
        let waited = read!(self, |c| approvals::waited_approvals(&c).await)?;
        let gone: Vec<String> = waited
            .into_iter()
            .filter(|a| a.card.waiter.as_deref().is_some_and(gone_here))
            .map(|a| a.card.id)
            .collect();
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        let channel = self.channel.clone();
        write!(self, |tx| {
            let mut withdrawn = Vec::new();
            for id in &gone {
                let note = Some("the process that asked is gone");
                let now = now_ms();
                match approvals::resolve_approval(
                    &tx,
                    &channel,
                    id,
                    ApprovalStatus::Withdrawn,
                    None,
                    note,
                    now,
                )
                .await
                {
                    Ok(done) => withdrawn.push(done),
                    // Answered meanwhile: that answer stands.
                    Err(StoreError::AlreadyAnswered { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            Ok(withdrawn)
        })
    }

    fn card_for_call(&self, card: &ApprovalCard) -> Result<Option<Approval>> {
        let card = card.clone();
        read!(self, |c| approvals::card_for_call(&c, &card).await)
    }

    fn use_answer(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        write!(self, |tx| approvals::use_answer(&tx, &id, now_ms()).await)
    }

    fn create_operator_card(&self, card: &OperatorCard) -> Result<OperatorCard> {
        let card = card.clone();
        write!(self, |tx| operator_cards::create(&tx, &card).await)
    }

    fn operator_cards(&self, now: i64) -> Result<Vec<OperatorCard>> {
        read!(self, |c| operator_cards::list(&c, now).await)
    }

    fn use_operator_card(
        &self,
        tool: &str,
        arguments: &Value,
        session: &str,
        call_id: &str,
        now: i64,
    ) -> Result<Option<OperatorCard>> {
        let (tool, digest) = (tool.to_owned(), argument_digest(arguments, &[]));
        let (session, call_id) = (session.to_owned(), call_id.to_owned());
        write!(self, |tx| {
            operator_cards::use_card(&tx, &tool, &digest, &session, &call_id, now).await
        })
    }

    fn revoke_operator_card(&self, id: &str, by: &str, now: i64) -> Result<OperatorCard> {
        let (id, by) = (id.to_owned(), by.to_owned());
        write!(self, |tx| operator_cards::revoke(&tx, &id, &by, now).await)
    }

    fn wait_approval(&self, id: &str, timeout: Duration) -> Result<Approval> {
        crate::notify::wait_approval(self, &self.notify, self.poll_interval, id, timeout)
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64> {
        let entry = EncodedAudit::new(entry)?;
        // In a transaction of its own, so a connection lost under it (a restarted server) is
        // retried on a new one: a lone statement sent on a pooled connection that turns out to
        // be dead could not be sent again, and a call's start would be left without its end.
        let id = write!(self, |tx| audit::append_audit(&tx, &entry).await)?;
        // This process only: a notifying commit takes a database-wide lock (module `changes`).
        self.hub.change(ChangeKind::Audit, id.to_string());
        Ok(id)
    }

    fn changes(&self) -> Changes {
        self.hub.subscribe()
    }

    fn announce(&self, change: &Change) -> Result<()> {
        let (channel, change) = (self.channel.clone(), change.clone());
        read!(self, |c| listen::notify(&c, &channel, &change).await)
    }

    fn query_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let query = query.clone();
        read!(self, |c| audit::query_audit(&c, &query).await)
    }

    fn unfinished_calls(&self) -> Result<Vec<AuditRecord>> {
        read!(self, |c| audit::unfinished_calls(&c).await)
    }

    fn spend_request_state(&self, nonce: &str, ttl_ms: i64) -> Result<crate::Spend> {
        let nonce = nonce.to_owned();
        write!(self, |tx| request_states::spend(&tx, &nonce, ttl_ms).await)
    }

    fn finish_request_state(&self, nonce: &str, result: &Value) -> Result<bool> {
        let (nonce, result) = (nonce.to_owned(), encode(result));
        write!(self, |tx| request_states::finish(&tx, &nonce, &result)
            .await)
    }

    fn held_turns(&self, session: &str) -> Result<Option<crate::HeldTurns>> {
        let session = session.to_owned();
        read!(self, |c| turns::held_turns(&c, &session).await)
    }

    fn put_held_turns(&self, session: &str, expected: Option<i64>, held: &Value) -> Result<bool> {
        let (session, held) = (session.to_owned(), encode(held));
        write!(self, |tx| turns::put_held_turns(
            &tx, &session, expected, &held
        )
        .await)
    }

    fn claim_question(
        &self,
        session: &str,
        key: &str,
        id: &str,
        ttl_ms: i64,
    ) -> Result<crate::Claim> {
        let (session, key, id) = (session.to_owned(), key.to_owned(), id.to_owned());
        write!(self, |tx| turns::claim_question(
            &tx, &session, &key, &id, ttl_ms
        )
        .await)
    }

    fn answer_question(&self, session: &str, key: &str, answer: &str) -> Result<bool> {
        let (session, key, answer) = (session.to_owned(), key.to_owned(), answer.to_owned());
        write!(self, |tx| turns::answer_question(
            &tx, &session, &key, &answer
        )
        .await)
    }

    fn question(&self, session: &str, key: &str) -> Result<Option<crate::SharedQuestion>> {
        let (session, key) = (session.to_owned(), key.to_owned());
        read!(self, |c| turns::question(&c, &session, &key).await)
    }

    fn release_question(&self, session: &str, key: &str, id: &str) -> Result<bool> {
        let (session, key, id) = (session.to_owned(), key.to_owned(), id.to_owned());
        write!(self, |tx| turns::release_question(&tx, &session, &key, &id)
            .await)
    }
}
