//! `quiver approvals`: the console's approval queue from the command line. Calls whose
//! questions went to the console (`quiver call --console`, unattended sessions, a front whose
//! client cannot ask the user) wait here until an operator answers, each exactly once. A card
//! whose caller died is withdrawn when the queue is listed or answered: answering it records
//! nothing.

use std::process::ExitCode;

use quiver_runtime::approver::permission_lines_text;
use quiver_store::{Approval, ApprovalStatus, Decision, Store, StoreError};

use super::runtime::StateArgs;

/// `quiver approvals ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ApprovalsCommand {
    /// List the pending approvals, oldest first.
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
    /// Approve a pending call (this call only).
    Approve(AnswerArgs),
    /// Deny a pending call.
    Deny(AnswerArgs),
}

/// Arguments of an answer.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The approval's id (`apr-...`), as `quiver approvals list` shows it.
    pub id: String,
    /// A note kept with the answer.
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Runs `quiver approvals ...`: exit 0 on success, 1 when the approval was already answered
/// or does not exist.
pub fn run(command: ApprovalsCommand) -> miette::Result<ExitCode> {
    match command {
        ApprovalsCommand::List {
            session,
            json,
            state,
        } => {
            let store = state.open()?;
            withdraw_orphaned(store.as_ref())?;
            let pending = store
                .pending_approvals(session.as_deref())
                .map_err(|e| miette::miette!("{e}"))?;
            if json {
                crate::out(&serde_json::to_string_pretty(&pending).unwrap_or_default());
            } else if pending.is_empty() {
                crate::out("no pending approvals");
            } else {
                crate::out(&pending.iter().map(describe).collect::<Vec<_>>().join("\n"));
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Approve(args) => answer(args, Decision::Approve),
        ApprovalsCommand::Deny(args) => answer(args, Decision::Deny),
    }
}

/// Withdraws the pending cards whose caller died, saying so on stderr.
fn withdraw_orphaned(store: &dyn Store) -> miette::Result<()> {
    let withdrawn = store
        .withdraw_orphaned_approvals()
        .map_err(|e| miette::miette!("{e}"))?;
    for approval in withdrawn {
        crate::err(&format!(
            "{} withdrawn: the process that asked for `{}` is gone",
            approval.card.id, approval.card.tool
        ));
    }
    Ok(())
}

fn describe(approval: &Approval) -> String {
    let card = &approval.card;
    let risk = card
        .risk_category
        .as_deref()
        .map(|r| format!("  risk: {r}\n"))
        .unwrap_or_default();
    format!(
        "{}  {}\n  session: {}\n  package: {}\n  arguments: {}\n  why: {}\n{}\n{risk}",
        card.id,
        card.tool,
        card.session,
        card.package,
        card.arguments,
        card.reason,
        permission_lines_text("it", &card.permissions, "  ")
    )
}

fn answer(args: AnswerArgs, decision: Decision) -> miette::Result<ExitCode> {
    let store = args.state.open()?;
    withdraw_orphaned(store.as_ref())?;
    let by = format!(
        "console:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".to_owned())
    );
    match store.answer_approval(&args.id, decision, &by, args.note.as_deref()) {
        Ok(approval) => {
            crate::out(&format!(
                "{} {}: {}",
                approval.card.id, approval.status, approval.card.tool
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(StoreError::AlreadyAnswered {
            id,
            status: ApprovalStatus::Withdrawn,
        }) => {
            crate::err(&format!(
                "{id} was withdrawn: the process that asked for it is gone, so nothing waits for this answer; nothing was approved and nothing runs"
            ));
            Ok(ExitCode::from(1))
        }
        Err(StoreError::AlreadyAnswered { id, status }) => {
            crate::err(&format!(
                "{id} was already resolved ({status}); nothing changed"
            ));
            Ok(ExitCode::from(1))
        }
        Err(e @ StoreError::NotFound { .. }) => {
            crate::err(&e.to_string());
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(miette::miette!("{e}")),
    }
}
