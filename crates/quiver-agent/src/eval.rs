//! `quiver eval`: does the model pick the right tool? Cases (YAML or JSONL) pair a request
//! with what should happen — a tool, a skill, or nothing, optionally with arguments — and
//! each runs as one turn in a fresh session. The figures are the agent-skills design's: call
//! accuracy, false-call rate, wrong-tool rate, argument accuracy, mean latency, mean reply
//! length and tokens per turn, for progressive disclosure and, with the eager baseline, for
//! every tool schema in the prompt and no meta-tools.
//!
//! A case passes when the expected tool (or skill) is among the turn's calls, or, when
//! nothing is expected, when the turn calls no tool and reads no skill (`tool_search` and
//! `load_tool` alone are not calls). Evaluation never runs package code: tools answer
//! through [`DryRun`].

use std::path::Path;
use std::sync::Arc;

use quiver_catalog::Catalog;
use quiver_policy::Principal;
use quiver_runtime::approver::{Answer, Approver, Card};
use quiver_runtime::executor::{ExecError, Execution, Executor};
use quiver_runtime::{Profile, Runtime, SessionRequest};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agents::Providers;
use crate::error::AgentError;
use crate::session::{ChatSession, Quiet, TurnReport};

pub mod gate;

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    /// This tool (or agent, or workflow), qualified `<package>.<item>` or a wire name.
    Tool(String),
    /// This skill id.
    Skill(String),
    /// No call.
    None,
}

/// One case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    /// Its name (the request when none is given).
    pub id: String,
    /// The user's message.
    pub request: String,
    /// What should happen.
    pub expected: Expected,
    /// Arguments the call should carry (a subset of what it sends).
    pub arguments: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    #[serde(default, alias = "name")]
    id: Option<String>,
    request: String,
    #[serde(default)]
    expect: Option<RawExpect>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    skill: Option<String>,
    #[serde(default)]
    none: bool,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawExpect {
    Word(String),
    Detail {
        #[serde(default)]
        tool: Option<String>,
        #[serde(default)]
        skill: Option<String>,
        #[serde(default)]
        none: bool,
        #[serde(default)]
        arguments: Option<Map<String, Value>>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wrapped {
    cases: Vec<RawCase>,
}

fn case_of(raw: RawCase, n: usize) -> Result<Case, String> {
    let (mut tool, mut skill, mut none, mut arguments) =
        (raw.tool, raw.skill, raw.none, raw.arguments);
    match raw.expect {
        None => {}
        Some(RawExpect::Word(w)) if w == "none" => none = true,
        Some(RawExpect::Word(w)) => tool = Some(w),
        Some(RawExpect::Detail {
            tool: t,
            skill: s,
            none: n,
            arguments: a,
        }) => {
            tool = tool.or(t);
            skill = skill.or(s);
            none |= n;
            arguments = arguments.or(a);
        }
    }
    let expected = match (tool, skill, none) {
        (Some(t), None, false) => Expected::Tool(t),
        (None, Some(s), false) => Expected::Skill(s),
        (None, None, true) => Expected::None,
        (None, None, false) => {
            return Err(format!(
                "case {n}: say what should happen: `tool`, `skill` or `none: true`"
            ));
        }
        _ => return Err(format!("case {n}: expect one of `tool`, `skill` or `none`")),
    };
    if raw.request.trim().is_empty() {
        return Err(format!("case {n}: `request` is empty"));
    }
    Ok(Case {
        id: raw.id.unwrap_or_else(|| raw.request.clone()),
        request: raw.request,
        expected,
        arguments,
    })
}

/// Reads cases: JSON Lines when the file ends in `.jsonl`, YAML otherwise (a list, or a
/// mapping with `cases:`).
pub fn parse_cases(text: &str, file: &Path) -> Result<Vec<Case>, AgentError> {
    let err = |message: String| AgentError::Cases {
        file: file.display().to_string(),
        message,
    };
    let raws: Vec<RawCase> = if file.extension().is_some_and(|e| e == "jsonl") {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with("//") {
                continue;
            }
            out.push(serde_json::from_str(line).map_err(|e| err(format!("line {}: {e}", i + 1)))?);
        }
        out
    } else {
        let wrapped = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
            .is_some_and(|l| !l.starts_with('-') && !l.starts_with('['));
        let parsed = if wrapped {
            quiver_package::yaml::parse::<Wrapped>(text, file, 1).map(|w| w.cases)
        } else {
            quiver_package::yaml::parse::<Vec<RawCase>>(text, file, 1)
        };
        match parsed {
            Ok(cases) => cases,
            Err(d) => {
                return Err(err(match d.line {
                    Some(l) => format!("line {l}: {}", d.message),
                    None => d.message,
                }));
            }
        }
    };
    if raws.is_empty() {
        return Err(err("no cases".into()));
    }
    raws.into_iter()
        .enumerate()
        .map(|(i, r)| case_of(r, i + 1).map_err(&err))
        .collect()
}

/// Which tools a run offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The catalog and meta-tools; tools appear when searched or opened.
    Progressive,
    /// Every exposed tool's schema in every request, no meta-tools, no catalog.
    Eager,
}

/// The agent profile of eager sessions (it has no meta-tools).
pub const EAGER_AGENT: &str = "eager";

/// An executor that runs nothing: each call answers `{"dry_run": true}`.
pub struct DryRun;

impl Executor for DryRun {
    fn execute(&self, execution: &Execution<'_>) -> Result<Value, ExecError> {
        Ok(
            json!({"dry_run": true, "tool": format!("{}.{}", execution.package, execution.tool), "note": "evaluation: the tool was not run"}),
        )
    }
}

/// Answers consent and ordinary approvals with yes, and nothing that needs a person.
pub struct EvalApprover;

impl Approver for EvalApprover {
    fn decide(&self, card: &Card) -> Answer {
        if card.needs_person {
            Answer::Deny
        } else {
            Answer::AllowForSession
        }
    }
}

/// Loads every exposed item of the catalog into `session` (the eager baseline's tool list).
pub fn load_every_tool(runtime: &Runtime, session: &str) -> Result<(), AgentError> {
    let catalog = runtime.catalog();
    let every: Vec<String> = catalog
        .items()
        .iter()
        .filter(|i| i.exposed && !i.hidden && i.wire.is_some())
        .filter(|i| {
            catalog
                .tool(i)
                .is_none_or(|t| t.scope == quiver_package::tool::ToolScope::Package)
        })
        .map(|i| i.qualified.clone())
        .collect();
    runtime.load_for_profile(session, &every, every.len().max(1))?;
    Ok(())
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub id: String,
    /// What was expected.
    pub expected: Expected,
    /// The tools and skills the turn called (`tool:<qualified>`, `skill:<id>`).
    pub called: Vec<String>,
    /// Whether the case passed.
    pub correct: bool,
    /// Whether the expected arguments matched (when the case has some and the tool was called).
    pub arguments_match: Option<bool>,
    /// Milliseconds for the turn.
    pub latency_ms: f64,
    /// Characters of the reply.
    pub reply_chars: usize,
    /// Tokens the server reported.
    pub tokens: u64,
    /// Tokens of the system prompt and tool definitions of the first request.
    pub prompt_tokens: usize,
    /// The error, when the turn failed.
    pub error: Option<String>,
}

/// The figures of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Metrics {
    /// Cases run.
    pub cases: usize,
    /// Cases that passed / cases.
    pub call_accuracy: f64,
    /// Cases expecting no call that made one / such cases (`None` without such cases).
    pub false_call_rate: Option<f64>,
    /// Cases expecting a tool or skill that called others but not it / such cases.
    pub wrong_tool_rate: Option<f64>,
    /// Cases whose arguments matched / cases with expected arguments whose tool was called.
    pub argument_accuracy: Option<f64>,
    /// Mean milliseconds per turn.
    pub mean_latency_ms: f64,
    /// Mean characters per reply.
    pub mean_reply_chars: f64,
    /// Mean tokens per turn, as the server reported them.
    pub tokens_per_turn: f64,
    /// Mean tokens of system prompt and tool definitions per turn (o200k_base).
    pub prompt_tokens_per_turn: f64,
    /// Turns that failed (counted as not passing).
    pub errors: usize,
}

/// A run: its mode, figures and cases.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Progressive or eager.
    pub mode: Mode,
    /// The figures.
    pub metrics: Metrics,
    /// Each case.
    pub cases: Vec<CaseResult>,
}

/// `tool:<qualified>` for a wire or qualified name the catalog knows.
fn qualified(catalog: &Catalog, name: &str) -> Option<String> {
    catalog
        .item_by_wire(name)
        .or_else(|| catalog.item(name))
        .map(|i| i.qualified.clone())
}

/// What a turn called: items as `tool:<qualified>`, skills read as `skill:<id>`.
fn calls_of(catalog: &Catalog, report: &TurnReport) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for call in &report.calls {
        let label = if call.name == "read_skill" {
            call.arguments
                .get("id")
                .and_then(Value::as_str)
                .map(|id| format!("skill:{}", id.trim().trim_end_matches('/')))
        } else {
            qualified(catalog, &call.name).map(|q| format!("tool:{q}"))
        };
        if let Some(label) = label {
            out.push((label, call.arguments.clone()));
        }
    }
    out
}

fn value_matches(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::String(a), Value::String(b)) => a.trim().eq_ignore_ascii_case(b.trim()),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::Number(b)) | (Value::Number(b), Value::String(a)) => {
            a.trim().parse::<f64>().ok() == b.as_f64()
        }
        _ => want == got,
    }
}

/// Runs every case in `mode`, each in a fresh session of `runtime`; `done` hears of each case
/// as it ends (a progress bar).
pub fn run(
    runtime: &Runtime,
    providers: &Providers,
    cases: &[Case],
    mode: Mode,
    sender: &Principal,
    done: &dyn Fn(&CaseResult),
) -> Result<Run, AgentError> {
    let catalog = runtime.catalog();
    let (provider, mut options) = providers.for_agent(None, None)?;
    options.count_tokens = true;
    let mut results = Vec::new();
    for case in cases {
        let agent = match mode {
            Mode::Progressive => "chat",
            Mode::Eager => EAGER_AGENT,
        };
        let session = runtime.create_session(&SessionRequest {
            origin: quiver_policy::Origin::default(),
            agent: agent.into(),
            principal: sender.clone(),
            profile: Profile::Interactive,
        })?;
        if mode == Mode::Eager {
            load_every_tool(runtime, &session)?;
        }
        let mut chat = ChatSession::new(
            runtime,
            provider.clone(),
            options.clone(),
            &session,
            sender.clone(),
        )
        .with_person(Arc::new(EvalApprover));
        let outcome = chat.send(&case.request, &mut Quiet);
        runtime.end_session(&session)?;
        let expected_label = match &case.expected {
            Expected::Tool(t) => Some(format!(
                "tool:{}",
                qualified(&catalog, t).unwrap_or_else(|| t.clone())
            )),
            Expected::Skill(s) => Some(format!("skill:{s}")),
            Expected::None => None,
        };
        let result = match outcome {
            Ok(report) => {
                let calls = calls_of(&catalog, &report);
                let hit = expected_label
                    .as_ref()
                    .and_then(|l| calls.iter().find(|(c, _)| c == l));
                let correct = match &expected_label {
                    Some(_) => hit.is_some(),
                    None => calls.is_empty(),
                };
                let arguments_match = match (&case.arguments, hit) {
                    (Some(want), Some((_, got))) => Some(
                        want.iter()
                            .all(|(k, v)| got.get(k).is_some_and(|g| value_matches(v, g))),
                    ),
                    _ => None,
                };
                CaseResult {
                    id: case.id.clone(),
                    expected: case.expected.clone(),
                    called: calls.into_iter().map(|(c, _)| c).collect(),
                    correct,
                    arguments_match,
                    latency_ms: report.latency.as_secs_f64() * 1000.0,
                    reply_chars: report.reply.chars().count(),
                    tokens: report.usage.total(),
                    prompt_tokens: report.prompt_tokens,
                    error: None,
                }
            }
            Err(e) => CaseResult {
                id: case.id.clone(),
                expected: case.expected.clone(),
                called: Vec::new(),
                correct: false,
                arguments_match: None,
                latency_ms: 0.0,
                reply_chars: 0,
                tokens: 0,
                prompt_tokens: 0,
                error: Some(e.to_string()),
            },
        };
        done(&result);
        results.push(result);
    }
    Ok(Run {
        mode,
        metrics: metrics(&results),
        cases: results,
    })
}

fn ratio(n: usize, d: usize) -> Option<f64> {
    (d > 0).then(|| n as f64 / d as f64)
}

/// The figures of `results`.
pub fn metrics(results: &[CaseResult]) -> Metrics {
    let n = results.len();
    let ok: Vec<&CaseResult> = results.iter().filter(|r| r.error.is_none()).collect();
    let mean = |f: &dyn Fn(&CaseResult) -> f64| {
        if ok.is_empty() {
            0.0
        } else {
            ok.iter().map(|r| f(r)).sum::<f64>() / ok.len() as f64
        }
    };
    let none_cases: Vec<&CaseResult> = results
        .iter()
        .filter(|r| r.expected == Expected::None)
        .collect();
    let some_cases: Vec<&CaseResult> = results
        .iter()
        .filter(|r| r.expected != Expected::None)
        .collect();
    let with_args: Vec<bool> = results.iter().filter_map(|r| r.arguments_match).collect();
    Metrics {
        cases: n,
        call_accuracy: ratio(results.iter().filter(|r| r.correct).count(), n).unwrap_or(0.0),
        false_call_rate: ratio(
            none_cases.iter().filter(|r| !r.called.is_empty()).count(),
            none_cases.len(),
        ),
        wrong_tool_rate: ratio(
            some_cases
                .iter()
                .filter(|r| !r.correct && !r.called.is_empty())
                .count(),
            some_cases.len(),
        ),
        argument_accuracy: ratio(with_args.iter().filter(|m| **m).count(), with_args.len()),
        mean_latency_ms: mean(&|r| r.latency_ms),
        mean_reply_chars: mean(&|r| r.reply_chars as f64),
        tokens_per_turn: mean(&|r| r.tokens as f64),
        prompt_tokens_per_turn: mean(&|r| r.prompt_tokens as f64),
        errors: n - ok.len(),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// One row of the table: its label and how to print a run's value.
type Row = (&'static str, fn(&Metrics) -> String);

const ROWS: [Row; 10] = [
    ("cases", |m| m.cases.to_string()),
    ("call accuracy", |m| pct(Some(m.call_accuracy))),
    ("false-call rate", |m| pct(m.false_call_rate)),
    ("wrong-tool rate", |m| pct(m.wrong_tool_rate)),
    ("argument accuracy", |m| pct(m.argument_accuracy)),
    ("mean latency", |m| format!("{:.1} ms", m.mean_latency_ms)),
    ("mean reply length", |m| {
        format!("{:.1} chars", m.mean_reply_chars)
    }),
    ("tokens per turn", |m| format!("{:.1}", m.tokens_per_turn)),
    ("prompt+tools tokens", |m| {
        format!("{:.1}", m.prompt_tokens_per_turn)
    }),
    ("errors", |m| m.errors.to_string()),
];

/// The runs side by side as a text table.
pub fn table(runs: &[Run]) -> String {
    let mut out = format!("{:<22}", "metric");
    for r in runs {
        out.push_str(&format!(
            "{:>16}",
            match r.mode {
                Mode::Progressive => "progressive",
                Mode::Eager => "eager",
            }
        ));
    }
    out.push('\n');
    for (label, cell) in ROWS {
        out.push_str(&format!("{label:<22}"));
        for r in runs {
            out.push_str(&format!("{:>16}", cell(&r.metrics)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        expected: Expected,
        called: &[&str],
        correct: bool,
        args: Option<bool>,
    ) -> CaseResult {
        CaseResult {
            id: "c".into(),
            expected,
            called: called.iter().map(|s| (*s).to_owned()).collect(),
            correct,
            arguments_match: args,
            latency_ms: 10.0,
            reply_chars: 4,
            tokens: 110,
            prompt_tokens: 50,
            error: None,
        }
    }

    #[test]
    fn arithmetic() {
        let t = || Expected::Tool("weather.forecast".into());
        let results = vec![
            result(t(), &["tool:weather.forecast"], true, Some(true)),
            result(t(), &["tool:weather.forecast"], true, Some(false)),
            result(t(), &["tool:calc.evaluate"], false, None),
            result(t(), &[], false, None),
            result(Expected::None, &[], true, None),
            result(Expected::None, &["tool:notes.add_note"], false, None),
            result(
                Expected::Skill("daily-report/weekly".into()),
                &["skill:daily-report/weekly"],
                true,
                None,
            ),
            result(Expected::None, &[], true, None),
        ];
        let m = metrics(&results);
        assert_eq!(m.cases, 8);
        assert!((m.call_accuracy - 5.0 / 8.0).abs() < 1e-9);
        assert_eq!(m.false_call_rate, Some(1.0 / 3.0));
        assert_eq!(m.wrong_tool_rate, Some(1.0 / 5.0));
        assert_eq!(m.argument_accuracy, Some(0.5));
        assert!((m.tokens_per_turn - 110.0).abs() < 1e-9);
    }

    #[test]
    fn case_files_in_both_formats() {
        let yaml = "cases:\n  - request: 北京明天多少度\n    expect: {tool: weather.forecast, arguments: {city: 北京}}\n  - request: 你好\n    expect: none\n  - request: 写周报\n    skill: daily-report/weekly\n";
        let cases = parse_cases(yaml, Path::new("c.yaml")).unwrap();
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].expected, Expected::Tool("weather.forecast".into()));
        assert_eq!(cases[0].arguments.as_ref().unwrap()["city"], json!("北京"));
        assert_eq!(cases[1].expected, Expected::None);
        assert_eq!(
            cases[2].expected,
            Expected::Skill("daily-report/weekly".into())
        );
        let jsonl = "{\"request\": \"1+1\", \"tool\": \"calc__evaluate\"}\n\n{\"request\": \"hi\", \"none\": true}\n";
        let cases = parse_cases(jsonl, Path::new("c.jsonl")).unwrap();
        assert_eq!(cases[1].expected, Expected::None);
        let bad: &[(&str, &str, &str)] = &[
            ("- request: x\n", "c.yaml", "say what should happen"),
            (
                "- request: x\n  tool: a\n  none: true\n",
                "c.yaml",
                "one of",
            ),
            ("- request: ''\n  none: true\n", "c.yaml", "empty"),
            (
                "- {request: x, none: true, colour: red}\n",
                "c.yaml",
                "colour",
            ),
            ("{\"request\": 1}\n", "c.jsonl", "line 1"),
            ("[]", "c.yaml", "no cases"),
        ];
        for (text, file, want) in bad {
            let err = parse_cases(text, Path::new(file)).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
