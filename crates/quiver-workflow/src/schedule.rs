//! Cron schedules in a time zone (`croner`, `chrono-tz`): the next fire after a moment, and
//! which fires are due after a gap according to `catchup`. Each fire is keyed by its fire time
//! (Unix ms), which the store keeps unique per workflow, so a fire starts one run across crashes
//! and across processes.

use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use quiver_package::workflow::{Catchup, Schedule, Trigger, Workflow};
use serde::Serialize;

use crate::error::{Result, WorkflowError};

/// Most missed fires computed after a gap (`catchup: all` over a long downtime of a
/// per-minute schedule stops here).
pub const MAX_CATCHUP: usize = 1000;

/// Most fires of one schedule started at once, the newest: after a stall or an outage the
/// older ones are passed (coalesced into these), so a gap never starts a storm of runs.
pub const MAX_FIRES_AT_ONCE: usize = 10;

/// A fire within this long before now is on time, not missed.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// A schedule ready to compute fires.
#[derive(Debug, Clone)]
pub struct Compiled {
    cron: Cron,
    zone: Tz,
    catchup: Catchup,
}

impl Compiled {
    /// Compiles a parsed schedule.
    pub fn new(schedule: &Schedule) -> Result<Compiled> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(&schedule.cron)
            .map_err(|e| WorkflowError::Schedule(format!("`{}`: {e}", schedule.cron)))?;
        let zone: Tz = schedule.timezone.parse().map_err(|_| {
            WorkflowError::Schedule(format!("`{}` is not a time zone", schedule.timezone))
        })?;
        Ok(Compiled {
            cron,
            zone,
            catchup: schedule.catchup,
        })
    }

    /// The first fire strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Fires fall on whole seconds: `croner` keeps the fraction of `after`, which would
        // make the same fire a different key in each process.
        self.cron
            .find_next_occurrence(&after.with_timezone(&self.zone), false)
            .ok()
            .and_then(|t| t.with_timezone(&Utc).with_nanosecond(0))
    }

    /// The first fire strictly after `after`, in the schedule's zone.
    pub fn next_local(&self, after: DateTime<Utc>) -> Option<DateTime<Tz>> {
        self.next_after(after).map(|t| t.with_timezone(&self.zone))
    }

    /// Every fire in `(from, to]`, oldest first, at most [`MAX_CATCHUP`] (the newest kept).
    pub fn fires_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = std::collections::VecDeque::new();
        let mut at = from;
        while let Some(next) = self.next_after(at) {
            if next > to {
                break;
            }
            out.push_back(next);
            if out.len() > MAX_CATCHUP {
                out.pop_front();
            }
            at = next;
        }
        out.into()
    }

    /// The fires to start now, oldest first, given the last fire already handled (or when the
    /// schedule began to be watched): a fire within [`ON_TIME`] of `now` always; older (missed)
    /// ones as `catchup` says: `none` drops them, `latest` keeps the newest, `all` keeps every
    /// one; of all these, the newest [`MAX_FIRES_AT_ONCE`].
    pub fn due(&self, last: DateTime<Utc>, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let fires = self.fires_between(last, now);
        let on_time = chrono::Duration::from_std(ON_TIME).unwrap_or_default();
        let (missed, timely): (Vec<_>, Vec<_>) =
            fires.into_iter().partition(|f| now - *f > on_time);
        let mut out = match self.catchup {
            Catchup::None => Vec::new(),
            Catchup::Latest if timely.is_empty() => missed.last().copied().into_iter().collect(),
            Catchup::Latest => Vec::new(),
            Catchup::All => missed,
        };
        out.extend(timely);
        let passed = out.len().saturating_sub(MAX_FIRES_AT_ONCE);
        out.split_off(passed)
    }
}

/// One `schedule` trigger of a workflow and its next fire after a moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Upcoming {
    /// The trigger as declared (`cron`, `timezone`, `overlap`, `catchup`).
    #[serde(flatten)]
    pub schedule: Schedule,
    /// The next fire in the schedule's zone (RFC 3339 with the zone's offset then); `None`
    /// when it never fires again or does not compile.
    pub next: Option<String>,
    /// The same moment in Unix milliseconds (the fire's key).
    pub next_ms: Option<i64>,
    /// Why its next fire cannot be computed, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `schedule` triggers of `workflow`, each with its next fire after `now`.
pub fn upcoming(workflow: &Workflow, now: DateTime<Utc>) -> Vec<Upcoming> {
    workflow
        .triggers
        .iter()
        .filter_map(|t| match t {
            Trigger::Schedule(s) => Some(s),
            _ => None,
        })
        .map(|schedule| {
            let (next, error) = match Compiled::new(schedule) {
                Ok(compiled) => (compiled.next_local(now), None),
                Err(e) => (None, Some(e.to_string())),
            };
            Upcoming {
                schedule: schedule.clone(),
                next: next.map(|t| t.to_rfc3339()),
                next_ms: next.map(|t| t.timestamp_millis()),
                error,
            }
        })
        .collect()
}

/// A fire's key: its fire time in Unix milliseconds.
pub fn fire_key(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use chrono::TimeZone;

    fn schedule(cron: &str, zone: &str, catchup: Catchup) -> Compiled {
        Compiled::new(&Schedule {
            cron: cron.into(),
            timezone: zone.into(),
            overlap: Default::default(),
            catchup,
        })
        .unwrap()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn next_fire_in_a_zone() {
        let berlin = schedule("0 8 * * *", "Europe/Berlin", Catchup::None);
        let cases = [
            // Winter: 08:00 in Berlin is 07:00 UTC.
            (utc(2026, 1, 10, 12, 0), utc(2026, 1, 11, 7, 0)),
            // The day clocks go forward (29 March 2026): 08:00 CEST is 06:00 UTC.
            (utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 6, 0)),
            // The day clocks go back (25 October 2026): 07:00 UTC again.
            (utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 7, 0)),
            // Strictly after: a fire exactly at `after` is the next day's.
            (utc(2026, 1, 11, 7, 0), utc(2026, 1, 12, 7, 0)),
            // A fire falls on a whole second whatever the fraction of `after`.
            (
                utc(2026, 1, 10, 12, 0) + chrono::Duration::nanoseconds(862_710_225),
                utc(2026, 1, 11, 7, 0),
            ),
        ];
        for (after, want) in cases {
            assert_eq!(berlin.next_after(after), Some(want), "after {after}");
        }
        let weekdays = schedule("0 18 * * 1-5", "UTC", Catchup::None);
        // Friday 2 January 2026 → Monday 5 January.
        assert_eq!(
            weekdays.next_after(utc(2026, 1, 2, 19, 0)),
            Some(utc(2026, 1, 5, 18, 0))
        );
        let seconds = schedule("30 * * * * *", "UTC", Catchup::None);
        assert_eq!(
            seconds.next_after(utc(2026, 1, 1, 0, 0)),
            Some(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap())
        );
    }

    #[test]
    fn the_next_fire_is_shown_in_the_schedules_zone() {
        let cases = [
            // Winter in Berlin: +01:00.
            (
                "0 8 * * *",
                "Europe/Berlin",
                utc(2026, 1, 10, 12, 0),
                "2026-01-11T08:00:00+01:00",
            ),
            // Summer: +02:00.
            (
                "0 8 * * *",
                "Europe/Berlin",
                utc(2026, 7, 10, 12, 0),
                "2026-07-11T08:00:00+02:00",
            ),
            (
                "30 9 * * 1",
                "Asia/Shanghai",
                utc(2026, 1, 1, 0, 0),
                "2026-01-05T09:30:00+08:00",
            ),
            (
                "0 0 * * *",
                "UTC",
                utc(2026, 1, 1, 0, 0),
                "2026-01-02T00:00:00+00:00",
            ),
        ];
        for (cron, zone, now, want) in cases {
            let s = schedule(cron, zone, Catchup::None);
            assert_eq!(
                s.next_local(now).unwrap().to_rfc3339(),
                want,
                "{cron} {zone}"
            );
        }
    }

    #[test]
    fn dst_gaps_and_repeats() {
        // 02:30 does not exist in Berlin on 29 March 2026 and happens twice on 25 October.
        let s = schedule("30 2 * * *", "Europe/Berlin", Catchup::All);
        let spring = s.fires_between(utc(2026, 3, 27, 12, 0), utc(2026, 3, 30, 12, 0));
        let autumn = s.fires_between(utc(2026, 10, 23, 12, 0), utc(2026, 10, 26, 12, 0));
        // One fire per day, never two on one day, and none lost for good on the gap day
        // beyond that day itself.
        assert!(spring.contains(&utc(2026, 3, 28, 1, 30)), "{spring:?}");
        assert!(spring.contains(&utc(2026, 3, 30, 0, 30)), "{spring:?}");
        assert!(spring.len() <= 3, "{spring:?}");
        assert!(autumn.contains(&utc(2026, 10, 24, 0, 30)), "{autumn:?}");
        assert!(autumn.contains(&utc(2026, 10, 26, 1, 30)), "{autumn:?}");
        let on_25th: Vec<_> = autumn
            .iter()
            .filter(|t| {
                t.with_timezone(&chrono_tz::Europe::Berlin)
                    .date_naive()
                    .to_string()
                    == "2026-10-25"
            })
            .collect();
        assert!(on_25th.len() <= 2, "{autumn:?}");
    }

    #[test]
    fn catchup_after_a_gap() {
        // Hourly; the process was down from 03:10 to 07:20 (fires 04:00 … 07:00 missed).
        let clock = ManualClock::new(utc(2026, 5, 4, 7, 20));
        let last = utc(2026, 5, 4, 3, 10);
        let at = |h| utc(2026, 5, 4, h, 0);
        let cases = [
            (Catchup::None, vec![]),
            (Catchup::Latest, vec![at(7)]),
            (Catchup::All, vec![at(4), at(5), at(6), at(7)]),
        ];
        for (catchup, want) in cases {
            let s = schedule("0 * * * *", "UTC", catchup);
            assert_eq!(s.due(last, clock.now()), want, "{catchup:?}");
        }
        // A fire seen within a minute is on time, whatever the catch-up.
        clock.set(utc(2026, 5, 4, 8, 0) + chrono::Duration::seconds(5));
        for catchup in [Catchup::None, Catchup::Latest, Catchup::All] {
            let s = schedule("0 * * * *", "UTC", catchup);
            assert_eq!(s.due(at(7), clock.now()), vec![at(8)], "{catchup:?}");
        }
        // Nothing new: nothing due.
        let s = schedule("0 * * * *", "UTC", Catchup::All);
        assert!(s.due(at(8), clock.now()).is_empty());
        // A long gap of a per-minute schedule is capped, and starts its newest fires only.
        let minutely = schedule("* * * * *", "UTC", Catchup::All);
        let fires = minutely.fires_between(utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0));
        assert_eq!(fires.len(), MAX_CATCHUP);
        let fires = minutely.due(utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0));
        assert_eq!(fires.len(), MAX_FIRES_AT_ONCE);
        assert_eq!(fires.first(), Some(&utc(2026, 1, 1, 23, 51)));
        assert_eq!(fires.last(), Some(&utc(2026, 1, 2, 0, 0)));
        // A per-second schedule stalled for 50 s starts its newest 10 fires, all on time.
        let secondly = schedule("* * * * * *", "UTC", Catchup::None);
        let now = utc(2026, 1, 2, 0, 0);
        let fires = secondly.due(now - chrono::Duration::seconds(50), now);
        assert_eq!(fires.len(), MAX_FIRES_AT_ONCE);
        assert_eq!(fires.last(), Some(&now));
        assert_eq!(fire_key(at(7)), at(7).timestamp_millis());
    }

    #[test]
    fn bad_schedules_are_errors() {
        for (cron, zone) in [("61 * * * *", "UTC"), ("0 8 * * *", "Nowhere/City")] {
            let s = Schedule {
                cron: cron.into(),
                timezone: zone.into(),
                overlap: Default::default(),
                catchup: Catchup::None,
            };
            assert!(Compiled::new(&s).is_err(), "{cron} {zone}");
        }
    }
}
