//! [`Notify`]: wakes the callers of [`wait_approval`](crate::Store::wait_approval) in this
//! process after each commit of a write, whichever backend committed it.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::Store;
use crate::error::{Result, StoreError};
use crate::types::{Approval, ApprovalStatus};

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

/// [`Store::wait_approval`] for either backend: reads the approval until it is resolved or
/// `timeout` passes, sleeping between reads until `notify` moves on (an answer written by this
/// process, or one another process announced) or `poll` passes (which covers an answer whose
/// announcement was lost on the way).
pub(crate) fn wait_approval(
    store: &dyn Store,
    notify: &Notify,
    poll: Duration,
    id: &str,
    timeout: Duration,
) -> Result<Approval> {
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let seen = notify.generation();
        let current = store.approval(id)?.ok_or_else(|| StoreError::NotFound {
            what: "approval",
            id: id.to_owned(),
        })?;
        if current.status != ApprovalStatus::Pending {
            return Ok(current);
        }
        let mut wait = poll;
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(current);
            }
            wait = wait.min(left);
        }
        notify.wait_past(seen, wait);
    }
}
