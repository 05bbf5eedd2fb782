//! Step 5: authorize, shared by every kind of call. The operator's hooks run first (for a call
//! the policy has not already refused): a block or a failing hook refuses the call. Then the
//! policy's decision (control plane, dangerous gate, package consent, approval mode) is carried
//! out: a refusal is final for the turn; a question goes to whoever the policy names (the
//! person in the conversation, the console, a reviewing model), consent first, and may leave
//! the call waiting for a later request's answer.

use quiver_policy::{
    Approver as PolicyApprover, Decision, Denial, Evaluation, Lockout, Principal, Refusal,
    RefusalReason, Reuse,
};
use quiver_store::{AuditEntry, AuditStep};
use serde_json::{Value, json};

use super::Target;
use super::audit::{Phase, decision, redact, secret_fields};
use crate::approver::{Answer, Card, Question};
use crate::hooks::{HookEvent, HookVerdict, run_hook};
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

impl Turn<'_> {
    /// Runs step 5 for `target`: `None` when the call may run, else what the model reads (a
    /// refusal, final for the turn, or a call waiting for a later answer).
    pub(in crate::runtime) fn authorize(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        evaluation: &Evaluation,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        // Hooks and cards never see a secret argument.
        let redacted = match target.input {
            Some(schema) => redact(arguments, &secret_fields(schema)),
            None => arguments.clone(),
        };
        let refused_already =
            matches!(evaluation.decision, Decision::Refuse(_) | Decision::Unknown);
        if !refused_already && let Some(refusal) = self.run_hooks(call_id, target, &redacted, audit)
        {
            self.state.record_refusal(&refusal);
            return Ok(Some(CallOutcome::refused(call_id, &refusal)));
        }
        match &evaluation.decision {
            Decision::Allow => Ok(None),
            Decision::Refuse(_) | Decision::Unknown => Ok(Some(self.refused(call_id, evaluation))),
            Decision::Ask(ask) | Decision::Park(ask) if self.step.is_some() => {
                self.step_question(call_id, ask, &target.qualified, &redacted, audit)
            }
            Decision::Ask(ask) | Decision::Park(ask) => {
                // A process killed while a person is asked leaves a record of the call.
                self.record_started(audit, Phase::Asking)?;
                self.ask_or_stop(call_id, ask, &target.qualified, &redacted, audit)
            }
        }
    }

    /// Runs the hooks that match `qualified`, in order; the first block or failure refuses the
    /// call (final for the turn). Each hook's answer is in the audit record.
    fn run_hooks(
        &self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Option<Refusal> {
        let qualified = target.qualified.as_str();
        let mut hooks = self
            .runtime
            .hooks
            .iter()
            .filter(|h| h.applies_to(qualified))
            .peekable();
        hooks.peek()?;
        let event = HookEvent {
            event: "before_call",
            session: self.session.clone(),
            call_id: call_id.to_owned(),
            tool: qualified.to_owned(),
            package: target.package.id.as_str().to_owned(),
            arguments: arguments.clone(),
            principal: serde_json::to_value(&self.sender).unwrap_or_default(),
            origin: serde_json::to_value(&self.origin).unwrap_or_default(),
            unattended: self.unattended,
            category: format!("{:?}", target.facts.category).to_lowercase(),
        };
        for hook in hooks {
            let reason = match run_hook(hook.as_ref(), &event) {
                Ok(HookVerdict::Continue) => {
                    audit.decisions.push(decision(
                        AuditStep::Hook,
                        "allow",
                        &format!("`{}` let it go on", hook.name()),
                    ));
                    continue;
                }
                Ok(HookVerdict::Block(why)) => RefusalReason::HookBlocked {
                    hook: hook.name().to_owned(),
                    why,
                },
                Err(error) => RefusalReason::HookFailed {
                    hook: hook.name().to_owned(),
                    why: error.0,
                },
            };
            audit
                .decisions
                .push(decision(AuditStep::Hook, "refuse", &reason.to_string()));
            return Some(Refusal::new(
                reason,
                Lockout {
                    tool: qualified.to_owned(),
                    categories: Vec::new(),
                },
            ));
        }
        None
    }

    /// What the model reads for a call the policy refused; the refusal joins the turn's
    /// lockouts.
    pub(in crate::runtime) fn refused(
        &mut self,
        call_id: &str,
        evaluation: &Evaluation,
    ) -> CallOutcome {
        self.state.record(evaluation);
        match evaluation.refusal() {
            Some(refusal) => CallOutcome::refused(call_id, refusal),
            None => CallOutcome::new(
                call_id,
                CallStatus::Refused,
                json!({"error": "refused; do not retry"}),
            ),
        }
    }

    /// Step 5's questions for an `Ask` or `Park` decision: `None` when every answer is yes,
    /// else what the model reads — a refusal, final for the turn, or a call that waits for a
    /// later request's answer.
    pub(in crate::runtime) fn ask_or_stop(
        &mut self,
        call_id: &str,
        ask: &quiver_policy::Ask,
        qualified: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        Ok(match self.ask(call_id, ask, qualified, arguments, audit)? {
            Asked::Yes => None,
            Asked::Refused(refusal) => {
                self.state.record_refusal(&refusal);
                Some(CallOutcome::refused(call_id, &refusal))
            }
            Asked::Pending => Some(CallOutcome::new(
                call_id,
                CallStatus::Pending,
                json!({"pending": "waiting for the user's answer; nothing ran"}),
            )),
        })
    }

    /// Asks the policy's questions in order (consent, then approval), stopping at the first
    /// answer that is not yes.
    fn ask(
        &mut self,
        call_id: &str,
        ask: &quiver_policy::Ask,
        qualified: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Asked, RuntimeError> {
        let base = Card {
            question: Question::Consent,
            session: self.session.clone(),
            package: ask.package.clone(),
            tool: qualified.to_owned(),
            arguments: arguments.clone(),
            permissions: ask.tool_permissions.clone(),
            reasons: Vec::new(),
            risk_categories: ask
                .risk_categories
                .iter()
                .map(|c| format!("{c:?}").to_lowercase())
                .collect(),
            // Consent and ordinary approvals may be answered by `--yes`-style approvers.
            needs_person: false,
        };
        // An anonymous sender never answers a card only a person may answer: such a call is
        // refused before anything is asked (the dangerous gate comes before consent).
        if let Some(question) = &ask.approval
            && question.who == PolicyApprover::Person
            && self.sender.is_anonymous()
            && needs_person(ask, question)
        {
            audit.decisions.push(decision(
                AuditStep::Approval,
                "unanswered",
                "an anonymous sender never answers a card only a person may answer",
            ));
            return Ok(Asked::Refused(ask.refusal(Denial::Anonymous)));
        }
        if let Some(who) = ask.consent {
            let mut card = base.clone();
            card.permissions = ask.package_permissions.clone();
            card.reasons = vec![format!(
                "the first use of package `{}` in this conversation",
                ask.package
            )];
            let answer = self.route(who, &card);
            audit.decisions.push(decision(
                AuditStep::Consent,
                answer_word(answer),
                &card.reasons[0],
            ));
            match answer {
                Answer::Allow | Answer::AllowForSession => {
                    self.grants.grant_consent(&ask.package);
                    self.runtime.store.set_consent(
                        &self.session,
                        &ask.package,
                        true,
                        &principal_name(&self.sender),
                    )?;
                }
                Answer::Deny => {
                    self.grants.refuse_consent(&ask.package);
                    self.runtime.store.set_consent(
                        &self.session,
                        &ask.package,
                        false,
                        &principal_name(&self.sender),
                    )?;
                    return Ok(Asked::Refused(ask.refusal(Denial::Consent)));
                }
                Answer::TimedOut => return Ok(Asked::Refused(ask.refusal(Denial::TimedOut))),
                Answer::Unanswered => {
                    return Ok(Asked::Refused(ask.refusal(Denial::Unanswered)));
                }
                Answer::Pending => return Ok(Asked::Pending),
            }
        }
        if let Some(question) = &ask.approval {
            let mut card = base;
            card.question = Question::Approval;
            card.reasons = question.reasons.iter().map(ToString::to_string).collect();
            card.needs_person = needs_person(ask, question);
            let answer = match self.operator_card(call_id, qualified, arguments)? {
                Some(used) => {
                    // A person approved this exact call ahead: nobody is asked.
                    audit.decisions.push(decision(
                        AuditStep::Approval,
                        "allow",
                        &format!(
                            "operator card `{}` made by `{}` approved this exact call",
                            used.id, used.created_by
                        ),
                    ));
                    return Ok(Asked::Yes);
                }
                None => self.route(question.who, &card),
            };
            audit.decisions.push(decision(
                AuditStep::Approval,
                answer_word(answer),
                &card.reasons.join("; "),
            ));
            match answer {
                Answer::Allow | Answer::AllowForSession => {
                    if question.reuse == Reuse::Session {
                        self.grants.approve_once(qualified);
                        self.runtime.store.grant_once(
                            &self.session,
                            qualified,
                            &principal_name(&self.sender),
                        )?;
                    }
                }
                Answer::Deny => return Ok(Asked::Refused(ask.refusal(Denial::Approval))),
                Answer::TimedOut => return Ok(Asked::Refused(ask.refusal(Denial::TimedOut))),
                Answer::Unanswered => {
                    return Ok(Asked::Refused(ask.refusal(Denial::Unanswered)));
                }
                Answer::Pending => return Ok(Asked::Pending),
            }
        }
        Ok(Asked::Yes)
    }

    /// Uses, once, an operator card made for this exact call (tool and canonical arguments as
    /// a card would show them, in this session or any), if one is live.
    fn operator_card(
        &self,
        call_id: &str,
        qualified: &str,
        arguments: &Value,
    ) -> Result<Option<quiver_store::OperatorCard>, RuntimeError> {
        let now = quiver_store::now_ms();
        let used = self.runtime.store.use_operator_card(
            qualified,
            arguments,
            &self.session,
            call_id,
            now,
        )?;
        if let Some(card) = &used {
            tracing::info!(card = %card.id, tool = %qualified, by = %card.created_by, "an operator card approved a call");
        }
        Ok(used)
    }

    fn route(&self, who: PolicyApprover, card: &Card) -> Answer {
        let approvers = &self.runtime.approvers;
        let approver = match who {
            PolicyApprover::Person if !self.unattended => self.person(),
            PolicyApprover::Person => None,
            PolicyApprover::Console => approvers.console.as_ref(),
            PolicyApprover::ModelReviewer => approvers.reviewer.as_ref(),
        };
        approver.map_or(Answer::Deny, |a| a.decide(card))
    }
}

/// Whether only a person may answer `question` (a dangerous tool, or `approval: human`).
fn needs_person(ask: &quiver_policy::Ask, question: &quiver_policy::ApprovalQuestion) -> bool {
    ask.is_dangerous()
        || question
            .reasons
            .contains(&quiver_policy::AskReason::HumanOnly)
}

fn answer_word(answer: Answer) -> &'static str {
    match answer {
        Answer::Allow => "allow",
        Answer::AllowForSession => "allow-session",
        Answer::Deny => "deny",
        Answer::TimedOut => "timed-out",
        Answer::Unanswered => "unanswered",
        Answer::Pending => "pending",
    }
}

/// How the policy's questions about a call were answered.
enum Asked {
    /// Every answer was yes.
    Yes,
    /// One was no (or nobody answered): final for the turn.
    Refused(Refusal),
    /// One waits for a later request's answer.
    Pending,
}

fn principal_name(p: &Principal) -> String {
    p.user_id.clone().unwrap_or_else(|| "anonymous".to_owned())
}
