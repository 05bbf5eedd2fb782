//! A package's consent asked at most once per conversation, whichever instance each request
//! reaches (docs/mcp.md "Consent and approvals through elicitation"): the question is a row in
//! the store, one per conversation and package, claimed by one conditional insert. The request
//! that claims it asks its client; a request that finds it claimed shares it: it asks nobody
//! and waits for the answer the asker records there. Whichever request brings the answer (the
//! asker, or a rerun of its call on another instance from the answers sealed in its state)
//! records it, so an answer to either resolves both. An approval is each call's own and is not
//! shared.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_runtime::Runtime;
use quiver_runtime::approver::{Answer, Approver, Card, Question};
use quiver_store::Claim;

use super::questions::{REQUEST_STATE_TTL, nonce};

/// How often a request sharing a question looks for its answer.
const POLL: Duration = Duration::from_millis(100);

/// How long a claimed question stays claimed: as long as its asker may wait for the answer (a
/// held call's 15 minutes). Past it the next request asks anew.
const OPEN: Duration = Duration::from_secs(REQUEST_STATE_TTL);

/// The key of the question `card` asks when it is shared by a conversation's requests: consent
/// to its package. `None` for an approval.
pub(super) fn shared_key(card: &Card) -> Option<String> {
    (card.question == Question::Consent).then(|| format!("consent:{}", card.package))
}

/// What an answer records for the requests sharing its question; `None` when it is no answer
/// (dismissed, timed out, handed on): nothing is recorded and the next request asks anew.
pub(super) fn recorded(answer: Answer) -> Option<&'static str> {
    match answer {
        Answer::Allow | Answer::AllowForSession => Some("granted"),
        Answer::Deny => Some("denied"),
        Answer::TimedOut | Answer::Unanswered | Answer::Pending => None,
    }
}

/// The answer a request sharing a question takes from what was recorded.
pub(super) fn shared_answer(recorded: &str) -> Answer {
    match recorded {
        "granted" => Answer::AllowForSession,
        "denied" => Answer::Deny,
        _ => Answer::Unanswered,
    }
}

/// The conversation's shared questions, through the runtime's store.
#[derive(Clone)]
pub(super) struct SharedQuestions {
    pub(super) runtime: Arc<Runtime>,
    /// How long a request sharing a question waits for its answer.
    pub(super) wait: Duration,
}

impl SharedQuestions {
    /// Asks `card` with `ask`, unless another request of the conversation asks the same
    /// question now: then nothing is asked, and the answer is the one recorded for that
    /// question within `wait` ([`Answer::Unanswered`] when there is none by then: nothing is
    /// recorded, the call does not run, and the next call asks again). The answer this request
    /// got is recorded for those sharing it. A store that cannot be read asks (asking twice is
    /// the lesser harm).
    pub(super) fn ask(&self, card: &Card, ask: impl FnOnce() -> Answer) -> Answer {
        let Some(key) = shared_key(card) else {
            return ask();
        };
        let id = nonce();
        match self.runtime.claim_question(&card.session, &key, &id, OPEN) {
            Ok(Claim::Asks) => {
                let answer = ask();
                self.settle(card, &key, &id, answer);
                answer
            }
            Ok(Claim::Shares(asked)) => {
                tracing::debug!(session = %card.session, %key, "shares a question another request asks");
                self.share(card, &key, &asked.id)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim a shared question; asking");
                ask()
            }
        }
    }

    /// Records `answer`, which this request brought for `card` (an answer sealed in its
    /// state), for the requests sharing its question.
    pub(super) fn answered(&self, card: &Card, answer: Answer) {
        if let (Some(key), Some(recorded)) = (shared_key(card), recorded(answer))
            && let Err(error) = self.runtime.answer_question(&card.session, &key, recorded)
        {
            tracing::warn!(%error, "cannot record a shared question's answer");
        }
    }

    fn settle(&self, card: &Card, key: &str, id: &str, answer: Answer) {
        let done = match recorded(answer) {
            Some(recorded) => self.runtime.answer_question(&card.session, key, recorded),
            None => self.runtime.release_question(&card.session, key, id),
        };
        if let Err(error) = done {
            tracing::warn!(%error, "cannot settle a shared question");
        }
    }

    /// Waits for the answer to the question `asker` asks.
    fn share(&self, card: &Card, key: &str, asker: &str) -> Answer {
        let until = Instant::now() + self.wait;
        loop {
            match self.runtime.shared_question(&card.session, key) {
                Ok(Some(asked)) if asked.id == asker => {
                    if let Some(recorded) = &asked.answer {
                        return shared_answer(recorded);
                    }
                }
                // Withdrawn (its asker got no answer) or asked anew: nobody answered.
                Ok(_) => return Answer::Unanswered,
                Err(error) => {
                    tracing::warn!(%error, "cannot read a shared question");
                    return Answer::Unanswered;
                }
            }
            if Instant::now() >= until {
                return Answer::Unanswered;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// An approver that asks a client at once (a 2025-11-25 form), sharing a package's consent
/// question with the conversation's other requests.
pub(super) struct SharedAsk {
    pub(super) inner: Arc<dyn Approver>,
    pub(super) shared: SharedQuestions,
}

impl Approver for SharedAsk {
    fn decide(&self, card: &Card) -> Answer {
        self.shared.ask(card, || self.inner.decide(card))
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        self.inner.answer_question(question)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_an_answer_records_and_what_a_sharer_takes() {
        // (answer, recorded, what a request sharing it takes)
        let cases = [
            (Answer::Allow, Some("granted"), Answer::AllowForSession),
            (
                Answer::AllowForSession,
                Some("granted"),
                Answer::AllowForSession,
            ),
            (Answer::Deny, Some("denied"), Answer::Deny),
            (Answer::TimedOut, None, Answer::Unanswered),
            (Answer::Unanswered, None, Answer::Unanswered),
            (Answer::Pending, None, Answer::Unanswered),
        ];
        for (answer, stored, taken) in cases {
            assert_eq!(recorded(answer), stored, "{answer:?}");
            assert_eq!(shared_answer(stored.unwrap_or("")), taken, "{answer:?}");
        }
    }

    #[test]
    fn only_consent_is_shared() {
        let mut card = Card {
            question: Question::Consent,
            session: "s".into(),
            package: "travel".into(),
            tool: "travel.plan".into(),
            arguments: serde_json::json!({}),
            reasons: vec![],
            risk_categories: vec![],
            needs_person: false,
            permissions: vec![],
        };
        assert_eq!(shared_key(&card).as_deref(), Some("consent:travel"));
        card.question = Question::Approval;
        assert_eq!(shared_key(&card), None);
    }
}
