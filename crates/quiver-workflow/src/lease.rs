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

/// The variable that sets how long this process's engines' leases last without a heartbeat,
/// in ms (default [`LEASE_MS`](crate::decide::LEASE_MS), at least [`MIN_LEASE_MS`]): the time
/// after which another instance takes over a run whose holder died.
pub const LEASE_VAR: &str = "QUIVER_WORKFLOW_LEASE_MS";

/// The shortest lease [`LEASE_VAR`] may set.
pub const MIN_LEASE_MS: i64 = 300;

/// The lease length of this process's engines: [`LEASE_VAR`] if set (read once; a value that
/// is not a number of ms of at least [`MIN_LEASE_MS`] is logged and the default kept).
pub fn configured_ms() -> i64 {
    static MS: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *MS.get_or_init(|| {
        parse_ms(std::env::var(LEASE_VAR).ok().as_deref()).unwrap_or_else(|problem| {
            tracing::warn!("{LEASE_VAR}: {problem}; the default lease is kept");
            crate::decide::LEASE_MS
        })
    })
}

/// A lease length as [`LEASE_VAR`] gives it; unset is the default.
fn parse_ms(text: Option<&str>) -> Result<i64, String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(crate::decide::LEASE_MS);
    };
    match text.parse::<i64>() {
        Ok(ms) if ms >= MIN_LEASE_MS => Ok(ms),
        Ok(ms) => Err(format!("{ms} ms is shorter than {MIN_LEASE_MS} ms")),
        Err(_) => Err(format!("`{text}` is not a number of milliseconds")),
    }
}

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
    fn lease_lengths_from_the_environment() {
        let cases = [
            (None, Ok(crate::decide::LEASE_MS)),
            (Some(" "), Ok(crate::decide::LEASE_MS)),
            (Some("3000"), Ok(3_000)),
            (Some(" 300 "), Ok(300)),
            (Some("299"), Err("299 ms is shorter than 300 ms")),
            (Some("3s"), Err("`3s` is not a number of milliseconds")),
        ];
        for (text, want) in cases {
            assert_eq!(parse_ms(text), want.map_err(str::to_owned), "{text:?}");
        }
    }

    #[test]
    fn three_heartbeats_per_lease() {
        for (ms, every) in [(15_000, 5_000), (300, 100), (2, 1), (0, 1), (-5, 1)] {
            assert_eq!(heartbeat_every(ms), Duration::from_millis(every), "{ms}");
        }
    }
}
