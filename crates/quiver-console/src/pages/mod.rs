//! The pages, one file per page or group of pages. Each handler builds one view, answered as
//! JSON to a script (`Accept: application/json`) and as HTML (a whole page, or a fragment for
//! a `?part=` request) to a browser.

use askama::Template;
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};
use quiver_runtime::admin::Admin;
use serde::Serialize;

use crate::ConsoleError;
use crate::server::{Ctx, Who};

pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod authoring;
pub(crate) mod bridge;
pub(crate) mod charts;
pub(crate) mod control;
pub(crate) mod login;
pub(crate) mod operator_cards;
pub(crate) mod overview;
pub(crate) mod package_pages;
pub(crate) mod packages;
pub(crate) mod run_ops;
pub(crate) mod sessions;

/// What every page's frame shows: the CSRF token of its forms, the control plane's mode and
/// the number of pending cards.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Chrome {
    #[serde(skip)]
    pub csrf: String,
    pub mode: String,
    pub pending: usize,
}

/// Runs `work` on the operator's door off the async threads (the store blocks).
pub(crate) async fn with_admin<T: Send + 'static>(
    ctx: &Ctx,
    work: impl FnOnce(&Admin) -> Result<T, ConsoleError> + Send + 'static,
) -> Result<T, ConsoleError> {
    let admin = ctx.console.admin.clone();
    tokio::task::spawn_blocking(move || work(&admin))
        .await
        .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))?
}

/// The frame of a page for `who`.
pub(crate) async fn chrome(ctx: &Ctx, who: &Who) -> Result<Chrome, ConsoleError> {
    let csrf = who.csrf.clone();
    with_admin(ctx, move |admin| {
        let mode = quiver_runtime::operator::control_name(admin.switches()?.control).to_owned();
        let pending = admin.pending_approvals(None)?.len();
        Ok(Chrome {
            csrf,
            mode,
            pending,
        })
    })
    .await
}

/// Whether the request wants JSON.
pub(crate) fn wants_json(headers: &HeaderMap) -> bool {
    crate::negotiate::wants_json(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
}

/// Whether htmx sent the request (it swaps the fragment it gets back).
pub(crate) fn from_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// A rendered template as an HTML answer.
pub(crate) fn html(page: &impl Template) -> Result<Response, ConsoleError> {
    Ok(Html(page.render()?).into_response())
}

/// `view` as JSON.
pub(crate) fn json(view: &impl Serialize) -> Response {
    axum::Json(view).into_response()
}

/// Formats a duration in whole seconds for a person (`42 s`, `3 min 5 s`, `2 h 1 min`).
pub(crate) fn duration_text(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// A Unix-ms time as UTC text (`2026-12-03 19:05:00Z`).
pub(crate) fn time_text(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times() {
        let cases = [
            (0, "0 s"),
            (59, "59 s"),
            (61, "1 min 1 s"),
            (7260, "2 h 1 min"),
            (-5, "0 s"),
        ];
        for (s, want) in cases {
            assert_eq!(duration_text(s), want);
        }
        let times = [
            (0, "1970-01-01 00:00:00Z"),
            (1_764_788_700_000, "2025-12-03 19:05:00Z"),
            (951_782_400_000, "2000-02-29 00:00:00Z"),
        ];
        for (ms, want) in times {
            assert_eq!(time_text(ms), want);
        }
    }
}
