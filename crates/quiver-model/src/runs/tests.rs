//! The runs model's own table: where a run stands as the design states it.

use super::*;
use crate::world::{Package, Ref, Tool, Workflow};

fn tool(expose: bool, approval: Approval, dangerous: bool) -> Tool {
    Tool {
        expose,
        hidden: false,
        category: Category::Action,
        approval,
        dangerous,
        restrict: Restrict::None,
        secret: false,
    }
}

fn step(package: usize, name: &str) -> Step {
    Step::Tool(Ref {
        package,
        name: name.into(),
    })
}

/// `p0` (a private `never` tool `t0`, a private dangerous `t1`) runs workflow `w0` of `steps`;
/// `p1` has an exposed `on-risk` action `t0` and a private `t1`.
fn world(steps: Vec<Step>) -> World {
    let empty = Package {
        tools: Vec::new(),
        root_skill: None,
        skills: Vec::new(),
        agents: Vec::new(),
        prompts: Vec::new(),
        workflows: Vec::new(),
    };
    let p0 = Package {
        tools: vec![
            tool(false, Approval::Never, false),
            tool(false, Approval::Never, true),
        ],
        workflows: vec![Workflow {
            expose: true,
            steps,
        }],
        ..empty.clone()
    };
    let p1 = Package {
        tools: vec![
            tool(true, Approval::OnRisk, false),
            tool(false, Approval::Never, false),
        ],
        ..empty
    };
    World {
        packages: vec![p0, p1],
    }
}

const YES: Presence = Presence::Person {
    consent_yes: true,
    approval_yes: true,
};

fn start(steps: Vec<Step>, starter: Role, presence: Presence) -> (World, Run) {
    let w = world(steps);
    let run = Run::start(&w, (0, 0), starter, presence, false).unwrap();
    (w, run)
}

#[test]
fn a_step_that_needs_a_person_parks_when_nobody_is_there_and_goes_on_after_a_yes() {
    let (w, mut run) = start(
        vec![step(0, "t0"), step(1, "t0")],
        Role::User,
        Presence::Nobody,
    );
    assert_eq!(
        run.status,
        Status::Waiting(Parked::Call { person_only: false })
    );
    assert_eq!(run.at, 1, "its own private tool ran without a question");
    assert!(run.answer(&w, true, false));
    assert_eq!(run.status, Status::Completed);
    assert!(run.consent.contains(&1), "the yes recorded p1's consent");
    assert!(!run.answer(&w, true, false), "nothing left to answer");
}

#[test]
fn the_person_waiting_answers_and_a_no_fails_the_run() {
    let (_, run) = start(vec![step(1, "t0")], Role::Master, YES);
    assert_eq!(run.status, Status::Completed);
    let declines = Presence::Person {
        consent_yes: false,
        approval_yes: true,
    };
    let (_, run) = start(vec![step(1, "t0")], Role::Master, declines);
    assert_eq!(run.status, Status::Failed(Failure::Refused(Why::Declined)));
}

#[test]
fn another_packages_private_tool_fails_the_run_and_an_approval_step_waits() {
    let (_, run) = start(vec![step(1, "t1")], Role::Master, YES);
    assert_eq!(run.status, Status::Failed(Failure::Unknown));
    let (w, mut run) = start(vec![Step::Approval, step(0, "t0")], Role::Master, YES);
    assert_eq!(run.status, Status::Waiting(Parked::Approval));
    run.answer(&w, false, false);
    assert_eq!(run.status, Status::Failed(Failure::Rejected));
}

#[test]
fn an_anonymous_starter_cannot_answer_a_dangerous_step_so_the_run_parks() {
    let (w, mut run) = start(vec![step(0, "t1")], Role::Anonymous, YES);
    assert_eq!(
        run.status,
        Status::Waiting(Parked::Call { person_only: true })
    );
    run.answer(&w, true, true);
    assert_eq!(
        run.status,
        Status::Failed(Failure::Refused(Why::EmergencyStop)),
        "answered under the stop: the step is refused"
    );
}
