//! The model's own table: a few verdicts that state the rules plainly.

use super::*;
use crate::world::{Agent, Package, Ref, Tool};

fn tool(expose: bool, approval: Approval) -> Tool {
    Tool {
        expose,
        hidden: false,
        category: Category::Action,
        approval,
        dangerous: false,
        restrict: Restrict::None,
        secret: false,
    }
}

/// `p0`: `t0` exposed `always`, `t1` private; its skill pre-approves `t0`; `p0/s0` forks into
/// `p1.a0`, a private agent.
fn world() -> World {
    let skill = Skill {
        restrict: Restrict::None,
        tools: None,
        allowed: vec![ListEntry::Bare("t0".into())],
        disallowed: Vec::new(),
        fork: None,
        scoped: Vec::new(),
        script: false,
    };
    let fork = Skill {
        allowed: Vec::new(),
        fork: Some(Ref {
            package: 1,
            name: "a0".into(),
        }),
        ..skill.clone()
    };
    let p0 = Package {
        tools: vec![tool(true, Approval::Always), tool(false, Approval::Never)],
        root_skill: Some(skill),
        skills: vec![fork],
        agents: Vec::new(),
        prompts: Vec::new(),
        workflows: Vec::new(),
    };
    let p1 = Package {
        tools: Vec::new(),
        root_skill: None,
        skills: Vec::new(),
        agents: vec![Agent {
            expose: false,
            tools: Vec::new(),
        }],
        prompts: Vec::new(),
        workflows: Vec::new(),
    };
    World {
        packages: vec![p0, p1],
    }
}

const OWNER: Caller = Caller {
    role: Role::Master,
    in_qq_group: false,
    unattended: false,
};

fn asks(consent: Option<usize>, approval: bool) -> Questions {
    Questions {
        consent,
        approval,
        person_only: false,
    }
}

#[test]
fn verdicts_as_the_design_states_them() {
    let t0 = Target::Tool(0, 0);
    let t1 = Target::Tool(0, 1);
    let w = world();
    // (turns, steps before the call, the call, the verdict)
    let read = |s: &mut Session| {
        s.read_skill(&w, "p0");
    };
    let next_turn = |s: &mut Session| s.new_turn();
    let call_t0 = |s: &mut Session| {
        s.call(&w, &Target::Tool(0, 0));
    };
    type Step<'a> = &'a dyn Fn(&mut Session);
    let cases: Vec<(Turns, Vec<Step<'_>>, Target, Verdict)> = vec![
        (
            Turns::Marked,
            vec![],
            t0.clone(),
            Verdict::Runs(asks(Some(0), true)),
        ),
        (Turns::Marked, vec![], t1.clone(), Verdict::Unknown),
        (
            Turns::Marked,
            vec![&read],
            t1.clone(),
            Verdict::Refused(Why::Private, asks(None, false)),
        ),
        (
            Turns::Marked,
            vec![&read],
            t0.clone(),
            Verdict::Runs(asks(Some(0), false)),
        ),
        (
            Turns::Marked,
            vec![&read, &next_turn],
            t0.clone(),
            Verdict::Runs(asks(Some(0), true)),
        ),
        (
            Turns::Unmarked,
            vec![&read],
            t0.clone(),
            Verdict::Runs(asks(Some(0), false)),
        ),
        (
            Turns::Unmarked,
            vec![&read, &call_t0],
            t0.clone(),
            Verdict::Runs(asks(None, true)),
        ),
    ];
    for (i, (turns, steps, target, want)) in cases.into_iter().enumerate() {
        let mut s = Session::new(OWNER, turns);
        for step in steps {
            step(&mut s);
        }
        assert_eq!(s.call(&w, &target), want, "case {i}");
    }
}

#[test]
fn a_fork_into_another_packages_private_agent_is_unknown() {
    let mut s = Session::new(OWNER, Turns::Marked);
    assert_eq!(
        s.read_skill(&world(), "p0/s0"),
        Read::Fork(Verdict::Unknown)
    );
}

/// `p0`'s skill carries a script; `allow` pre-approves `run_skill_script` in it.
fn script_world(allow: bool) -> World {
    let mut w = world();
    let skill = w.packages[0].root_skill.as_mut().unwrap();
    skill.script = true;
    skill.allowed = if allow {
        vec![ListEntry::Bare(crate::world::SCRIPT_TOOL.into())]
    } else {
        Vec::new()
    };
    w
}

#[test]
fn a_script_runs_only_from_an_active_skill_as_an_action_of_its_package() {
    use crate::world::Script;
    let w = script_world(false);
    let mut s = Session::new(OWNER, Turns::Marked);
    // Not active, then a path out of `scripts/` and a missing file: nothing runs or asks.
    assert_eq!(s.run_script(&w, "p0", Script::Own), Verdict::Unknown);
    s.read_skill(&w, "p0");
    assert_eq!(s.run_script(&w, "p0", Script::Outside(1)), Verdict::Unknown);
    assert_eq!(s.run_script(&w, "p0", Script::Missing), Verdict::Unknown);
    // A fork is never active: its scripts never run.
    assert_eq!(s.run_script(&w, "p0/s0", Script::Own), Verdict::Unknown);
    // The package's consent, then an `on-risk` action's approval.
    assert_eq!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Runs(asks(Some(0), true))
    );
    assert_eq!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Runs(asks(None, true))
    );
    s.stopped = true;
    assert!(matches!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Refused(Why::EmergencyStop, _)
    ));
    // Nobody present: the consent question has no one to ask.
    let unattended = Caller {
        unattended: true,
        ..OWNER
    };
    let mut s = Session::new(unattended, Turns::Marked);
    s.read_skill(&w, "p0");
    assert!(matches!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Refused(Why::NoPerson, _)
    ));
}

/// A turn holds its catalog, not the skill's folder: the script is the file on disk when the
/// call is made (a reload during the turn rewrote the folder).
#[test]
fn a_script_is_the_file_on_disk_at_the_call() {
    use crate::world::Script;
    let with = script_world(false);
    let without = world();
    // (catalog the turn holds, folders on disk) -> whether the call reaches the policy
    let cases = [
        (&with, &with, true),
        (&with, &without, false),
        (&without, &with, true),
        (&without, &without, false),
    ];
    for (held, disk, reaches) in cases {
        let mut s = Session::new(OWNER, Turns::Marked);
        s.read_skill(held, "p0");
        let verdict = s.run_script_on(held, disk, "p0", Script::Own);
        let expected = if reaches {
            Verdict::Runs(asks(Some(0), true))
        } else {
            Verdict::Unknown
        };
        assert_eq!(verdict, expected, "held has a script: {}", held == &with);
    }
    // A refusal the policy would give comes after the file: no file, no question, no lockout.
    let mut s = Session::new(OWNER, Turns::Marked);
    s.read_skill(&with, "p0");
    s.stopped = true;
    assert_eq!(
        s.run_script_on(&with, &without, "p0", Script::Own),
        Verdict::Unknown
    );
}

#[test]
fn the_skills_own_allowed_tools_pre_approve_its_scripts_for_the_turn() {
    use crate::world::Script;
    let w = script_world(true);
    let mut s = Session::new(OWNER, Turns::Marked);
    s.read_skill(&w, "p0");
    assert_eq!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Runs(asks(Some(0), false))
    );
    s.new_turn();
    assert_eq!(
        s.run_script(&w, "p0", Script::Own),
        Verdict::Runs(asks(None, true))
    );
}
