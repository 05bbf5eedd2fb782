//! Time, behind a trait so that timers, backoff, approval timeouts and schedules are tested
//! without sleeping.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Where the engine reads the time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;

    /// Now in Unix milliseconds.
    fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    /// Sets the time.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = to;
    }

    /// Moves the time forward.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::zero());
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A Unix-millisecond time as a UTC date (the epoch for one out of range).
pub fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The store's clock as this process reads it: the system clock plus the offset to the store's
/// clock measured at the last [`StoreClock::sync`] (none before the first). Instances that share
/// one PostgreSQL database set timers, retries and deadlines on it, and compare `wake_at` with
/// it, so a wait stored by one instance fires at the same moment at every other, whatever
/// their own clocks say.
#[derive(Debug, Default)]
pub struct StoreClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl StoreClock {
    /// A clock at offset 0 (the system clock) until synced.
    pub const fn new() -> StoreClock {
        StoreClock {
            offset_ms: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// Reads the store's clock and keeps its offset to this machine's (taking the read to
    /// have happened halfway through its round trip); returns the offset in ms.
    pub fn sync(&self, store: &dyn quiver_store::WorkflowStore) -> quiver_store::Result<i64> {
        let before = Utc::now().timestamp_millis();
        let theirs = store.clock_ms()?;
        let after = Utc::now().timestamp_millis();
        let offset = theirs - before.midpoint(after);
        self.offset_ms
            .store(offset, std::sync::atomic::Ordering::Relaxed);
        Ok(offset)
    }

    /// The offset last measured (ms; positive when the store's clock is ahead).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Clock for StoreClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms())
    }
}

/// This process's [`StoreClock`]: its engines' clock, synced by `quiver serve`'s instance
/// heartbeat.
pub static STORE_CLOCK: StoreClock = StoreClock::new();
