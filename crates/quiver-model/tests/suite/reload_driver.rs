//! Hot reload as a road: a case's catalog is edited and swapped into the runtime mid-turn
//! (what the reload thread does after its rebuild: the folders rewritten, a catalog built from
//! them, `Runtime::swap_catalog`); the model's `Catalogs` says which version each turn sees.

use quiver_catalog::Catalog;
use quiver_model::grants::Turns;
use quiver_model::rules::Session;
use quiver_model::versions::{Catalogs, Edit};
use quiver_model::world::{Caller, Op, World};
use quiver_model::write::write_world;
use quiver_runtime::{Profile, SessionRequest};

use super::harness::{Checker, Run, harness_over, origin, principal};
use super::runtime_driver::{next_turn, run_op};

/// Runs `before` in the first turn, swaps `edit` in, runs `after[..open]` in the same turn,
/// then a new turn and the rest of `after`; every invariant after every step, each step
/// against the catalog version its turn holds. Workflow runs (started outside a turn, on the
/// newest catalog) are left out.
pub fn run_case(
    world: &World,
    caller: Caller,
    before: &[Op],
    edit: &Edit,
    after: &[Op],
    open: usize,
) -> Run {
    let mut catalogs = Catalogs::new(world.clone());
    catalogs.swap(edit);
    let versions = catalogs.versions().to_vec();
    let catalogs_ref: Vec<&World> = versions.iter().collect();
    let h = harness_over(world, &catalogs_ref, true, false, 0);
    let mut catalogs = Catalogs::new(world.clone());
    let profile = if caller.unattended {
        Profile::Schedule
    } else {
        Profile::Interactive
    };
    let session = h
        .runtime
        .create_session(&SessionRequest {
            origin: origin(&caller),
            agent: "chat".into(),
            principal: principal(&caller),
            profile,
        })
        .unwrap();
    let mut c = Checker::new(
        &versions[0],
        &h,
        session.clone(),
        Session::new(caller, Turns::Marked),
    );
    let mut turn = next_turn(&mut c, &session, caller);
    let open = open.min(after.len());
    let steps = (before.iter())
        .chain(&after[..open])
        .chain([&Op::NewTurn])
        .chain(&after[open..]);
    for (step, op) in steps.enumerate() {
        c.step = step;
        if step == before.len() {
            // The edit is saved and swapped in: the open turn keeps its catalog.
            let packages = h.dir.path().join("packages");
            std::fs::remove_dir_all(&packages).unwrap();
            write_world(&versions[1], &packages).unwrap();
            h.runtime
                .swap_catalog(Catalog::load_dirs(&[packages.as_path()]));
            catalogs.swap(edit);
            // The open turn keeps its catalog; the skill folders on disk are the new ones.
            c.disk = Some(&versions[1]);
            c.check_offer(&turn);
        }
        match op {
            Op::TriggerRun(_) | Op::AnswerRun(_) => continue,
            Op::NewTurn => {
                drop(turn);
                catalogs.new_turn();
                c.world = &versions[catalogs.held()];
                // The agents the new turn calls are those of its catalog.
                h.runner.follow(c.world);
                turn = next_turn(&mut c, &session, caller);
            }
            _ => {}
        }
        run_op(&mut c, &mut turn, op);
    }
    drop(turn);
    let ran = h.ran();
    Run {
        violations: c.violations,
        ran,
    }
}
