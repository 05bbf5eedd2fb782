//! The lease an engine holds on the attempt it runs: heartbeated while the step's call runs,
//! and given up (the step's process killed) the moment a heartbeat cannot extend it. A result
//! written after that is refused by the store (fenced by the run's epoch); such refusals are
//! counted and logged here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use quiver_store::WorkflowStore;

use crate::runner::StepCall;

static REFUSED: AtomicU64 = AtomicU64::new(0);

/// How many late results this process had refused: results of attempts whose lease its engines
/// had lost (another engine took the run over, or it was cancelled) before the result could
/// be committed.
pub fn refused_results() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Counts and logs a result the store refused, or one not even offered since the lease was
/// lost.
pub(crate) fn refused(call: &StepCall, why: &str) {
    REFUSED.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        run = %call.run_id,
        step = %call.step_id,
        attempt = call.attempt,
        epoch = call.epoch,
        "the step's late result is refused: {why}"
    );
}

/// How often a holder heartbeats a lease of `ms`: three times per lease, so two lost
/// heartbeats in a row still leave it held.
pub fn heartbeat_every(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms / 3).unwrap_or(0).max(1))
}

/// Runs `work` (the step's call) while this thread's companion heartbeats `owner`'s lease on
/// `call`'s attempt; a heartbeat the store refuses means the lease is lost: `lost` is called
/// once (to kill the step's process group) and heartbeats stop. Returns what `work` returned,
/// and whether the lease was lost meanwhile. A heartbeat that fails on an error (the store
/// unreachable) is tried again at the next beat: if the lease ran out meanwhile, that one is
/// refused.
pub(crate) fn holding<T>(
    store: &dyn WorkflowStore,
    owner: &str,
    ms: i64,
    call: &StepCall,
    lost: &(dyn Fn() + Sync),
    work: impl FnOnce() -> T,
) -> (T, bool) {
    let gone = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        let gone = &gone;
        scope.spawn(move || {
            loop {
                match stopped.recv_timeout(heartbeat_every(ms)) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
                match store.heartbeat_run(&call.run_id, call.epoch, owner, ms) {
                    Ok(true) => {}
                    Ok(false) => {
                        gone.store(true, Ordering::Release);
                        tracing::warn!(
                            run = %call.run_id,
                            step = %call.step_id,
                            epoch = call.epoch,
                            "the lease on the step is lost (taken over, cancelled or run out): its process is stopped"
                        );
                        lost();
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(run = %call.run_id, %error, "cannot heartbeat the step's lease");
                    }
                }
            }
        });
        // Dropped here, or on a panic of `work` while unwinding: the heartbeats stop either way.
        let value = work();
        drop(stop);
        (value, gone.load(Ordering::Acquire))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_heartbeats_per_lease() {
        for (ms, every) in [(15_000, 5_000), (300, 100), (2, 1), (0, 1), (-5, 1)] {
            assert_eq!(heartbeat_every(ms), Duration::from_millis(every), "{ms}");
        }
    }
}
