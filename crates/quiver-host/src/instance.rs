//! This `quiver serve` instance in the store's registry ([`quiver_store::instances`]): a
//! thread registers it, then every third of the workflow lease heartbeats its row on the
//! store's clock, syncs the engines' clock with the store's ([`STORE_CLOCK`]), and reaps the
//! instances whose heartbeat stopped for a whole lease: each dead instance is handed to one
//! reaper, which ends the calls it had in flight as `interrupted`. Its workflow runs are taken
//! over by whichever scheduler finds their leases run out.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use quiver_runtime::Runtime;
use quiver_store::instances::NewInstance;
use quiver_workflow::{STORE_CLOCK, lease};

use crate::HostError;

/// The registration's thread; [`Registration::stop`] (or dropping it) ends it.
pub struct Registration {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Registration {
    /// Registers this process and starts its heartbeat; `None` without a workflow store.
    pub fn start(runtime: Arc<Runtime>) -> Result<Option<Registration>, HostError> {
        let Some(store) = runtime.workflow_store().cloned() else {
            return Ok(None);
        };
        let process = quiver_store::waiter::current();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        let pid = std::process::id();
        let me = NewInstance {
            id: format!(
                "{host}/{}",
                process.clone().unwrap_or_else(|| format!("pid-{pid}"))
            ),
            host,
            pid: i64::from(pid),
            process,
        };
        store
            .register_instance(&me)
            .map_err(|e| HostError::Scheduler(format!("cannot register this instance: {e}")))?;
        if let Err(error) = STORE_CLOCK.sync(store.as_ref()) {
            tracing::warn!(%error, "cannot read the store's clock");
        }
        tracing::info!(instance = %me.id, offset_ms = STORE_CLOCK.offset_ms(), "instance registered");
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("quiver-instance".into())
            .spawn(move || beat(&runtime, &me, &stopped))
            .map_err(|e| HostError::Scheduler(format!("cannot start a thread: {e}")))?;
        Ok(Some(Registration {
            stop,
            thread: Some(thread),
        }))
    }

    /// Ends the heartbeat (the row stays: with nothing in flight, a reaper finds nothing to
    /// close).
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        let (lock, changed) = &*self.stop;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shut();
    }
}

/// The heartbeat loop, until told to stop.
fn beat(runtime: &Runtime, me: &NewInstance, stop: &(Mutex<bool>, Condvar)) {
    let Some(store) = runtime.workflow_store() else {
        return;
    };
    let lease_ms = lease::configured_ms();
    let every = lease::heartbeat_every(lease_ms);
    let (lock, changed) = stop;
    loop {
        {
            let stopped = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let (stopped, _) = changed
                .wait_timeout_while(stopped, every, |stopped| !*stopped)
                .unwrap_or_else(PoisonError::into_inner);
            if *stopped {
                return;
            }
        }
        match store.heartbeat_instance(&me.id) {
            Ok(true) => {}
            Ok(false) => {
                // Taken for dead (stopped or cut off for a whole lease): its calls then were
                // closed as interrupted and its runs taken over; it goes on as new.
                tracing::warn!(instance = %me.id, "this instance was reaped while it was unresponsive; registering again");
                if let Err(error) = store.register_instance(me) {
                    tracing::warn!(%error, "cannot register this instance again");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot heartbeat this instance"),
        }
        if let Err(error) = STORE_CLOCK.sync(store.as_ref()) {
            tracing::warn!(%error, "cannot read the store's clock");
        }
        let reaped = match store.reap_instances(lease_ms, &me.id) {
            Ok(reaped) => reaped,
            Err(error) => {
                tracing::warn!(%error, "cannot look for dead instances");
                continue;
            }
        };
        for dead in reaped {
            let closed = dead
                .process
                .as_deref()
                .map(|process| runtime.close_calls_of(process));
            match closed {
                Some(Err(error)) => {
                    tracing::warn!(instance = %dead.id, %error, "cannot close a dead instance's calls");
                }
                closed => tracing::warn!(
                    instance = %dead.id,
                    calls = closed.and_then(Result::ok).map_or(0, |c| c.len()),
                    "a dead instance was reaped: its calls in flight are closed as interrupted, its runs are taken over once their leases run out"
                ),
            }
        }
    }
}
