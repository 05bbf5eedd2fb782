//! Approvers: who answers the questions the policy asks (package consent, approval of a call,
//! `ask_user`). One interface, four kinds: a person at a terminal, a queue answered later (the
//! console), a reviewing model, and deny-all for unattended turns.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use quiver_package::text::escape_for_terminal;
use serde::Serialize;

mod queue;

pub use queue::{QueueApprover, RETRY_CARD_TTL, RetryApprover};

/// What a question is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Question {
    /// May the model use this package in this conversation?
    Consent,
    /// May this call run?
    Approval,
}

/// The card an approver sees: the package, the tool, the exact arguments, why it asks and the
/// risk category.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Card {
    /// What is asked.
    pub question: Question,
    /// The session.
    pub session: String,
    /// The package.
    pub package: String,
    /// The tool, `<package>.<tool>`.
    pub tool: String,
    /// The exact arguments of the call.
    pub arguments: serde_json::Value,
    /// Why it asks, in words.
    pub reasons: Vec<String>,
    /// The dangerous gate's risk categories (`member`, `publish`, `funds`, `identity`).
    pub risk_categories: Vec<String>,
    /// Whether only a person may answer (dangerous and `human` tools).
    pub needs_person: bool,
    /// What the package (consent) or the tool (approval) may do beyond its own folders, one
    /// permission per line in words, open-ended ones flagged; empty: nothing more.
    pub permissions: Vec<quiver_policy::PermissionLine>,
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Yes, this once.
    Allow,
    /// Yes, for the rest of this conversation (consent, `once`).
    AllowForSession,
    /// No.
    Deny,
    /// Nobody answered in time (a queued card that expired).
    TimedOut,
    /// Nobody could answer, at once: no person at a terminal, the question dismissed, the
    /// channel failed.
    Unanswered,
    /// The question was handed on and comes back answered with a later request (an MCP
    /// client's `input_required` round): nothing runs now, and nothing is refused or locked out.
    Pending,
}

/// Something that answers questions.
pub trait Approver: Send + Sync {
    /// Answers a card.
    fn decide(&self, card: &Card) -> Answer;

    /// Answers the model's `ask_user` question, when a person is there.
    fn answer_question(&self, _question: &str) -> Option<String> {
        None
    }
}

/// Refuses everything (unattended turns).
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn decide(&self, _card: &Card) -> Answer {
        Answer::Deny
    }
}

/// A person at a terminal: the card on stderr, the answer read from stdin.
///
/// `assume_yes` answers consent and ordinary approvals with yes (the CLI's `--yes`), but never a
/// card that needs a person: those are always asked, and refused without a terminal.
pub struct TerminalApprover<R, W> {
    input: Mutex<R>,
    output: Mutex<W>,
    assume_yes: bool,
    interactive: bool,
}

impl<R: BufRead + Send, W: Write + Send> TerminalApprover<R, W> {
    /// An approver reading `input` and writing `output`; `interactive` says whether a person is
    /// there to type.
    pub fn new(input: R, output: W, interactive: bool, assume_yes: bool) -> Self {
        Self {
            input: Mutex::new(input),
            output: Mutex::new(output),
            assume_yes,
            interactive,
        }
    }

    fn prompt(&self, text: &str) -> Option<String> {
        if !self.interactive {
            return None;
        }
        let mut output = self.output.lock().ok()?;
        let _ = write!(output, "{text}");
        let _ = output.flush();
        let mut line = String::new();
        let read = self.input.lock().ok()?.read_line(&mut line).ok()?;
        (read > 0).then(|| line.trim().to_owned())
    }
}

impl<R: BufRead + Send, W: Write + Send> Approver for TerminalApprover<R, W> {
    fn decide(&self, card: &Card) -> Answer {
        if self.assume_yes && !card.needs_person {
            return Answer::AllowForSession;
        }
        let line = self.prompt(&format!("{}{CARD_CHOICES}", card_text(card)));
        answer_from(line.as_deref(), card)
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        self.prompt(&format!("\nThe assistant asks: {question}\n> "))
    }
}

/// The choices a person at a terminal is offered after a card.
pub const CARD_CHOICES: &str = "\n[y] once  [a] for this conversation  [n] deny: ";

/// The card's permissions as indented lines under a heading (`may:`), or a line saying it may
/// do nothing beyond its own folders; every renderer (terminal, console, MCP form) uses it.
pub fn permissions_text(card: &Card, indent: &str) -> String {
    let whose = match card.question {
        Question::Consent => "the package",
        Question::Approval => "the tool",
    };
    permission_lines_text(
        whose,
        &card
            .permissions
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        indent,
    )
}

/// [`permissions_text`] over lines already in words (a stored console card's).
pub fn permission_lines_text(whose: &str, lines: &[String], indent: &str) -> String {
    if lines.is_empty() {
        return format!("{indent}{whose} may: nothing beyond its own package and data folders");
    }
    let mut text = format!("{indent}{whose} may:");
    for line in lines {
        text.push_str(&format!("\n{indent}  - {}", escape_for_terminal(line)));
    }
    text
}

/// A card as a person at a terminal reads it: the question, the package, the tool, the exact
/// arguments, why it asks, what it may do and the risk category.
pub fn card_text(card: &Card) -> String {
    let what = match card.question {
        Question::Consent => format!(
            "Allow the model to use package `{}` in this conversation?",
            card.package
        ),
        Question::Approval => format!("Run `{}`?", card.tool),
    };
    let risk = if card.risk_categories.is_empty() {
        String::new()
    } else {
        format!("\n  risk: {}", card.risk_categories.join(", "))
    };
    format!(
        "\n{what}\n  package: {}\n  tool: {}\n  arguments: {}\n  why: {}\n{}{risk}",
        escape_for_terminal(&card.package),
        escape_for_terminal(&card.tool),
        escape_for_terminal(&card.arguments.to_string()),
        escape_for_terminal(&card.reasons.join("; ")),
        permissions_text(card, "  ")
    )
}

/// The answer a typed line gives to `card` (`None`: nobody typed anything). "For this
/// conversation" is never granted to a card that needs a person each time, except consent.
pub fn answer_from(line: Option<&str>, card: &Card) -> Answer {
    match line.map(str::to_lowercase).as_deref() {
        Some("y" | "yes") => Answer::Allow,
        Some("a" | "always") if !card.needs_person || card.question == Question::Consent => {
            Answer::AllowForSession
        }
        Some("a" | "always") => Answer::Allow,
        Some(_) => Answer::Deny,
        None => Answer::Unanswered,
    }
}

/// A reviewing model: a function that reads the card and says yes or no. Never consulted for
/// cards that need a person (the policy never routes those here).
pub struct ModelReviewer<F> {
    review: F,
}

impl<F: Fn(&Card) -> bool + Send + Sync> ModelReviewer<F> {
    /// A reviewer calling `review`.
    pub fn new(review: F) -> Self {
        Self { review }
    }
}

impl<F: Fn(&Card) -> bool + Send + Sync> Approver for ModelReviewer<F> {
    fn decide(&self, card: &Card) -> Answer {
        if card.needs_person {
            return Answer::Deny;
        }
        if (self.review)(card) {
            Answer::Allow
        } else {
            Answer::Deny
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(needs_person: bool) -> Card {
        Card {
            question: Question::Approval,
            session: "s".into(),
            package: "group-admin".into(),
            tool: "group-admin.kick_member".into(),
            arguments: serde_json::json!({"user": "42"}),
            reasons: vec!["a dangerous tool".into()],
            risk_categories: vec!["member".into()],
            needs_person,
            permissions: quiver_policy::describe_permissions(
                &quiver_package::common::Permissions {
                    network: vec!["localhost".into()],
                    env: vec!["QQ_TOKEN".into()],
                    ..Default::default()
                },
            ),
        }
    }

    #[test]
    fn terminal_answers() {
        let cases: &[(&str, bool, bool, bool, Answer)] = &[
            ("y\n", true, false, false, Answer::Allow),
            ("a\n", true, false, false, Answer::AllowForSession),
            ("a\n", true, false, true, Answer::Allow),
            ("n\n", true, false, false, Answer::Deny),
            ("", true, false, false, Answer::Unanswered),
            ("", false, true, false, Answer::AllowForSession),
            ("y\n", false, true, true, Answer::Unanswered),
            ("y\n", true, true, true, Answer::Allow),
        ];
        for (input, interactive, yes, person, want) in cases {
            let mut out = Vec::new();
            {
                let approver =
                    TerminalApprover::new(input.as_bytes(), &mut out, *interactive, *yes);
                assert_eq!(
                    approver.decide(&card(*person)),
                    *want,
                    "{input:?} interactive={interactive} yes={yes} person={person}"
                );
            }
            let asked = *interactive && (*person || !*yes);
            if asked {
                let shown = String::from_utf8(out).unwrap();
                assert!(
                    shown.contains("arguments: {\"user\":\"42\"}")
                        && shown.contains("risk: member")
                        && shown.contains(
                            "\n  the tool may:\n    - reach `localhost` over HTTP and HTTPS [open-ended: this machine's own services]\n    - read the runtime's environment variable `QQ_TOKEN`\n"
                        ),
                    "{shown}"
                );
            }
        }
    }

    #[test]
    fn a_card_says_what_the_package_or_the_tool_may_do() {
        let read_root = quiver_policy::describe_permissions(&quiver_package::common::Permissions {
            filesystem: quiver_package::common::FilesystemPermissions {
                read: vec!["/".into()],
                write: vec![],
            },
            env: vec!["SECRET".into()],
            ..Default::default()
        });
        let cases = [
            (
                Question::Consent,
                read_root.clone(),
                "the package may:\n  - read `/` [open-ended: the whole file system]\n  - read the runtime's environment variable `SECRET`",
            ),
            (
                Question::Approval,
                read_root,
                "the tool may:\n  - read `/` [open-ended: the whole file system]\n  - read the runtime's environment variable `SECRET`",
            ),
            (
                Question::Consent,
                Vec::new(),
                "the package may: nothing beyond its own package and data folders",
            ),
        ];
        for (question, permissions, want) in cases {
            let card = Card {
                question,
                permissions,
                ..card(false)
            };
            assert_eq!(permissions_text(&card, ""), want);
            let shown = card_text(&card);
            assert!(shown.contains(&permissions_text(&card, "  ")), "{shown}");
        }
    }

    #[test]
    fn reviewer_never_answers_for_a_person() {
        let reviewer = ModelReviewer::new(|_: &Card| true);
        assert_eq!(reviewer.decide(&card(false)), Answer::Allow);
        assert_eq!(reviewer.decide(&card(true)), Answer::Deny);
        assert_eq!(DenyAll.decide(&card(false)), Answer::Deny);
    }
}
