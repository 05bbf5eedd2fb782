//! A sandbox refusal (an action the package did not declare) is final for the turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use quiver_catalog::Catalog;
use quiver_runtime::approver::{Answer, Approver};
use quiver_runtime::executor::{ExecError, Execution, Executor};
use quiver_runtime::{ApproverSet, CallStatus, Runtime, RuntimeConfig};
use quiver_store::{AuditStatus, SqliteStore};
use serde_json::{Value, json};

use super::common::*;

/// Refuses every call as the sandbox refuses a host outside the package's `network`, and
/// counts how often it was run.
#[derive(Default)]
struct DeniesHost {
    runs: AtomicUsize,
}

impl Executor for DeniesHost {
    fn execute(&self, _execution: &Execution<'_>) -> Result<Value, ExecError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Err(ExecError::Denied(
            "network access to evil.example denied: not in the package's permissions".into(),
        ))
    }
}

#[test]
fn a_sandbox_refusal_is_final_for_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    let store = Arc::new(SqliteStore::open(dir.path().join("state.db")).unwrap());
    let executor = Arc::new(DeniesHost::default());
    let person = Arc::new(Scripted::default());
    person.answer(&[Answer::AllowForSession]);
    let runtime = Runtime::new(
        Catalog::load_dirs(&[&packages]),
        store,
        executor.clone(),
        ApproverSet {
            person: Some(person.clone() as Arc<dyn Approver>),
            console: None,
            reviewer: None,
        },
        RuntimeConfig::default(),
    );
    let session = runtime
        .create_session(&quiver_runtime::SessionRequest {
            origin: quiver_policy::Origin::default(),
            agent: "chat".into(),
            principal: owner(),
            profile: quiver_runtime::Profile::Interactive,
        })
        .unwrap();
    let mut turn = runtime.begin_turn(&session, owner(), "").unwrap();
    let first = turn.call("notes__real_code", json!({})).unwrap();
    assert_eq!(first.status, CallStatus::Refused, "{first:?}");
    assert_eq!(
        error_text(&first.content),
        "refused: network access to evil.example denied: not in the package's permissions; do not retry"
    );
    let second = turn.call("notes__real_code", json!({})).unwrap();
    assert_eq!(second.status, CallStatus::Refused, "{second:?}");
    assert!(
        error_text(&second.content).contains("already refused in this turn"),
        "{second:?}"
    );
    assert_eq!(executor.runs.load(Ordering::SeqCst), 1, "run again");
    // Both calls are in the audit as refused; the next turn may try again.
    let audit = runtime.session_audit(&session, 100).unwrap();
    let refused = audit
        .iter()
        .filter(|a| a.entry.status == AuditStatus::Refused)
        .count();
    assert_eq!(refused, 2, "{audit:?}");
    drop(turn);
    let mut next = runtime.begin_turn(&session, owner(), "").unwrap();
    assert_eq!(
        next.call("notes__real_code", json!({})).unwrap().status,
        CallStatus::Refused
    );
    assert_eq!(executor.runs.load(Ordering::SeqCst), 2);
}
