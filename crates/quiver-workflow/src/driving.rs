//! One driver per run in a process. Engines of one process may share an owner id (the host's,
//! so that a restart recovers the process's attempts at once), and an engine takes an attempt
//! started under its own owner without a result for a crash. So two engines of the process
//! must never drive one run at once: [`enter`] holds a run for the calling thread until the
//! guard drops. A thread that drives a run already holds it again freely (a step whose call
//! reaches its own run returns at once instead of deadlocking).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{self, ThreadId};

struct Registry {
    held: Mutex<HashMap<String, ThreadId>>,
    freed: Condvar,
}

static DRIVING: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(|| Registry {
    held: Mutex::new(HashMap::new()),
    freed: Condvar::new(),
});

/// A run held by this thread.
pub(crate) struct Guard {
    run: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut held = DRIVING.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.remove(&self.run);
        DRIVING.freed.notify_all();
    }
}

/// Holds `run` for this thread, waiting while another thread holds it; `None` when this
/// thread holds it already, further up its stack.
pub(crate) fn enter(run: &str) -> Option<Guard> {
    let me = thread::current().id();
    let mut held = DRIVING.held.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        match held.get(run) {
            None => {
                held.insert(run.to_owned(), me);
                return Some(Guard {
                    run: run.to_owned(),
                });
            }
            Some(holder) if *holder == me => return None,
            Some(_) => {
                held = DRIVING
                    .freed
                    .wait(held)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn one_thread_at_a_time_and_reentry() {
        let guard = enter("r-1").expect("a free run is held");
        assert!(enter("r-1").is_none(), "the holder enters again freely");
        let (tx, rx) = mpsc::channel();
        let other = thread::spawn(move || {
            let held = enter("r-1").is_some();
            tx.send(held).unwrap();
        });
        // The other thread waits while this one holds the run.
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(guard);
        assert!(rx.recv().unwrap(), "and holds it once it is free");
        other.join().unwrap();
        assert!(enter("r-2").is_some());
    }
}
