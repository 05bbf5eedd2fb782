//! Questions answered on the console's page of their card, the client showing the link
//! (URL-mode elicitation): which way a client is asked, the approver that leaves the card in
//! the queue, shows its page and waits for the person's answer (2025-11-25), and the one that
//! returns the page in `input_required` and looks at the card again on each retry
//! (2026-07-28).

use std::sync::Arc;
use std::time::Duration;

use quiver_runtime::approver::{Answer, Approver, Card, RetryApprover};
use quiver_store::ApprovalCard;

use super::suspended::{Reply, Suspender};

/// How long the retry of a 2026-07-28 client that went to the card's page waits for the
/// person's answer there before it is returned the same page again: a few seconds, never a
/// silent wait a client would time out on.
pub const LINK_RETRY_WAIT: Duration = Duration::from_secs(3);

/// How a client is asked a consent or approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A form in the client, answered while the call waits (2025-11-25 `elicitation/create`).
    Form,
    /// A form returned in `input_required`, answered by the client's retry (2026-07-28).
    Deferred,
    /// The card's console page, shown by the client (URL-mode elicitation); the call waits
    /// for the person's answer there.
    Link,
    /// The card's console page returned in `input_required` (URL-mode elicitation,
    /// 2026-07-28); the client's retry looks at the card again.
    DeferredLink,
    /// No question in the client: the call is answered at once with where a person answers
    /// it, and its retry runs once they have.
    AnswerAt,
}

/// Which way to ask a client of the `stateless` (2026-07-28) era or not, that declared form
/// and/or URL elicitation, when the console runs (`console`) or not. A form is preferred when
/// both are declared: it is answered where the person already is, and a card only a person
/// may answer offers no more there than in the console (allow once or deny). URL mode needs
/// the console, whose page is the link: without it, a client with URL mode only is answered
/// at once.
pub fn way_to_ask(stateless: bool, form: bool, url: bool, console: bool) -> Way {
    match (stateless, form, url && console) {
        (true, true, _) => Way::Deferred,
        (false, true, _) => Way::Form,
        (false, false, true) => Way::Link,
        (true, false, true) => Way::DeferredLink,
        _ => Way::AnswerAt,
    }
}

/// The client side of URL mode: shows a link and says when the question behind it is closed.
pub trait LinkShower: Send + Sync {
    /// Shows the person `url`, where `card` is answered, with `message`; `true` when they
    /// accepted to go there (`decline`, `cancel` or a failure: `false`). Blocks the calling
    /// (pipeline) thread.
    fn show(&self, card: &ApprovalCard, message: &str, url: &str) -> bool;
    /// Tells the client the question of `card` is closed (answered, expired):
    /// `notifications/elicitation/complete`.
    fn complete(&self, card: &ApprovalCard);
}

/// The page of card `id` in the console at `console`.
pub fn card_page(console: &str, id: &str) -> String {
    format!("{}/approvals/{id}", console.trim_end_matches('/'))
}

/// The message a link to `card`'s page at `url` is shown with; `again` when the same card was
/// shown before and is still open.
pub(super) fn link_message(card: &Card, url: &str, again: bool) -> String {
    let mut text = String::new();
    if again {
        text.push_str("Not answered yet: the question is still open in the Quiver console.\n");
    }
    text.push_str(&super::card_message(card));
    text.push_str("\nAnswer it in the Quiver console: ");
    text.push_str(url);
    text
}

/// Asks through the card's console page: the card is left in the queue (as for a client that
/// cannot ask), the client shows its page, and on `accept` the call waits for the answer, at
/// most `wait` and never past the card's expiry. Declined or dismissed, the card stays open and
/// the call is answered as for a client that cannot ask: its retry runs once a person answered.
pub struct LinkApprover {
    /// The queue the card is left in.
    pub retry: Arc<RetryApprover>,
    /// The client.
    pub shower: Arc<dyn LinkShower>,
    /// The console's address.
    pub console: String,
    /// The longest wait for the person's answer.
    pub wait: Duration,
}

impl Approver for LinkApprover {
    fn decide(&self, card: &Card) -> Answer {
        let answer = self.retry.decide(card);
        if answer != Answer::Pending {
            return answer;
        }
        let Some(waiting) = self.retry.waiting().last().cloned() else {
            return answer;
        };
        let url = card_page(&self.console, &waiting.id);
        let message = link_message(card, &url, false);
        if !self.shower.show(&waiting, &message, &url) {
            tracing::debug!(card = %waiting.id, "the link was not opened; answered at once");
            return Answer::Pending;
        }
        tracing::debug!(card = %waiting.id, wait = ?self.wait, "waiting for the answer in the console");
        let answer = self.retry.wait_for(card, &waiting.id, self.wait);
        self.shower.complete(&waiting);
        answer
    }
}

/// Asks through the card's console page in `input_required` (2026-07-28): the card is left in
/// the queue (as for a client that cannot ask), and the call hands the question to the front,
/// which returns the page, and waits for the client's retry. The person went to the page:
/// their answer is looked for at most `poll`; given, the call goes on with it (used exactly
/// once), else the same card is asked again (no second card), until it expires. The client
/// declined or dismissed the link: the call is answered at once as for a client that cannot
/// ask, the card staying open for its retry.
pub(super) struct LinkSuspender {
    /// The queue the card is left in.
    pub(super) retry: Arc<RetryApprover>,
    /// Hands questions to the front and waits for the retry.
    pub(super) suspender: Suspender,
    /// The longest look at the card on one retry.
    pub(super) poll: Duration,
    /// For a call run again from the start (its retry reached a process that does not hold
    /// it): the card its client was shown and whether the person went to its page.
    pub(super) shown: Option<(String, bool)>,
}

impl Approver for LinkSuspender {
    fn decide(&self, card: &Card) -> Answer {
        // Already answered (a person was quicker than the client), or a fresh card left.
        let answer = self.retry.decide(card);
        if answer != Answer::Pending {
            return answer;
        }
        let Some(waiting) = self.retry.waiting().last().cloned() else {
            return answer;
        };
        let mut reply = match &self.shown {
            Some((id, true)) if *id == waiting.id => Reply::Opened,
            Some((id, false)) if *id == waiting.id => Reply::Answer(Answer::Pending),
            _ => self.suspender.wait_reply(card),
        };
        loop {
            match reply {
                Reply::Answer(answer) => return answer,
                Reply::Opened => {
                    if let Some(answer) = self.retry.poll(card, &waiting.id, self.poll) {
                        return answer;
                    }
                    tracing::debug!(card = %waiting.id, "not answered yet; the page is shown again");
                    reply = self.suspender.wait_reply(card);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_is_asked_the_way_it_can_answer() {
        // (stateless, form, url, console) -> way
        let cases = [
            ((false, true, false, false), Way::Form),
            ((false, true, true, true), Way::Form),
            ((false, false, true, true), Way::Link),
            ((false, false, true, false), Way::AnswerAt),
            ((false, false, false, true), Way::AnswerAt),
            ((true, true, false, true), Way::Deferred),
            ((true, true, true, true), Way::Deferred),
            ((true, false, true, true), Way::DeferredLink),
            ((true, false, true, false), Way::AnswerAt),
            ((true, false, false, true), Way::AnswerAt),
            ((true, false, false, false), Way::AnswerAt),
        ];
        for ((stateless, form, url, console), way) in cases {
            assert_eq!(
                way_to_ask(stateless, form, url, console),
                way,
                "{stateless} {form} {url} {console}"
            );
        }
    }

    #[test]
    fn a_card_page_is_under_the_console_address() {
        assert_eq!(
            card_page("http://127.0.0.1:8932/", "apr-1"),
            "http://127.0.0.1:8932/approvals/apr-1"
        );
        assert_eq!(
            card_page("http://127.0.0.1:8932", "apr-1"),
            "http://127.0.0.1:8932/approvals/apr-1"
        );
    }
}
