//! Calls suspended on a question (the 2026-07-28 `input_required` round). The call keeps
//! running on its blocking thread, waiting for the answer; the front returns the question to
//! the client and keeps the call under the sealed state's nonce; the client's retry with the
//! answer continues that same call (one call, one audit record; a forked skill or an agent
//! is not run again from the start). When the call is no longer held (another process, an
//! expired hold, too many held), the retry runs the call again with the answers sealed in
//! its state.

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quiver_policy::TurnState;
use quiver_runtime::approver::{Answer, Approver, Card, RetryApprover};
use quiver_runtime::{CallOutcome, RuntimeError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::questions::{CardKey, Decision};
use super::shared::SharedQuestions;

/// Most calls held waiting for an answer at once; past it a question stops its call without
/// running anything, and the retry runs the call again.
pub const MAX_SUSPENDED_CALLS: usize = 256;

/// What a call's blocking task returns: its outcome, the turn state it left and the skills
/// the transcript holds afterwards.
pub(super) type Finished =
    Result<(CallOutcome, TurnState, std::collections::BTreeSet<String>), RuntimeError>;

/// What the client's retry brings a waiting call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// The answer to its question.
    Answer(Answer),
    /// The person went to the console's page of the card (a link accepted): look at the card.
    Opened,
}

/// Answers cards from the answers given so far; an unanswered card is handed to the front and
/// the call waits for the answer the client's retry brings, at most `wait`.
pub(super) struct Suspender {
    done: Vec<(CardKey, Decision)>,
    questions: mpsc::UnboundedSender<Card>,
    answers: Mutex<std_mpsc::Receiver<Reply>>,
    wait: Duration,
    /// Where a package's consent question is shared with the conversation's other requests.
    shared: Option<SharedQuestions>,
}

impl Suspender {
    /// Hands `card` to the front and waits for what the client's retry brings, at most `wait`.
    pub(super) fn wait_reply(&self, card: &Card) -> Reply {
        if self.questions.send(card.clone()).is_err() {
            return Reply::Answer(Answer::Unanswered);
        }
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        match answers.recv_timeout(self.wait) {
            Ok(reply) => reply,
            // The client never came back with an answer, or the hold on the call lapsed.
            Err(_) => Reply::Answer(Answer::TimedOut),
        }
    }
}

impl Approver for Suspender {
    fn decide(&self, card: &Card) -> Answer {
        let key = CardKey::of(card);
        if let Some((_, decision)) = self.done.iter().rev().find(|(k, _)| *k == key) {
            let answer = decision.answer_to(card);
            // A rerun brings the answer its client gave: it resolves the shared question too.
            if let Some(shared) = &self.shared {
                shared.answered(card, answer);
            }
            return answer;
        }
        let ask = || match self.wait_reply(card) {
            Reply::Answer(answer) => answer,
            // A form is answered, not opened: no answer.
            Reply::Opened => Answer::Unanswered,
        };
        match &self.shared {
            Some(shared) => shared.ask(card, ask),
            None => ask(),
        }
    }
}

/// A call in flight and the channels to it.
pub(super) struct InFlight {
    /// The call's blocking task.
    pub(super) task: JoinHandle<Finished>,
    /// Questions the call asks.
    pub(super) questions: mpsc::UnboundedReceiver<Card>,
    /// Answers to send it.
    pub(super) answers: std_mpsc::Sender<Reply>,
    /// The question it waits on, when it waits.
    pub(super) asking: Option<Card>,
    /// Answers given so far (sealed into each question's state, for a rerun).
    pub(super) done: Vec<(CardKey, Decision)>,
    /// Where it runs.
    pub(super) place: Place,
    /// The console queue its questions are left in when they are asked through the card's
    /// page (URL mode), and the id of the card last shown.
    pub(super) link: Option<(Arc<RetryApprover>, Option<String>)>,
}

/// Where a call runs: its conversation, the turn it continues (as read) and the turn state it
/// was given.
pub(super) struct Place {
    pub(super) session: String,
    pub(super) read: super::turns::TurnRead,
    pub(super) given: TurnState,
}

/// How a call in flight went on.
pub(super) enum Step {
    /// It finished.
    Finished(Box<Finished>, InFlight),
    /// It asks a question and waits.
    Asks(Box<Card>, InFlight),
}

impl InFlight {
    /// The approver for a new call that answers from `done` and waits up to `wait` for the
    /// rest (a package's consent shared through `shared`), and the channels the front keeps.
    pub(super) fn channels(
        done: Vec<(CardKey, Decision)>,
        wait: Duration,
        shared: Option<SharedQuestions>,
    ) -> (
        Suspender,
        mpsc::UnboundedReceiver<Card>,
        std_mpsc::Sender<Reply>,
    ) {
        let (question_tx, question_rx) = mpsc::unbounded_channel();
        let (answer_tx, answer_rx) = std_mpsc::channel();
        let suspender = Suspender {
            done,
            questions: question_tx,
            answers: Mutex::new(answer_rx),
            wait,
            shared,
        };
        (suspender, question_rx, answer_tx)
    }

    /// Gives the waiting call the person's `decision` to its question.
    pub(super) fn answer(&mut self, decision: Decision) {
        if let Some(card) = self.asking.take() {
            self.done.push((CardKey::of(&card), decision));
            // A call that stopped waiting has its answer already (timed out).
            let _ = self.answers.send(Reply::Answer(decision.answer_to(&card)));
        }
    }

    /// Tells the call waiting on a link whether the person went to the card's page.
    pub(super) fn opened(&mut self, opened: bool) {
        if self.asking.take().is_some() {
            let reply = if opened {
                Reply::Opened
            } else {
                // Not "no": the card stays open and the call is answered at once.
                Reply::Answer(Answer::Pending)
            };
            let _ = self.answers.send(reply);
        }
    }

    /// Lets the call go on until it finishes or asks the next question.
    pub(super) async fn next(mut self) -> Result<Step, tokio::task::JoinError> {
        tokio::select! {
            biased;
            Some(card) = self.questions.recv() => {
                self.asking = Some(card.clone());
                Ok(Step::Asks(Box::new(card), self))
            }
            finished = &mut self.task => Ok(Step::Finished(Box::new(finished?), self)),
        }
    }

    /// Stops waiting: the question is answered "pending", so the call stops without running,
    /// refusing or locking out anything, and its retry runs it again.
    pub(super) fn abandon(mut self) {
        self.asking = None;
        let _ = self.answers.send(Reply::Answer(Answer::Pending));
    }
}

/// The calls held, by the nonce of the state their question was sealed in.
#[derive(Default)]
pub(super) struct Suspended {
    calls: Mutex<HashMap<String, (Instant, InFlight)>>,
}

impl Suspended {
    /// Holds `call` under `nonce` until `until`; `false` (and the call abandoned) when
    /// [`MAX_SUSPENDED_CALLS`] are held.
    pub(super) fn hold(&self, nonce: String, call: InFlight, until: Instant) -> bool {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        calls.retain(|_, (until, _)| *until > now);
        if calls.len() >= MAX_SUSPENDED_CALLS {
            drop(calls);
            call.abandon();
            return false;
        }
        calls.insert(nonce, (until, call));
        true
    }

    /// Takes the call held under `nonce`, when it is still held.
    pub(super) fn take(&self, nonce: &str) -> Option<InFlight> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls
            .remove(nonce)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, call)| call)
    }
}
