//! [`Notify`]: wakes the callers of [`wait_approval`](crate::Store::wait_approval) in this
//! process after each commit of a write, whichever backend committed it.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Wakes [`wait_approval`](crate::Store::wait_approval) callers after each commit.
#[derive(Default)]
pub(crate) struct Notify {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Notify {
    /// The current commit generation.
    pub(crate) fn generation(&self) -> u64 {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the generation on and wakes every waiter (after a commit).
    pub(crate) fn bump(&self) {
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *generation = generation.wrapping_add(1);
        self.changed.notify_all();
    }

    /// Waits until the generation moves past `seen` or `timeout` passes.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) {
        let start = Instant::now();
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *generation == seen {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return;
            }
            generation = self
                .changed
                .wait_timeout(generation, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
