//! `/charts`: what a person would rather look at than read, over a time window kept in the URL
//! (`?window=1h|24h|7d|30d`): calls and refusals over time per package (from the audit), the
//! prompt tokens of each counted turn against the eager baseline (the audit's `turn` records),
//! and workflow step latency (from the runs' attempts). Drawn as SVG by [`crate::chart`].

use std::collections::BTreeMap;

use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use quiver_store::workflow::RunFilter;
use quiver_store::{AuditKind, AuditQuery, AuditRecord, AuditStatus};
use serde::{Deserialize, Serialize};

use crate::ConsoleError;
use crate::chart::{self, Chart, Kind, Series};
use crate::pages::{self, Chrome};
use crate::server::{Ctx, Who};

/// The audit kind of a counted turn: `detail` holds `prompt_tokens` and `eager_tokens`.
const TURN_KIND: &str = quiver_runtime::TURN_TOKENS_KIND;
/// Most call records read for one window.
const MAX_CALLS: usize = 100_000;
/// Most turns drawn (the newest).
const MAX_TURNS: usize = 60;
/// Most runs read for step latency (the newest).
const MAX_RUNS: usize = 200;
/// Most packages drawn (those with the most calls).
const MAX_PACKAGES: usize = 8;
/// Most steps drawn (those run most often).
const MAX_STEPS: usize = 12;

/// A time window: its name in the URL, its length and its slot (both ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub name: &'static str,
    pub span: i64,
    pub slot: i64,
}

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// The windows a person can pick, the default first.
pub(crate) const WINDOWS: [Window; 4] = [
    Window {
        name: "24h",
        span: DAY,
        slot: HOUR,
    },
    Window {
        name: "1h",
        span: HOUR,
        slot: 5 * 60_000,
    },
    Window {
        name: "7d",
        span: 7 * DAY,
        slot: DAY,
    },
    Window {
        name: "30d",
        span: 30 * DAY,
        slot: DAY,
    },
];

/// The window named `name` (the default when none); an error naming the choices otherwise.
pub(crate) fn window(name: Option<&str>) -> Result<Window, ConsoleError> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(WINDOWS[0]),
        Some(n) => WINDOWS
            .iter()
            .find(|w| w.name == n)
            .copied()
            .ok_or_else(|| {
                ConsoleError::BadRequest(format!("window must be 1h, 24h, 7d or 30d, not `{n}`"))
            }),
    }
}

/// The slots of `window` ending at `now`: each slot's start (ms), oldest first, the last one
/// holding `now`.
pub(crate) fn slots(window: Window, now: i64) -> Vec<i64> {
    let n = window.span / window.slot;
    let last = now - now.rem_euclid(window.slot);
    (0..n).rev().map(|k| last - k * window.slot).collect()
}

/// A slot's label: the time of day for slots under a day, else the date (UTC).
pub(crate) fn slot_label(window: Window, start: i64) -> String {
    let text = pages::time_text(start);
    if window.slot < DAY {
        text.get(11..16).unwrap_or(&text).to_owned()
    } else {
        text.get(5..10).unwrap_or(&text).to_owned()
    }
}

/// The package of a call's qualified tool name (`weather.forecast` → `weather`); the
/// runtime's own meta-tools (no dot) count under `(runtime)`.
pub(crate) fn package_of(tool: &str) -> &str {
    tool.split_once('.').map_or("(runtime)", |(p, _)| p)
}

/// Calls and refusals per package and slot, packages with the most calls first.
pub(crate) fn calls_per_package(
    records: &[AuditRecord],
    starts: &[i64],
    slot: i64,
) -> Vec<(String, Vec<f64>, Vec<f64>)> {
    let mut by: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let Some(first) = starts.first() else {
        return Vec::new();
    };
    for r in records {
        let e = &r.entry;
        let (Some(tool), true) = (e.tool.as_deref(), e.kind == AuditKind::Call) else {
            continue;
        };
        let offset = e.time - first;
        if offset < 0 {
            continue;
        }
        let Ok(i) = usize::try_from(offset / slot) else {
            continue;
        };
        if i >= starts.len() {
            continue;
        }
        let entry = by
            .entry(package_of(tool).to_owned())
            .or_insert_with(|| (vec![0.0; starts.len()], vec![0.0; starts.len()]));
        entry.0[i] += 1.0;
        if e.status == AuditStatus::Refused {
            entry.1[i] += 1.0;
        }
    }
    let mut out: Vec<(String, Vec<f64>, Vec<f64>)> =
        by.into_iter().map(|(p, (c, r))| (p, c, r)).collect();
    out.sort_by(|a, b| {
        let total = |v: &[f64]| v.iter().sum::<f64>();
        total(&b.1).total_cmp(&total(&a.1)).then(a.0.cmp(&b.0))
    });
    out.truncate(MAX_PACKAGES);
    out
}

/// One counted turn: its time, its prompt's tokens and the eager baseline's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TurnTokens {
    pub at: i64,
    pub prompt_tokens: u64,
    /// `None` when the turn's loop could not measure the baseline.
    pub eager_tokens: Option<u64>,
}

/// The counted turns among `records` (oldest first: by time, then by id for turns of one
/// millisecond), at most [`MAX_TURNS`] of the newest.
pub(crate) fn turn_tokens(records: &[AuditRecord]) -> Vec<TurnTokens> {
    let mut records: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.entry.kind.as_str() == TURN_KIND)
        .collect();
    records.sort_by_key(|r| (r.entry.time, r.id));
    let turns: Vec<TurnTokens> = records
        .into_iter()
        .filter_map(|r| {
            let d = r.entry.detail.as_ref()?;
            Some(TurnTokens {
                at: r.entry.time,
                prompt_tokens: d["prompt_tokens"].as_u64()?,
                eager_tokens: d["eager_tokens"].as_u64(),
            })
        })
        .collect();
    let skip = turns.len().saturating_sub(MAX_TURNS);
    turns[skip..].to_vec()
}

/// A step's latency over its finished attempts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StepLatency {
    /// `workflow · step`.
    pub step: String,
    pub attempts: usize,
    pub mean_ms: f64,
    pub max_ms: f64,
}

/// The latency of each step from `(workflow, step, started, finished)` attempts, the steps
/// run most often first.
pub(crate) fn step_latency(attempts: &[(String, String, i64, i64)]) -> Vec<StepLatency> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (workflow, step, started, finished) in attempts {
        let ms = (finished - started).max(0) as f64;
        by.entry(format!("{workflow} · {step}"))
            .or_default()
            .push(ms);
    }
    let mut out: Vec<StepLatency> = by
        .into_iter()
        .map(|(step, ms)| StepLatency {
            step,
            attempts: ms.len(),
            mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
            max_ms: ms.iter().copied().fold(0.0, f64::max),
        })
        .collect();
    out.sort_by(|a, b| b.attempts.cmp(&a.attempts).then(a.step.cmp(&b.step)));
    out.truncate(MAX_STEPS);
    out
}

/// The figures behind the charts (the JSON answer).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Figures {
    pub window: &'static str,
    pub since: i64,
    pub slots: Vec<String>,
    pub packages: Vec<PackageCalls>,
    pub turns: Vec<TurnTokens>,
    pub steps: Vec<StepLatency>,
}

/// Calls and refusals of one package, per slot.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PackageCalls {
    pub package: String,
    /// Its display name, when it has one of its own.
    pub name: Option<String>,
    pub calls: Vec<f64>,
    pub refusals: Vec<f64>,
}

/// The charts drawn from `figures`, each an SVG element.
pub(crate) fn draw(figures: &Figures) -> Vec<String> {
    let mut out: Vec<String> = figures
        .packages
        .iter()
        .map(|p| {
            chart::svg(&Chart {
                title: match &p.name {
                    Some(name) => format!("{} · {name}: calls and refusals", p.package),
                    None => format!("{}: calls and refusals", p.package),
                },
                unit: "calls".into(),
                kind: Kind::Bars,
                labels: figures.slots.clone(),
                series: vec![
                    Series {
                        name: "calls".into(),
                        values: p.calls.clone(),
                    },
                    Series {
                        name: "refused".into(),
                        values: p.refusals.clone(),
                    },
                ],
            })
        })
        .collect();
    if figures.packages.is_empty() {
        out.push(chart::svg(&Chart {
            title: "Calls and refusals".into(),
            unit: "calls".into(),
            kind: Kind::Bars,
            labels: Vec::new(),
            series: Vec::new(),
        }));
    }
    let labels = figures
        .turns
        .iter()
        .map(|t| slot_label(WINDOWS[1], t.at))
        .collect();
    out.push(chart::svg(&Chart {
        title: "Prompt tokens per turn against the eager baseline".into(),
        unit: "tokens".into(),
        kind: Kind::Lines,
        labels,
        series: vec![
            Series {
                name: "prompt (progressive)".into(),
                values: figures
                    .turns
                    .iter()
                    .map(|t| t.prompt_tokens as f64)
                    .collect(),
            },
            Series {
                name: "eager baseline".into(),
                values: figures
                    .turns
                    .iter()
                    .map(|t| t.eager_tokens.map_or(f64::NAN, |e| e as f64))
                    .collect(),
            },
        ],
    }));
    out.push(chart::svg(&Chart {
        title: "Workflow step latency".into(),
        unit: "ms".into(),
        kind: Kind::Bars,
        labels: figures.steps.iter().map(|s| s.step.clone()).collect(),
        series: vec![
            Series {
                name: "mean".into(),
                values: figures.steps.iter().map(|s| s.mean_ms).collect(),
            },
            Series {
                name: "max".into(),
                values: figures.steps.iter().map(|s| s.max_ms).collect(),
            },
        ],
    }));
    out
}

/// The URL query of `/charts`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ChartQuery {
    #[serde(default)]
    pub window: Option<String>,
}

/// A window choice on the page.
pub(crate) struct Choice {
    pub name: &'static str,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "charts.html")]
struct ChartsPage {
    chrome: Chrome,
    choices: Vec<Choice>,
    since: String,
    charts: Vec<String>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `GET /charts?window=`.
pub(crate) async fn show(
    State(ctx): State<Ctx>,
    Extension(who): Extension<Who>,
    headers: HeaderMap,
    Query(query): Query<ChartQuery>,
) -> Result<Response, ConsoleError> {
    let window = window(query.window.as_deref())?;
    let now = now_ms();
    let starts = slots(window, now);
    let since = starts.first().copied().unwrap_or(now);
    let names: BTreeMap<String, String> = ctx
        .console
        .runtime
        .as_ref()
        .map(|r| {
            r.catalog()
                .packages()
                .iter()
                .map(|cp| (cp.package.id.to_string(), cp.package.name.clone()))
                .collect()
        })
        .unwrap_or_default();
    let figures = pages::with_admin(&ctx, move |admin| {
        let calls = admin.audit(&AuditQuery {
            kind: Some(AuditKind::Call),
            since: Some(since),
            limit: Some(MAX_CALLS),
            ..AuditQuery::default()
        })?;
        let packages = calls_per_package(&calls, &starts, window.slot)
            .into_iter()
            .map(|(package, calls, refusals)| PackageCalls {
                name: names
                    .get(&package)
                    .filter(|n| **n != package)
                    .map(|n| crate::escape_invisible(n)),
                package: crate::escape_invisible(&package),
                calls,
                refusals,
            })
            .collect();
        let turns = admin.audit(&AuditQuery {
            kind: Some(AuditKind::from(TURN_KIND.to_owned())),
            since: Some(since),
            limit: Some(MAX_TURNS),
            ..AuditQuery::default()
        })?;
        let mut attempts = Vec::new();
        let runs = admin.runs(&RunFilter {
            limit: Some(MAX_RUNS),
            ..RunFilter::default()
        })?;
        for run in runs.iter().filter(|r| r.updated_at >= since) {
            if let Some(view) = admin.run(&run.id)? {
                for a in view.attempts {
                    if let Some(finished) = a.finished_at
                        && finished >= since
                    {
                        attempts.push((
                            run.workflow.clone(),
                            a.step_id.clone(),
                            a.started_at,
                            finished,
                        ));
                    }
                }
            }
        }
        Ok(Figures {
            window: window.name,
            since,
            slots: starts.iter().map(|s| slot_label(window, *s)).collect(),
            packages,
            turns: turn_tokens(&turns),
            steps: step_latency(&attempts),
        })
    })
    .await?;
    if pages::wants_json(&headers) {
        return Ok(pages::json(&figures));
    }
    let chrome = pages::chrome(&ctx, &who).await?;
    let choices = WINDOWS
        .iter()
        .map(|w| Choice {
            name: w.name,
            current: w.name == figures.window,
        })
        .collect();
    pages::html(&ChartsPage {
        chrome,
        choices,
        since: pages::time_text(figures.since),
        charts: draw(&figures),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_store::AuditEntry;

    fn call(time: i64, tool: &str, status: AuditStatus) -> AuditRecord {
        let mut entry = AuditEntry::new(AuditKind::Call, "s");
        entry.time = time;
        entry.tool = Some(tool.to_owned());
        entry.status = status;
        AuditRecord { id: 1, entry }
    }

    #[test]
    fn windows_and_slots() {
        assert_eq!(window(None).unwrap().name, "24h");
        assert_eq!(window(Some("")).unwrap().name, "24h");
        assert_eq!(window(Some("7d")).unwrap().name, "7d");
        assert!(window(Some("1y")).is_err());
        let cases = [("1h", 12), ("24h", 24), ("7d", 7), ("30d", 30)];
        let now = 1_764_788_700_123; // 2025-12-03 19:05:00.123Z
        for (name, n) in cases {
            let w = window(Some(name)).unwrap();
            let s = slots(w, now);
            assert_eq!(s.len(), n, "{name}");
            let last = *s.last().unwrap();
            assert!(last <= now && now < last + w.slot, "{name}");
        }
        assert_eq!(slot_label(WINDOWS[0], 1_764_788_700_000), "19:05");
        assert_eq!(slot_label(WINDOWS[2], 1_764_788_700_000), "12-03");
    }

    #[test]
    fn calls_are_counted_per_package_and_slot() {
        let starts = [0, 10, 20];
        let records = [
            call(0, "weather.forecast", AuditStatus::Ok),
            call(5, "weather.forecast", AuditStatus::Refused),
            call(25, "weather.forecast", AuditStatus::Ok),
            call(12, "notes.add", AuditStatus::Refused),
            call(12, "tool_search", AuditStatus::Ok),
            call(-1, "weather.forecast", AuditStatus::Ok),
            call(30, "weather.forecast", AuditStatus::Ok),
        ];
        let got = calls_per_package(&records, &starts, 10);
        let want = vec![
            (
                "weather".to_owned(),
                vec![2.0, 0.0, 1.0],
                vec![1.0, 0.0, 0.0],
            ),
            ("(runtime)".to_owned(), vec![0.0, 1.0, 0.0], vec![0.0; 3]),
            ("notes".to_owned(), vec![0.0, 1.0, 0.0], vec![0.0, 1.0, 0.0]),
        ];
        assert_eq!(got, want);
        assert!(calls_per_package(&records, &[], 10).is_empty());
    }

    #[test]
    fn turns_of_one_millisecond_keep_their_order() {
        let turn = |id: i64, tokens: u64| {
            let mut entry = AuditEntry::new(AuditKind::from(TURN_KIND.to_owned()), "s");
            entry.time = 7;
            entry.detail = Some(serde_json::json!({"prompt_tokens": tokens}));
            AuditRecord { id, entry }
        };
        // The audit answers newest first.
        let records = [turn(9, 654), turn(8, 321)];
        let tokens: Vec<u64> = turn_tokens(&records)
            .iter()
            .map(|t| t.prompt_tokens)
            .collect();
        assert_eq!(tokens, vec![321, 654]);
    }

    #[test]
    fn turns_and_steps() {
        let mut turn = AuditEntry::new(AuditKind::from(TURN_KIND.to_owned()), "s");
        turn.time = 7;
        turn.detail = Some(serde_json::json!({"prompt_tokens": 120, "eager_tokens": 900}));
        let mut bare = turn.clone();
        bare.detail = None;
        let records = [
            AuditRecord { id: 2, entry: turn },
            AuditRecord { id: 3, entry: bare },
            call(1, "a.b", AuditStatus::Ok),
        ];
        assert_eq!(
            turn_tokens(&records),
            vec![TurnTokens {
                at: 7,
                prompt_tokens: 120,
                eager_tokens: Some(900)
            }]
        );
        let attempts = [
            ("w".to_owned(), "a".to_owned(), 0, 100),
            ("w".to_owned(), "a".to_owned(), 0, 300),
            ("w".to_owned(), "b".to_owned(), 10, 5),
        ];
        let got = step_latency(&attempts);
        assert_eq!(got.len(), 2);
        assert_eq!(
            (
                got[0].step.as_str(),
                got[0].attempts,
                got[0].mean_ms,
                got[0].max_ms
            ),
            ("w · a", 2, 200.0, 300.0)
        );
        assert_eq!((got[1].mean_ms, got[1].max_ms), (0.0, 0.0));
    }
}
