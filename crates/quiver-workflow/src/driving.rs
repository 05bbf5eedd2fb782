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

/// What [`enter`] found.
pub(crate) enum Entered {
    /// The run is this thread's until the guard drops.
    Held(Guard),
    /// This thread drives the run already, further up its stack.
    Reentered,
    /// Another thread drives it (only when not waiting).
    Busy,
}

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

/// Holds `run` for this thread; `wait`: until another thread lets go of it, else
/// [`Entered::Busy`] at once.
pub(crate) fn enter(run: &str, wait: bool) -> Entered {
    let me = thread::current().id();
    let mut held = DRIVING.held.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        match held.get(run) {
            None => {
                held.insert(run.to_owned(), me);
                return Entered::Held(Guard {
                    run: run.to_owned(),
                });
            }
            Some(holder) if *holder == me => return Entered::Reentered,
            Some(_) if !wait => return Entered::Busy,
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

    #[test]
    fn one_thread_at_a_time_and_reentry() {
        let Entered::Held(guard) = enter("r-1", true) else {
            panic!("a free run is held")
        };
        assert!(matches!(enter("r-1", true), Entered::Reentered));
        let (tx, rx) = mpsc::channel();
        let other = thread::spawn(move || {
            let busy = matches!(enter("r-1", false), Entered::Busy);
            tx.send(busy).unwrap();
            // Waits until the first thread lets go.
            matches!(enter("r-1", true), Entered::Held(_))
        });
        assert!(rx.recv().unwrap(), "another thread finds the run busy");
        drop(guard);
        assert!(other.join().unwrap(), "and holds it once it is free");
        assert!(matches!(enter("r-2", false), Entered::Held(_)));
    }
}
