//! `quiver approvals`: the console's approval queue from the command line. Calls whose
//! questions went to the console (`quiver call --console`, unattended sessions, a front whose
//! client cannot ask the user) wait here until an operator answers, each exactly once. A card
//! whose caller died is withdrawn when the queue is listed or answered: answering it records
//! nothing. Workflow runs parked on a person are listed and answered here too, by run id
//! ([`super::approvals_runs`]).

use std::process::ExitCode;

use quiver_runtime::RuntimeError;
use quiver_runtime::admin::Admin;
use quiver_runtime::approver::permission_lines_text;
use quiver_store::{Approval, ApprovalStatus, CardQuestion, Decision, StoreError};

use super::approvals_runs;
use super::runtime::{SenderArgs, StateArgs};
use crate::roots::RootArgs;
use crate::{shown, shown_json};

/// `quiver approvals ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ApprovalsCommand {
    /// List the pending approvals (the console's cards, then the workflow runs parked on a
    /// person), oldest first.
    List {
        /// Only this session's.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Approve a pending call (this call only), or the question a run is parked on.
    Approve(AnswerArgs),
    /// Deny a pending call, or the question a run is parked on (the run fails).
    Deny(AnswerArgs),
}

/// Arguments of an answer.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The approval's id (`apr-...`) or the parked run's (`run-...`), as `quiver approvals
    /// list` shows it.
    pub id: String,
    /// A note kept with the answer.
    #[arg(long)]
    pub note: Option<String>,
    /// Print the answered approval (or the run) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Who answers a parked run (`--as USER:ROLE`, a name taken on trust; default the local
    /// owner, who answers the runs they or their model started, and is the one authenticated
    /// identity of this command: a step with `approvers` or `separation_of_duties` refuses a
    /// name given with `--as`).
    #[command(flatten)]
    pub sender: SenderArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Runs `quiver approvals ...`: exit 0 on success, 1 when the approval was already answered,
/// does not exist, or (a run) the answer is refused.
pub fn run(roots: &RootArgs, command: ApprovalsCommand) -> miette::Result<ExitCode> {
    match command {
        ApprovalsCommand::List {
            session,
            json,
            state,
        } => {
            let admin = state.admin()?;
            withdraw_orphaned(&admin)?;
            let pending = admin
                .pending_approvals(session.as_deref())
                .map_err(|e| miette::miette!("{e}"))?;
            let parked: Vec<_> = admin
                .parked_runs()
                .map_err(|e| miette::miette!("{e}"))?
                .into_iter()
                .filter(|p| {
                    session
                        .as_ref()
                        .is_none_or(|s| *s == quiver_runtime::run_session_id(&p.run_id))
                })
                .collect();
            if json {
                let mut entries: Vec<serde_json::Value> = pending
                    .iter()
                    .map(|a| {
                        let mut v = serde_json::to_value(a).unwrap_or_default();
                        if let serde_json::Value::Object(map) = &mut v {
                            map.insert("kind".into(), "card".into());
                        }
                        v
                    })
                    .collect();
                entries.extend(approvals_runs::entries(&parked));
                crate::out(&serde_json::to_string_pretty(&entries).unwrap_or_default());
            } else if pending.is_empty() && parked.is_empty() {
                crate::out("no pending approvals");
            } else {
                let lines = pending
                    .iter()
                    .map(describe)
                    .chain(parked.iter().map(approvals_runs::describe));
                crate::out(&lines.collect::<Vec<_>>().join("\n"));
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Approve(args) if approvals_runs::is_run(&args.id) => {
            approvals_runs::answer(roots, args, true)
        }
        ApprovalsCommand::Deny(args) if approvals_runs::is_run(&args.id) => {
            approvals_runs::answer(roots, args, false)
        }
        ApprovalsCommand::Approve(args) => answer(args, Decision::Approve),
        ApprovalsCommand::Deny(args) => answer(args, Decision::Deny),
    }
}

/// Withdraws the pending cards whose caller died, saying so on stderr.
fn withdraw_orphaned(admin: &Admin) -> miette::Result<()> {
    let withdrawn = admin
        .withdraw_orphaned_approvals()
        .map_err(|e| miette::miette!("{e}"))?;
    for approval in withdrawn {
        crate::err(&format!(
            "{} withdrawn: the process that asked for `{}` is gone",
            shown(&approval.card.id),
            shown(&approval.card.tool)
        ));
    }
    Ok(())
}

/// Each line made safe to print.
pub(super) fn shown_lines(lines: &[String]) -> Vec<String> {
    lines.iter().map(|l| shown(l).into_owned()).collect()
}

fn describe(approval: &Approval) -> String {
    let card = &approval.card;
    let risk = card
        .risk_category
        .as_deref()
        .map(|r| format!("  risk: {}\n", shown(r)))
        .unwrap_or_default();
    let asks = match card.question {
        CardQuestion::Consent => "consent: may the assistant use this package in the conversation?",
        CardQuestion::Approval => "approval: may this call run?",
    };
    format!(
        "{}  {}\n  asks {asks}\n  session: {}\n  package: {}\n  arguments: {}\n  why: {}\n{}\n{risk}",
        shown(&card.id),
        shown(&card.tool),
        shown(&card.session),
        shown(&card.package),
        shown_json(&card.arguments),
        shown(&card.reason),
        permission_lines_text("it", &shown_lines(&card.permissions), "  ")
    )
}

fn answer(args: AnswerArgs, decision: Decision) -> miette::Result<ExitCode> {
    let admin = args.state.admin()?;
    withdraw_orphaned(&admin)?;
    let by = format!(
        "console:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".to_owned())
    );
    match admin.answer_approval(&args.id, decision, &by, args.note.as_deref()) {
        Ok(approval) if args.json => {
            crate::out(&serde_json::to_string_pretty(&approval).unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        Ok(approval) => {
            crate::out(&format!(
                "{} {}: {}",
                shown(&approval.card.id),
                approval.status,
                shown(&approval.card.tool)
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(RuntimeError::Store(StoreError::AlreadyAnswered {
            id,
            status: ApprovalStatus::Withdrawn,
        })) => {
            crate::err(&format!(
                "{id} was withdrawn: the process that asked for it is gone, so nothing waits for this answer; nothing was approved and nothing runs"
            ));
            Ok(ExitCode::from(1))
        }
        Err(RuntimeError::Store(StoreError::AlreadyAnswered { id, status })) => {
            crate::err(&format!(
                "{id} was already resolved ({status}); nothing changed"
            ));
            Ok(ExitCode::from(1))
        }
        Err(e @ RuntimeError::Store(StoreError::NotFound { .. })) => {
            crate::err(&e.to_string());
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(miette::miette!("{e}")),
    }
}
