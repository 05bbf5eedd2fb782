//! The workflow side of `quiver approvals`: runs parked on a person (an approval step, or a
//! step's call whose question nobody could be asked) are listed beside the console's cards and
//! answered by run id through [`quiver_runtime::RunOps::answer`] — the local owner answers the
//! runs they (or their model) started; a step's `approvers` and `separation_of_duties` take
//! only the local owner's own identity (a name given with `--as` is taken on trust, never
//! authenticated), and an anonymous answerer never answers a dangerous or `human` call.

use std::process::ExitCode;

use quiver_workflow::{Parked, Question};
use serde_json::{Value, json};

use super::approvals::AnswerArgs;
use super::runs::{open_host, print_run};
use super::runs_ops::refused;
use crate::roots::RootArgs;
use crate::{shown, shown_json};

/// Whether an id names a run (`run-...`) rather than a console card (`apr-...`).
pub(super) fn is_run(id: &str) -> bool {
    id.starts_with("run-")
}

/// The parked runs as entries of the queue's JSON list: `kind: "run"` and `id` the run's.
pub(super) fn entries(parked: &[Parked]) -> Vec<Value> {
    parked
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or_default();
            if let Value::Object(map) = &mut v {
                map.insert("kind".into(), json!("run"));
                map.insert("id".into(), json!(p.run_id));
            }
            v
        })
        .collect()
}

/// A parked run in words.
pub(super) fn describe(p: &Parked) -> String {
    let mut text = match p.question {
        Question::Step => format!(
            "{}  {}  (workflow run waits on approval step `{}`)\n  started by: {}\n  title: {}",
            shown(&p.run_id),
            shown(&p.workflow),
            shown(&p.step_id),
            shown(&p.started_by),
            shown(p.title.as_deref().unwrap_or(""))
        ),
        Question::Call => {
            let card = p.card.clone().unwrap_or_default();
            format!(
                "{}  {}  (workflow run waits on a person for `{}` in step `{}`)\n  started by: {}\n  arguments: {}",
                shown(&p.run_id),
                shown(&p.workflow),
                shown(card["tool"].as_str().unwrap_or("")),
                shown(&p.step_id),
                shown(&p.started_by),
                shown_json(&card["arguments"])
            )
        }
    };
    if let Some(show) = &p.show {
        text.push_str(&format!("\n  show: {}", shown_json(show)));
    }
    if let Some(card) = &p.card {
        let reasons: Vec<&str> = card["reasons"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if card["consent"] == json!(true) {
            text.push_str(&format!(
                "\n  consent: the run uses package `{}` for the first time",
                shown(card["package"].as_str().unwrap_or(""))
            ));
        }
        if !reasons.is_empty() {
            text.push_str(&format!("\n  why: {}", shown(&reasons.join("; "))));
        }
        if p.needs_a_named_person() {
            text.push_str("\n  a named person must answer (dangerous or human-only)");
        }
    }
    if p.separation_of_duties {
        text.push_str("\n  separation of duties: someone other than the starter answers");
    }
    if !p.approvers.is_empty() {
        text.push_str(&format!(
            "\n  approvers: {}",
            shown(&p.approvers.join(", "))
        ));
    }
    text.push('\n');
    text
}

/// Answers the approval a run is parked on, as `--as` (default the local owner): exit 0 when
/// it was answered (the run driven on and printed), 1 when it is refused.
pub(super) fn answer(
    roots: &RootArgs,
    args: AnswerArgs,
    approve: bool,
) -> miette::Result<ExitCode> {
    let principal = args.sender.principal(None)?;
    let answerer = quiver_runtime::Answerer {
        principal: &principal,
        // The local owner is who runs this command; a name given with `--as` is a claim.
        authenticated: args.sender.as_user.is_none(),
    };
    let host = open_host(roots, &args.state, false)?;
    let ops = quiver_runtime::RunOps::new(host.runtime()).map_err(|e| miette::miette!("{e}"))?;
    match ops.answer(&args.id, approve, &answerer, args.note.as_deref()) {
        Ok(run) => {
            if !args.json {
                crate::out(&format!(
                    "{} {}: {}",
                    run.id,
                    if approve { "approved" } else { "denied" },
                    run.workflow
                ));
            }
            print_run(&run, args.json);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => refused(e),
    }
}
