//! The quiet window: file events are gathered until none has come for `quiet`, or until the
//! first of them is `max_delay` old, whichever comes first. The debouncer alone keeps emitting
//! batches through an edit storm (a formatter, a `git checkout`, an editor saving every
//! keystroke); this turns a storm into one reload, or one per `max_delay` at worst. Pure: the
//! caller passes the time.

use std::time::{Duration, Instant};

/// What the caller should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing is pending: wait for an event, as long as it takes.
    Idle,
    /// Events are pending: wait at most this long (for more, or for the window to close).
    Wait(Duration),
    /// The window closed: reload now.
    Fire,
}

/// The gathering of one batch of events.
#[derive(Debug, Clone)]
pub struct QuietWindow {
    quiet: Duration,
    max_delay: Duration,
    /// (first event, latest event) of the pending batch.
    pending: Option<(Instant, Instant)>,
}

impl QuietWindow {
    /// A window that closes after `quiet` without events, or `max_delay` after its first one.
    pub fn new(quiet: Duration, max_delay: Duration) -> QuietWindow {
        QuietWindow {
            quiet,
            max_delay: max_delay.max(quiet),
            pending: None,
        }
    }

    /// An event arrived at `now`.
    pub fn note(&mut self, now: Instant) {
        self.pending = Some(match self.pending {
            Some((first, _)) => (first, now),
            None => (now, now),
        });
    }

    /// What to do at `now`.
    pub fn next(&self, now: Instant) -> Next {
        let Some((first, last)) = self.pending else {
            return Next::Idle;
        };
        let quiet_left = (last + self.quiet).saturating_duration_since(now);
        let delay_left = (first + self.max_delay).saturating_duration_since(now);
        let left = quiet_left.min(delay_left);
        if left.is_zero() {
            Next::Fire
        } else {
            Next::Wait(left)
        }
    }

    /// The batch was taken: the window is empty again.
    pub fn take(&mut self) {
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Events at the given offsets (ms), then `next` asked at `at` (ms): a table of cases
    /// with a 100 ms quiet window and a 500 ms maximum delay.
    #[test]
    fn the_window_closes_after_quiet_or_at_the_maximum_delay() {
        let cases: [(&[u64], u64, Next); 9] = [
            (&[], 0, Next::Idle),
            (&[], 10_000, Next::Idle),
            (&[0], 0, Next::Wait(ms(100))),
            (&[0], 40, Next::Wait(ms(60))),
            (&[0], 100, Next::Fire),
            // Each event pushes the quiet end further.
            (&[0, 80], 150, Next::Wait(ms(30))),
            (&[0, 80], 180, Next::Fire),
            // A storm: an event every 50 ms never leaves 100 ms of quiet, but the first
            // event's age closes the window at 500 ms.
            (
                &[0, 50, 100, 150, 200, 250, 300, 350, 400, 450],
                480,
                Next::Wait(ms(20)),
            ),
            (
                &[0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500],
                500,
                Next::Fire,
            ),
        ];
        let start = Instant::now();
        for (events, at, want) in cases {
            let mut window = QuietWindow::new(ms(100), ms(500));
            for e in events {
                window.note(start + ms(*e));
            }
            assert_eq!(window.next(start + ms(at)), want, "{events:?} at {at}");
        }
    }

    #[test]
    fn taking_the_batch_empties_the_window_and_a_new_one_starts_afresh() {
        let start = Instant::now();
        let mut window = QuietWindow::new(ms(100), ms(500));
        window.note(start);
        assert_eq!(window.next(start + ms(450)), Next::Fire);
        window.take();
        assert_eq!(window.next(start + ms(450)), Next::Idle);
        window.note(start + ms(460));
        // The maximum delay counts from the new batch's first event.
        assert_eq!(window.next(start + ms(520)), Next::Wait(ms(40)));
    }

    #[test]
    fn a_maximum_delay_below_the_quiet_time_is_raised_to_it() {
        let start = Instant::now();
        let mut window = QuietWindow::new(ms(100), ms(10));
        window.note(start);
        assert_eq!(window.next(start + ms(50)), Next::Wait(ms(50)));
    }
}
