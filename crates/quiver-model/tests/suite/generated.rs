//! Generated cases: a few hundred in every test run, thousands in the nightly-style ignored
//! test (`QUIVER_MODEL_CASES=5000 cargo test -p quiver-model --test model -- --ignored`).

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::arbitrary::any;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use quiver_model::generate;
use quiver_model::rules::Session;

use super::check::{Front, known};
use super::runtime_driver::run_case;
use super::{chat_driver, mcp_driver, mcp_http_driver};

/// Runs one case through `front`.
pub fn run_through(
    front: Front,
    world: &quiver_model::world::World,
    caller: quiver_model::world::Caller,
    ops: &[quiver_model::world::Op],
) -> super::harness::Run {
    match front {
        Front::Runtime => run_case(world, caller, ops),
        Front::McpTurnIds => mcp_driver::run_case(world, ops, true),
        Front::McpNoTurnIds => mcp_driver::run_case(world, ops, false),
        Front::McpHttpSession => mcp_http_driver::run_case(world, ops, false),
        Front::McpHttpStateless => mcp_http_driver::run_case(world, ops, true),
        Front::Chat => chat_driver::run_case(world, caller, ops),
    }
}

/// The front the triage tests use: `QUIVER_MODEL_FRONT` = `runtime` (default), `mcp`,
/// `mcp-no-turn-ids`, `mcp-http`, `mcp-http-stateless`, `chat`.
fn front_from_env() -> Front {
    match std::env::var("QUIVER_MODEL_FRONT").as_deref() {
        Ok("mcp") => Front::McpTurnIds,
        Ok("mcp-no-turn-ids") => Front::McpNoTurnIds,
        Ok("mcp-http") => Front::McpHttpSession,
        Ok("mcp-http-stateless") => Front::McpHttpStateless,
        Ok("chat") => Front::Chat,
        _ => Front::Runtime,
    }
}

/// Runs `cases` generated cases through `front`; fails (shrunk) on any violation that is not
/// known, and prints how many ran, how fast, and the known violations seen.
fn run_generated(front: Front, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let ran = std::cell::Cell::new(0u32);
    let seen: std::cell::RefCell<BTreeMap<String, u32>> = Default::default();
    let result = runner.run(&generate::case(), |(world, caller, ops)| {
        ran.set(ran.get() + 1);
        let run = run_through(front, &world, caller, &ops);
        let mut fresh = Vec::new();
        for v in &run.violations {
            match known(front, v) {
                Some(k) => {
                    *seen
                        .borrow_mut()
                        .entry(format!("item {}: {}", k.item, k.tag))
                        .or_default() += 1;
                }
                None => fresh.push(v.to_string()),
            }
        }
        if fresh.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(fresh.join("\n")))
        }
    });
    let secs = started.elapsed().as_secs_f64();
    println!(
        "quiver-model ({front:?}): {} cases run (incl. shrinking) in {secs:.1} s, {:.0} cases/s",
        ran.get(),
        f64::from(ran.get()) / secs
    );
    for (class, count) in seen.borrow().iter() {
        println!("  known violation seen in {count} cases: {class}");
    }
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn generated_cases_hold_every_invariant_through_the_runtime() {
    run_generated(Front::Runtime, 200);
}

#[test]
fn generated_cases_hold_every_invariant_through_mcp_with_turn_ids() {
    run_generated(Front::McpTurnIds, 50);
}

#[test]
fn generated_cases_hold_every_invariant_through_mcp_without_turn_ids() {
    run_generated(Front::McpNoTurnIds, 50);
}

#[test]
fn generated_cases_hold_every_invariant_through_mcp_over_http_in_a_session() {
    run_generated(Front::McpHttpSession, 20);
}

#[test]
fn generated_cases_hold_every_invariant_through_mcp_over_stateless_http() {
    run_generated(Front::McpHttpStateless, 20);
}

#[test]
fn generated_cases_hold_every_invariant_through_chat() {
    run_generated(Front::Chat, 30);
}

/// Runs `cases` generated cases through the runtime with some or all packages installed
/// (a generated bit mask): the same verdicts as from the project root.
fn run_installed(cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let (ran, packages) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let strategy = (
        generate::case(),
        1u32..(1 << generate::MAX_PACKAGES),
        any::<bool>(),
    );
    let result = runner.run(&strategy, |((world, caller, ops), installed, tidy)| {
        // Half the worlds keep the names the install refuses: those packages stay in the
        // project root.
        let world = if tidy { Session::tidied(&world) } else { world };
        let installed = super::installed::installable(&world, installed);
        ran.set(ran.get() + 1);
        packages.set(packages.get() + installed.count_ones());
        let run = super::runtime_driver::run_case_placed(&world, caller, &ops, installed);
        let fresh: Vec<String> = run.violations.iter().map(|v| v.to_string()).collect();
        if fresh.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(fresh.join("\n")))
        }
    });
    println!(
        "quiver-model (installed, runtime): {} cases (incl. shrinking), {} packages installed, in {:.1} s",
        ran.get(),
        packages.get(),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn generated_cases_hold_every_invariant_with_installed_packages() {
    run_installed(60);
}

/// Classes seen across a hot reload, open (not triaged). None: every class seen there is
/// enforced. (Triaged: a skill script is the file on disk at the call, which the model says
/// since `Session::run_script_on`; the test's sub-agent runner follows the catalog a new turn
/// holds.)
const RELOAD_KNOWN: &[(&str, Option<&str>)] = &[];

/// Whether `violation` is one of the parked classes across a hot reload.
fn parked_across_reload(tag: &str, violation: &str) -> bool {
    RELOAD_KNOWN
        .iter()
        .any(|(known, message)| *known == tag && message.is_none_or(|m| violation.contains(m)))
}

/// Runs 40 generated cases (`QUIVER_MODEL_RELOAD_CASES`) through the runtime with a hot
/// reload mid-turn.
#[test]
fn generated_cases_hold_every_invariant_across_a_hot_reload() {
    let cases = std::env::var("QUIVER_MODEL_RELOAD_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let strategy = (
        generate::case(),
        generate::edit(),
        generate::ops(8),
        0usize..4,
    );
    let result = runner.run(&strategy, |((world, caller, before), edit, after, open)| {
        let run = super::reload_driver::run_case(&world, caller, &before, &edit, &after, open);
        let fresh: Vec<String> = (run.violations.iter())
            .map(|v| (v.tag.clone(), v.to_string()))
            .filter(|(tag, text)| !parked_across_reload(tag, text))
            .map(|(_, text)| text)
            .collect();
        if fresh.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(fresh.join("\n")))
        }
    });
    println!(
        "quiver-model (hot reload, runtime): {cases} cases in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
#[ignore = "nightly: thousands of cases (QUIVER_MODEL_CASES, default 5000)"]
fn nightly_generated_cases_through_every_front() {
    let cases = std::env::var("QUIVER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    for front in [
        Front::Runtime,
        Front::McpTurnIds,
        Front::McpNoTurnIds,
        Front::McpHttpSession,
        Front::McpHttpStateless,
    ] {
        run_generated(front, cases);
    }
    // The chat loop answers over HTTP: a fifth as many.
    run_generated(Front::Chat, cases / 5);
}

/// Surveys the violation classes over `QUIVER_MODEL_CASES` cases without stopping at the
/// first: each class with its count and its smallest example (by steps), for triage.
#[test]
#[ignore = "triage: prints every violation class seen"]
fn survey_violation_classes() {
    let cases = std::env::var("QUIVER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let mut classes: BTreeMap<String, (u32, usize, String)> = BTreeMap::new();
    let started = Instant::now();
    for _ in 0..cases {
        let tree = proptest::strategy::Strategy::new_tree(&generate::case(), &mut runner).unwrap();
        let (world, caller, ops) = proptest::strategy::ValueTree::current(&tree);
        let run = run_through(front_from_env(), &world, caller, &ops);
        for v in run.violations {
            let key = format!("{:?} [{}]", v.invariant, v.tag);
            let size = ops.len() + format!("{world:?}").len() / 40;
            let entry = classes.entry(key).or_insert((0, usize::MAX, String::new()));
            entry.0 += 1;
            if size < entry.1 {
                entry.1 = size;
                entry.2 = format!(
                    "{}\n  world: {world:?}\n  caller: {caller:?}\n  ops: {ops:?}",
                    v.detail
                );
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("survey: {cases} cases in {secs:.1} s");
    for (class, (count, _, example)) in &classes {
        println!("\n== {class}: {count} violations\n  {example}");
    }
}

/// Surveys the violation classes across a hot reload over `QUIVER_MODEL_CASES` cases (parked
/// or not): each class with its count and its smallest example, for triage.
#[test]
#[ignore = "triage: prints every violation class seen across a hot reload"]
fn survey_reload_classes() {
    let cases = std::env::var("QUIVER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        generate::case(),
        generate::edit(),
        generate::ops(8),
        0usize..4,
    );
    let mut classes: BTreeMap<String, (u32, usize, String)> = BTreeMap::new();
    let started = Instant::now();
    for _ in 0..cases {
        let tree = proptest::strategy::Strategy::new_tree(&strategy, &mut runner).unwrap();
        let ((world, caller, before), edit, after, open) =
            proptest::strategy::ValueTree::current(&tree);
        let run = super::reload_driver::run_case(&world, caller, &before, &edit, &after, open);
        for v in run.violations {
            let key = format!("{:?} [{}]", v.invariant, v.tag);
            let size = before.len() + after.len() + format!("{world:?}").len() / 40;
            let entry = classes.entry(key).or_insert((0, usize::MAX, String::new()));
            entry.0 += 1;
            if size < entry.1 {
                entry.1 = size;
                entry.2 = format!(
                    "{}\n  world: {world:?}\n  caller: {caller:?}\n  before: {before:?}\n  edit: {edit:?}\n  after: {after:?} (open {open})",
                    v.detail
                );
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("survey (hot reload): {cases} cases in {secs:.1} s");
    for (class, (count, _, example)) in &classes {
        println!("\n== {class}: {count} violations\n  {example}");
    }
}

/// Shrinks to the smallest case showing the violation class `QUIVER_MODEL_TAG` (known or not)
/// and prints it: how the regression tables were made.
#[test]
#[ignore = "triage: shrinks one violation class to its minimal case"]
fn shrink_one_class() {
    let Ok(tag) = std::env::var("QUIVER_MODEL_TAG") else {
        return;
    };
    let cases = std::env::var("QUIVER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    });
    let result = runner.run(&generate::case(), |(world, caller, ops)| {
        let run = run_through(front_from_env(), &world, caller, &ops);
        match run.violations.iter().find(|v| v.tag == tag) {
            Some(v) => Err(TestCaseError::fail(v.to_string())),
            None => Ok(()),
        }
    });
    println!("{result:#?}");
}
