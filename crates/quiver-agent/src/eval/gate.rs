//! Whether an evaluation passes: what `quiver eval` exits on, so CI can gate on a model's tool
//! choice. Nothing measured and turns that failed are errors; thresholds the user set are
//! checks.
//!
//! ```
//! use quiver_agent::eval::gate::{Failure, Thresholds, check};
//! let failures = check(&[], &Thresholds::default());
//! assert_eq!(failures, [Failure::NothingMeasured]);
//! ```

use serde::Serialize;

use super::{Expected, Mode, Run};

/// What the progressive run must reach (the eager baseline is for comparison only).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Thresholds {
    /// The least call accuracy, 0 to 1.
    pub min_accuracy: Option<f64>,
    /// The most false calls: cases that expected no call and made one.
    pub max_false_calls: Option<usize>,
}

/// Why an evaluation does not pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// No case ran: an empty case file measures nothing.
    NothingMeasured,
    /// Turns of a run failed (the model could not be reached, a request was refused).
    Errored {
        /// The run.
        mode: Mode,
        /// How many cases.
        cases: usize,
        /// The first case's id and error.
        first: String,
    },
    /// Call accuracy under `--min-accuracy`.
    Accuracy {
        /// Measured.
        got: f64,
        /// Asked for.
        min: f64,
    },
    /// More false calls than `--max-false-calls`.
    FalseCalls {
        /// Measured.
        got: usize,
        /// Allowed.
        max: usize,
    },
}

impl Failure {
    /// Whether the evaluation could not measure (exit 2) rather than measured too little
    /// (exit 1).
    pub fn is_error(&self) -> bool {
        matches!(self, Failure::NothingMeasured | Failure::Errored { .. })
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NothingMeasured => {
                write!(f, "nothing was measured: the case file has no case")
            }
            Failure::Errored { mode, cases, first } => {
                let mode = match mode {
                    Mode::Progressive => "progressive",
                    Mode::Eager => "eager",
                };
                write!(
                    f,
                    "{cases} case(s) of the {mode} run failed to run (first: {first})"
                )
            }
            Failure::Accuracy { got, min } => write!(
                f,
                "call accuracy {:.1}% is under --min-accuracy {:.1}%",
                got * 100.0,
                min * 100.0
            ),
            Failure::FalseCalls { got, max } => {
                write!(f, "{got} false call(s), more than --max-false-calls {max}")
            }
        }
    }
}

/// Cases of `run` that expected no call and made one.
pub fn false_calls(run: &Run) -> usize {
    run.cases
        .iter()
        .filter(|c| c.expected == Expected::None && !c.called.is_empty())
        .count()
}

/// Every reason `runs` do not pass `thresholds`; empty when they pass. Errors are checked in
/// every run, thresholds in the progressive one.
pub fn check(runs: &[Run], thresholds: &Thresholds) -> Vec<Failure> {
    if runs.iter().all(|r| r.cases.is_empty()) {
        return vec![Failure::NothingMeasured];
    }
    let mut failures = Vec::new();
    for run in runs {
        let errored: Vec<_> = run.cases.iter().filter(|c| c.error.is_some()).collect();
        if let Some(first) = errored.first() {
            failures.push(Failure::Errored {
                mode: run.mode,
                cases: errored.len(),
                first: format!("{}: {}", first.id, first.error.as_deref().unwrap_or("")),
            });
        }
    }
    if let Some(run) = runs.iter().find(|r| r.mode == Mode::Progressive) {
        if let Some(min) = thresholds.min_accuracy
            && run.metrics.call_accuracy < min
        {
            failures.push(Failure::Accuracy {
                got: run.metrics.call_accuracy,
                min,
            });
        }
        let got = false_calls(run);
        if let Some(max) = thresholds.max_false_calls
            && got > max
        {
            failures.push(Failure::FalseCalls { got, max });
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{CaseResult, metrics};

    fn case(id: &str, expected: Expected, called: &[&str], error: Option<&str>) -> CaseResult {
        let correct = error.is_none()
            && match &expected {
                Expected::None => called.is_empty(),
                Expected::Tool(t) => called.contains(&format!("tool:{t}").as_str()),
                Expected::Skill(s) => called.contains(&format!("skill:{s}").as_str()),
            };
        CaseResult {
            id: id.into(),
            expected,
            called: called.iter().map(|c| (*c).to_owned()).collect(),
            correct,
            arguments_match: None,
            latency_ms: 1.0,
            reply_chars: 1,
            tokens: 1,
            prompt_tokens: 1,
            error: error.map(str::to_owned),
        }
    }

    fn run(mode: Mode, cases: Vec<CaseResult>) -> Run {
        Run {
            mode,
            metrics: metrics(&cases),
            cases,
        }
    }

    #[test]
    fn the_gate_over_whole_runs() {
        let w = || Expected::Tool("weather.forecast".into());
        let good = || {
            vec![
                case("a", w(), &["tool:weather.forecast"], None),
                case("b", Expected::None, &[], None),
            ]
        };
        let one_false = || {
            vec![
                case("a", w(), &["tool:weather.forecast"], None),
                case("b", Expected::None, &["tool:notes.add"], None),
            ]
        };
        let strict = Thresholds {
            min_accuracy: Some(0.9),
            max_false_calls: Some(0),
        };
        let cases: Vec<(Vec<Run>, Thresholds, Vec<Failure>)> = vec![
            (
                vec![],
                Thresholds::default(),
                vec![Failure::NothingMeasured],
            ),
            (
                vec![run(Mode::Progressive, vec![])],
                strict,
                vec![Failure::NothingMeasured],
            ),
            (vec![run(Mode::Progressive, good())], strict, vec![]),
            (
                vec![run(Mode::Progressive, one_false())],
                Thresholds::default(),
                vec![],
            ),
            (
                vec![run(Mode::Progressive, one_false())],
                strict,
                vec![
                    Failure::Accuracy { got: 0.5, min: 0.9 },
                    Failure::FalseCalls { got: 1, max: 0 },
                ],
            ),
            (
                // The baseline's figures are not gated; its errors are.
                vec![
                    run(Mode::Progressive, good()),
                    run(
                        Mode::Eager,
                        vec![case("a", w(), &[], Some("cannot reach the model"))],
                    ),
                ],
                strict,
                vec![Failure::Errored {
                    mode: Mode::Eager,
                    cases: 1,
                    first: "a: cannot reach the model".into(),
                }],
            ),
        ];
        for (runs, thresholds, want) in cases {
            let got = check(&runs, &thresholds);
            assert_eq!(got, want, "{thresholds:?}");
            assert_eq!(
                got.iter().any(Failure::is_error),
                want.iter()
                    .any(|f| matches!(f, Failure::NothingMeasured | Failure::Errored { .. }))
            );
        }
    }
}
