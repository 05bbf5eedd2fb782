//! A definition built from a real package (the `daily-report` example): each step's target and
//! whether it is re-run safe, and a digest that names its content.

use std::path::Path;

use quiver_workflow::{Definition, StepMeta};

fn daily_report() -> quiver_package::Package {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/daily-report");
    quiver_package::load_package(&dir).package.unwrap()
}

#[test]
fn steps_know_their_targets_and_what_may_re_run() {
    let package = daily_report();
    let workflow = &package.workflows[0];
    let other = |tool: &str| (tool == "notes.list_notes").then_some(true);
    let def = Definition::new(&package, workflow, &other);
    let meta = |target: Option<&str>, rerun_safe| StepMeta {
        target: target.map(str::to_owned),
        rerun_safe,
    };
    assert_eq!(
        def.steps,
        [
            meta(Some("notes.list_notes"), true),
            meta(Some("daily-report.reporter"), false),
            meta(Some("daily-report.editor"), false),
            meta(None, true),
            // The private dangerous `publish` action: never re-run silently.
            meta(Some("daily-report.publish"), false),
        ]
    );
    assert_eq!(def.qualified(), "daily-report.compile");
    // A tool the catalog does not know is not re-run safe.
    let unknown = Definition::new(&package, workflow, &|_: &str| None);
    assert!(!unknown.steps[0].rerun_safe);

    // The digest names the content: stable, and another content is another digest.
    let digest = def.digest().unwrap();
    assert_eq!(
        digest,
        Definition::new(&package, workflow, &other)
            .digest()
            .unwrap()
    );
    assert_ne!(digest, unknown.digest().unwrap());
    assert_eq!(digest.len(), 64);
    // It round-trips through the store's JSON.
    let stored = quiver_store::workflow::Definition {
        digest: digest.clone(),
        workflow: def.qualified(),
        body: def.to_json().unwrap(),
    };
    assert_eq!(Definition::from_stored(&stored).unwrap(), def);
    let broken = quiver_store::workflow::Definition {
        body: serde_json::json!({"steps": 1}),
        ..stored
    };
    assert!(Definition::from_stored(&broken).is_err());
}
