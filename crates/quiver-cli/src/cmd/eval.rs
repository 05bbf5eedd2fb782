//! `quiver eval`: tool-choice figures on cases, progressive disclosure against the eager
//! baseline, and the gate CI exits on (`--min-accuracy`, `--max-false-calls`; a case that
//! failed to run or nothing measured is an error).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use quiver_agent::SubAgents;
use quiver_agent::eval::{self, DryRun, Mode, gate};
use quiver_host::{Host, HostOptions};
use quiver_runtime::ApproverSet;
use serde_json::Value;

use super::chat::{ModelArgs, fail};
use super::runtime::{StateArgs, principal};
use crate::roots::RootArgs;

/// Arguments of `quiver eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The cases: YAML (a list, or `cases:`) or JSON Lines (`.jsonl`).
    pub cases: PathBuf,
    /// Also run the baseline: `eager` offers every tool schema and no meta-tools.
    #[arg(long, value_parser = ["eager"])]
    pub baseline: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when the call accuracy (progressive run) is under this fraction (0 to 1).
    #[arg(long, value_name = "FRACTION", value_parser = fraction)]
    pub min_accuracy: Option<f64>,
    /// Exit 1 when more than N cases that expected no call made one (progressive run).
    #[arg(long, value_name = "N")]
    pub max_false_calls: Option<usize>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// A number from 0 to 1.
fn fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}` is not a fraction from 0 to 1 (0.9 is 90%)"
        )),
    }
}

/// The host of `quiver eval`: the catalog with hybrid search, tools dry-run.
fn eval_host(roots: &RootArgs, state: &StateArgs) -> miette::Result<Host> {
    let config = crate::roots::config()?;
    let search = quiver_host::SearchModels::load(config.search);
    let state = state.state_with(&config)?;
    let loading = crate::progress::Progress::loading();
    let host = Host::open_with_executor(
        config,
        HostOptions {
            roots: roots.roots.clone(),
            state,
            search: Some(search),
            approvers: ApproverSet {
                person: Some(Arc::new(eval::EvalApprover)),
                console: None,
                reviewer: None,
            },
            launcher: crate::roots::launcher()?,
            reload: false,
        },
        Arc::new(DryRun),
    )
    .map_err(crate::roots::fail)?;
    drop(loading);
    crate::roots::notices(host.notices());
    Ok(host)
}

/// Runs `quiver eval`.
pub fn run(roots: &RootArgs, args: EvalArgs) -> miette::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.cases)
        .map_err(|e| miette::miette!("cannot read {}: {e}", args.cases.display()))?;
    let cases = eval::parse_cases(&text, &args.cases).map_err(fail)?;
    let providers = args.model.providers()?;
    let host = eval_host(roots, &args.state)?;
    let runtime = host.runtime();
    runtime.set_agent_runner(Arc::new(SubAgents::new(providers.clone())));
    let sender = principal(None, &[], None)?;
    let modes: &[Mode] = if args.baseline.is_some() {
        &[Mode::Progressive, Mode::Eager]
    } else {
        &[Mode::Progressive]
    };
    let progress = crate::progress::Progress::bar((cases.len() * modes.len()) as u64, "eval");
    let mut runs = Vec::new();
    for mode in modes {
        progress.set_message(match mode {
            Mode::Progressive => "eval progressive",
            Mode::Eager => "eval eager",
        });
        runs.push(
            eval::run(runtime, &providers, &cases, *mode, &sender, &|_| {
                progress.inc()
            })
            .map_err(fail)?,
        );
    }
    drop(progress);
    let failures = gate::check(
        &runs,
        &gate::Thresholds {
            min_accuracy: args.min_accuracy,
            max_false_calls: args.max_false_calls,
        },
    );
    if args.json {
        let mut value: serde_json::Map<String, Value> = runs
            .iter()
            .map(|r| {
                (
                    match r.mode {
                        Mode::Progressive => "progressive".to_owned(),
                        Mode::Eager => "eager".to_owned(),
                    },
                    serde_json::to_value(r).unwrap_or_default(),
                )
            })
            .collect();
        value.insert(
            "failures".to_owned(),
            serde_json::to_value(&failures).unwrap_or_default(),
        );
        crate::out(&serde_json::to_string_pretty(&value).unwrap_or_default());
    } else {
        for r in &runs {
            for c in r.cases.iter().filter(|c| !c.correct) {
                crate::err(&format!(
                    "{:?} miss: {} (expected {:?}, called {:?}){}",
                    r.mode,
                    c.id,
                    c.expected,
                    c.called,
                    c.error
                        .as_ref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ));
            }
        }
        if !runs.iter().all(|r| r.cases.is_empty()) {
            crate::out(eval::table(&runs).trim_end());
        }
    }
    for failure in &failures {
        crate::err(&format!("error: {failure}"));
    }
    Ok(if failures.iter().any(gate::Failure::is_error) {
        ExitCode::from(2)
    } else if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
