//! The pause before a failed step's next attempt.

use std::time::Duration;

use quiver_package::workflow::{Backoff, Retry};

/// How long to wait after attempt `failed` (1-based) failed, before the next one; `None` when
/// it was the last attempt allowed.
pub fn delay(retry: &Retry, failed: u32) -> Option<Duration> {
    if failed >= retry.max_attempts {
        return None;
    }
    let (initial, max) = (retry.initial.0, retry.max.0.max(retry.initial.0));
    Some(match retry.backoff {
        Backoff::Fixed => initial,
        Backoff::Exponential => {
            let factor = 2u32.saturating_pow(failed.saturating_sub(1));
            initial.checked_mul(factor).unwrap_or(max).min(max)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_package::common::Seconds;

    fn retry(max_attempts: u32, backoff: Backoff, initial: u64, max: u64) -> Retry {
        Retry {
            max_attempts,
            backoff,
            initial: Seconds(Duration::from_secs(initial)),
            max: Seconds(Duration::from_secs(max)),
        }
    }

    #[test]
    fn table() {
        use Backoff::*;
        let cases: &[(Retry, u32, Option<u64>)] = &[
            (retry(3, Fixed, 5, 60), 1, Some(5)),
            (retry(3, Fixed, 5, 60), 2, Some(5)),
            (retry(3, Fixed, 5, 60), 3, None),
            (retry(1, Exponential, 1, 60), 1, None),
            (retry(10, Exponential, 1, 60), 1, Some(1)),
            (retry(10, Exponential, 1, 60), 2, Some(2)),
            (retry(10, Exponential, 1, 60), 4, Some(8)),
            (retry(10, Exponential, 1, 60), 7, Some(60)),
            (retry(100, Exponential, 1, 60), 99, Some(60)),
            (retry(u32::MAX, Exponential, 3600, 7200), 80, Some(7200)),
            // A `max` below `initial` never shortens the first pause.
            (retry(5, Exponential, 10, 1), 1, Some(10)),
            (retry(5, Exponential, 10, 1), 3, Some(10)),
        ];
        for (r, failed, want) in cases {
            assert_eq!(
                delay(r, *failed),
                want.map(Duration::from_secs),
                "{r:?} after {failed}"
            );
        }
    }
}
