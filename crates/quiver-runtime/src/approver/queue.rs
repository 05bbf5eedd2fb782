//! The console's queue: a card stored as a pending approval and answered later (in the
//! console or with `quiver approvals approve`), either awaited by the caller up to a timeout
//! ([`QueueApprover`]), or, for a client that cannot ask and must not be kept waiting, left
//! in the queue while the call stops at once, its retry finding the answer
//! ([`RetryApprover`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quiver_store::{ApprovalCard, ApprovalStatus, CardQuestion, Store};

use super::{Answer, Approver, Card, Question};

/// A queue: the card is stored as a pending approval and the answer awaited (given in the
/// console or with `quiver approve`), up to a timeout.
pub struct QueueApprover {
    store: Arc<dyn Store>,
    timeout: Duration,
}

impl QueueApprover {
    /// A queue on `store`, waiting at most `timeout` for each answer. Withdraws the pending
    /// cards whose caller died (a killed `quiver call` or `quiver serve`): nothing would run
    /// on their answer.
    pub fn new(store: Arc<dyn Store>, timeout: Duration) -> Self {
        if let Ok(withdrawn) = store.withdraw_orphaned_approvals() {
            for approval in withdrawn {
                tracing::warn!(id = %approval.card.id, tool = %approval.card.tool, "withdrew an approval card whose caller is gone");
            }
        }
        Self { store, timeout }
    }
}

impl Approver for QueueApprover {
    fn decide(&self, card: &Card) -> Answer {
        let stored = stored_card(card, quiver_store::waiter::current());
        let Ok(pending) = self.store.enqueue_approval(&stored) else {
            return Answer::Deny;
        };
        match self.store.wait_approval(&pending.card.id, self.timeout) {
            Ok(approval) => match approval.status {
                ApprovalStatus::Approved => Answer::Allow,
                ApprovalStatus::Denied => Answer::Deny,
                // Withdrawn while this process waited: it was taken for dead; nothing runs.
                ApprovalStatus::Withdrawn => Answer::Unanswered,
                ApprovalStatus::Pending | ApprovalStatus::Expired => {
                    // Nobody answered: the card expires so a late answer cannot run the call.
                    let _ = self.store.expire_approval(&pending.card.id);
                    Answer::TimedOut
                }
            },
            Err(_) => Answer::Unanswered,
        }
    }
}

/// The card as the queue keeps it, waited on by `waiter` (`None`: nobody waits; it stays
/// pending until answered or expired).
fn stored_card(card: &Card, waiter: Option<String>) -> ApprovalCard {
    ApprovalCard {
        id: crate::ids::new_id("apr"),
        session: card.session.clone(),
        package: card.package.clone(),
        tool: card.tool.clone(),
        arguments: card.arguments.clone(),
        reason: card.reasons.join("; "),
        risk_category: card.risk_categories.first().cloned(),
        created_at: quiver_store::now_ms(),
        permissions: card.permissions.iter().map(ToString::to_string).collect(),
        waiter,
        question: match card.question {
            Question::Consent => CardQuestion::Consent,
            Question::Approval => CardQuestion::Approval,
        },
    }
}

/// How long a card left for a retry stays answerable: past it, the retry asks again.
pub const RETRY_CARD_TTL: Duration = Duration::from_secs(15 * 60);

/// For a client that cannot ask and must not be kept waiting: the card is left in the queue
/// and the call stops at once ([`Answer::Pending`]: nothing runs, nothing is refused); the
/// same call retried in the same conversation (same tool and arguments) finds the card and,
/// once a person has answered it within [`RETRY_CARD_TTL`], uses the answer exactly once. An
/// approved consent card is consent for the conversation; an approved call, one run.
pub struct RetryApprover {
    store: Arc<dyn Store>,
    asked: Mutex<Vec<ApprovalCard>>,
}

impl RetryApprover {
    /// An approver over `store`'s queue.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// The cards this approver left waiting for a person, in the order asked.
    pub fn waiting(&self) -> Vec<ApprovalCard> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn answer_of(&self, card: &Card, found: &quiver_store::Approval) -> Option<Answer> {
        let answer = match found.status {
            ApprovalStatus::Approved if card.question == Question::Consent => {
                Answer::AllowForSession
            }
            ApprovalStatus::Approved => Answer::Allow,
            ApprovalStatus::Denied => Answer::Deny,
            _ => return None,
        };
        // Exactly once: a second retry of the same approved call asks again.
        match self.store.use_answer(&found.card.id) {
            Ok(true) => Some(answer),
            _ => None,
        }
    }
}

impl Approver for RetryApprover {
    fn decide(&self, card: &Card) -> Answer {
        let wanted = stored_card(card, None);
        let fresh_since =
            wanted.created_at - i64::try_from(RETRY_CARD_TTL.as_millis()).unwrap_or(i64::MAX);
        let found = match self.store.card_for_call(&wanted) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "cannot read the approval queue");
                return Answer::Unanswered;
            }
        };
        let waiting = match found {
            Some(found) if found.card.created_at >= fresh_since => {
                if let Some(answer) = self.answer_of(card, &found) {
                    return answer;
                }
                (found.status == ApprovalStatus::Pending).then_some(found.card)
            }
            Some(stale) => {
                if stale.status == ApprovalStatus::Pending {
                    let _ = self.store.expire_approval(&stale.card.id);
                }
                None
            }
            None => None,
        };
        let waiting = match waiting {
            Some(card) => card,
            None => match self.store.enqueue_approval(&wanted) {
                Ok(queued) => queued.card,
                Err(error) => {
                    tracing::warn!(%error, "cannot queue an approval card");
                    return Answer::Unanswered;
                }
            },
        };
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(waiting);
        Answer::Pending
    }
}

impl RetryApprover {
    /// Waits until a person answers `id`, the card this approver left waiting for `card`, at
    /// most `wait` and never past the card's [`RETRY_CARD_TTL`], and uses the answer exactly
    /// once. Nobody answered in time: the card expires (a late answer runs nothing) and the
    /// answer is [`Answer::TimedOut`]. For a client that showed the person where to answer
    /// and keeps the call open meanwhile.
    pub fn wait_for(&self, card: &Card, id: &str, wait: Duration) -> Answer {
        self.poll(card, id, wait).unwrap_or_else(|| {
            let _ = self.store.expire_approval(id);
            Answer::TimedOut
        })
    }

    /// Looks at `id`, the card this approver left waiting for `card`, for at most `wait`: its
    /// answer, used exactly once, when a person gave it by then; `None` when it is still
    /// open (it stays open: the caller may look again). Past the card's [`RETRY_CARD_TTL`] it
    /// expires (a late answer runs nothing): [`Answer::TimedOut`]. An answer already used by
    /// another retry of the call, or a card withdrawn: [`Answer::Unanswered`]. For a client
    /// that showed the person where to answer and comes back for the answer.
    pub fn poll(&self, card: &Card, id: &str, wait: Duration) -> Option<Answer> {
        let created = self
            .waiting()
            .iter()
            .find(|w| w.id == id)
            .map_or(quiver_store::now_ms(), |w| w.created_at);
        let ttl_ms = i64::try_from(RETRY_CARD_TTL.as_millis()).unwrap_or(i64::MAX);
        let left = |now: i64| u64::try_from(created.saturating_add(ttl_ms) - now).unwrap_or(0);
        let wait = wait.min(Duration::from_millis(left(quiver_store::now_ms())));
        let found = match self.store.wait_approval(id, wait) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "cannot read the approval queue");
                return Some(Answer::Unanswered);
            }
        };
        if let Some(answer) = self.answer_of(card, &found) {
            return Some(answer);
        }
        match found.status {
            ApprovalStatus::Pending if left(quiver_store::now_ms()) > 0 => None,
            ApprovalStatus::Pending | ApprovalStatus::Expired => {
                let _ = self.store.expire_approval(id);
                Some(Answer::TimedOut)
            }
            _ => Some(Answer::Unanswered),
        }
    }
}
