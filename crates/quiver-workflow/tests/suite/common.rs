//! A fake step runner that keeps a ledger of every call, and workflows built from YAML.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::TimeZone;
use serde_json::{Value, json};

use quiver_package::workflow::{WorkflowScope, parse_workflow};
use quiver_workflow::{
    Definition, ManualClock, Start, StepCall, StepMeta, StepOutcome, StepRunner,
};

/// One call the fake runner saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub step: String,
    pub attempt: i64,
    pub key: String,
    pub arguments: Value,
    pub approved_by: Option<String>,
}

/// What the fake does for a step.
#[derive(Clone)]
pub enum Act {
    /// Answers with this output.
    Output(Value),
    /// Fails with this message for the first `n` attempts, then answers `then`.
    FailTimes(i64, Value),
    /// Records the call, then panics: the process "dies" between the tool's exit and the
    /// commit of its result.
    Crash,
    /// Refuses.
    Refuse(String),
    /// Needs a person until approved.
    NeedsPerson,
    /// Runs a hook (cancel the run meanwhile, say), then answers.
    Hook(Arc<dyn Fn(&StepCall) + Send + Sync>, Value),
}

/// The fake runner: a script per step id and a shared ledger.
#[derive(Clone, Default)]
pub struct Fake {
    pub script: Arc<Mutex<BTreeMap<String, Act>>>,
    pub ledger: Arc<Mutex<Vec<Seen>>>,
    /// The package content digests this runner has loaded, by package id.
    pub loaded: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Fake {
    pub fn with(script: &[(&str, Act)]) -> Fake {
        let fake = Fake::default();
        for (step, act) in script {
            fake.set(step, act.clone());
        }
        fake
    }

    pub fn set(&self, step: &str, act: Act) {
        self.script.lock().unwrap().insert(step.to_owned(), act);
    }

    pub fn calls(&self, step: &str) -> Vec<Seen> {
        self.ledger
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.step == step)
            .cloned()
            .collect()
    }
}

impl StepRunner for Fake {
    fn package_digest(&self, id: &str) -> Option<String> {
        self.loaded.lock().unwrap().get(id).cloned()
    }

    fn run(&self, call: &StepCall) -> StepOutcome {
        self.ledger.lock().unwrap().push(Seen {
            step: call.step_id.clone(),
            attempt: call.attempt,
            key: call.idempotency_key.clone(),
            arguments: call.arguments.clone(),
            approved_by: call.approved_by.clone(),
        });
        let act = self.script.lock().unwrap().get(&call.step_id).cloned();
        match act {
            None => StepOutcome::Output(json!({"echo": call.arguments})),
            Some(Act::Output(v)) => StepOutcome::Output(v),
            Some(Act::FailTimes(n, _)) if call.attempt <= n => {
                StepOutcome::Failed(format!("attempt {} failed", call.attempt))
            }
            Some(Act::FailTimes(_, v)) => StepOutcome::Output(v),
            Some(Act::Crash) => panic!("the process dies while `{}` runs", call.step_id),
            Some(Act::Refuse(r)) => StepOutcome::Refused(r),
            Some(Act::NeedsPerson) if call.approved_by.is_none() => {
                StepOutcome::NeedsPerson(json!({"tool": call.step_id, "arguments": call.arguments}))
            }
            Some(Act::NeedsPerson) => StepOutcome::Output(json!({"done": true})),
            Some(Act::Hook(hook, v)) => {
                hook(call);
                StepOutcome::Output(v)
            }
        }
    }
}

/// A definition of package `pkg` from workflow YAML; `safe` lists the steps whose tool is
/// re-run safe (perception, decision or idempotent).
pub fn definition(yaml: &str, safe: &[&str]) -> Definition {
    let scope = WorkflowScope {
        items: BTreeSet::new(),
        ..Default::default()
    };
    let (w, d) = parse_workflow(yaml, Path::new("wf.yaml"), "wf".parse().unwrap(), &scope);
    let w = w.unwrap_or_else(|| panic!("{d:#?}"));
    let steps = w
        .steps
        .iter()
        .map(|s| StepMeta {
            target: match &s.action {
                quiver_package::workflow::StepAction::Tool { name, .. }
                | quiver_package::workflow::StepAction::Agent { name, .. } => Some(name.clone()),
                _ => None,
            },
            rerun_safe: safe.contains(&s.id.as_str()),
        })
        .collect();
    Definition {
        package: "pkg".into(),
        workflow: w,
        steps,
        packages: BTreeMap::new(),
    }
}

pub fn start(input: Value) -> Start {
    Start {
        input,
        trigger: json!({"kind": "manual"}),
        principal: json!({"user": "alice"}),
        started_by: "alice".into(),
        attended: false,
        settings: json!({"unit": "C"}),
        key: None,
    }
}

pub fn clock() -> ManualClock {
    ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap())
}

/// Runs `f`, which is expected to panic (a crash of the process), and swallows the panic.
pub fn crash(f: impl FnOnce()) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    assert!(
        outcome.is_err(),
        "the step was expected to crash the process"
    );
}
