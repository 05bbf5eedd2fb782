//! The tool-retrieval benchmark: load a corpus (`tools.jsonl`, `queries.jsonl`), index it with
//! [`SearchIndex`](crate::search::SearchIndex) (and, for dense and hybrid retrieval, a
//! [`DenseIndex`](crate::search::DenseIndex)), run every query one
//! at a time and score the rankings (Recall@1, Recall@5, MRR@10, nDCG@10) with latency figures.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use quiver_package::tool::first_sentence;

use quiver_embed::{Embedder, VectorCache};

use crate::params::schema_params;
use crate::search::{
    BOOSTED_WEIGHT, Booster, DEFAULT_WEIGHT, DenseIndex, Method, SearchDoc, SearchIndex, Semantic,
    rank,
};

/// How many results each query asks for.
const TOP: usize = 10;

/// What can go wrong loading a corpus.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not valid JSON.
    #[error("{path}:{line}: invalid JSON: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parser's message.
        source: serde_json::Error,
    },
    /// A line is JSON but not what the format says (missing field, duplicate or unknown id).
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A dense or hybrid run was asked for without an embedding model.
    #[error("the dense and hybrid methods need an embedding model, and none was given")]
    NoModel,
    /// A `+minilm` run was asked for without the English booster.
    #[error(
        "the dense+minilm and hybrid+minilm methods need the English booster, and none was given"
    )]
    NoBooster,
}

/// One tool of a corpus: its id and the document indexed for it.
#[derive(Debug, Clone)]
pub struct BenchTool {
    /// The id that rankings and gold lists use.
    pub id: String,
    /// What the index sees.
    pub doc: SearchDoc,
}

/// One query with its gold tool ids.
#[derive(Debug, Clone)]
pub struct BenchQuery {
    /// Query id.
    pub id: String,
    /// The user's text.
    pub query: String,
    /// Ids of the right tools (may be empty: a request that needs no tool).
    pub gold: Vec<String>,
}

/// Figures of one retrieval run. Quality metrics are averaged over the queries that have a gold
/// tool (0 when none has).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalReport {
    /// Mean Recall@1.
    pub recall_at_1: f64,
    /// Mean Recall@5.
    pub recall_at_5: f64,
    /// Mean reciprocal rank of the first gold tool in the top 10.
    pub mrr_at_10: f64,
    /// Mean nDCG@10 with binary gains.
    pub ndcg_at_10: f64,
    /// Mean search latency in milliseconds (one query at a time, top 10).
    pub latency_ms_mean: f64,
    /// Median search latency in milliseconds.
    pub latency_ms_p50: f64,
    /// 99th-percentile search latency in milliseconds.
    pub latency_ms_p99: f64,
    /// Time to build the index, in milliseconds (without the one-time load of the jieba
    /// dictionary).
    pub build_ms: f64,
    /// Number of queries run.
    pub queries: usize,
}

/// Quality of one ranking against its gold set.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueryScores {
    /// Fraction of gold ids in the top 1.
    pub recall_at_1: f64,
    /// Fraction of gold ids in the top 5.
    pub recall_at_5: f64,
    /// 1 / rank of the first gold id in the top 10, 0 if none.
    pub mrr_at_10: f64,
    /// DCG@10 / IDCG@10 with binary gains.
    pub ndcg_at_10: f64,
}

/// Scores `ranking` (best first; only the first 10 count) against `gold`, as the benchmark
/// README's "Scoring" section defines. `None` when `gold` is empty.
pub fn score_ranking<T: Eq + std::hash::Hash>(ranking: &[T], gold: &[T]) -> Option<QueryScores> {
    let gold: HashSet<&T> = gold.iter().collect();
    if gold.is_empty() {
        return None;
    }
    let top = &ranking[..ranking.len().min(TOP)];
    let g = gold.len() as f64;
    let found = |k: usize| top.iter().take(k).filter(|r| gold.contains(r)).count() as f64;
    let first = top.iter().position(|r| gold.contains(r));
    let dcg: f64 = top
        .iter()
        .enumerate()
        .filter(|(_, r)| gold.contains(r))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let idcg: f64 = (0..gold.len().min(TOP))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    Some(QueryScores {
        recall_at_1: found(1) / g,
        recall_at_5: found(5) / g,
        mrr_at_10: first.map_or(0.0, |p| 1.0 / (p + 1) as f64),
        ndcg_at_10: dcg / idcg,
    })
}

/// Reads a `tools.jsonl` file.
pub fn load_tools(path: &Path) -> Result<Vec<BenchTool>, BenchError> {
    let mut seen = HashSet::new();
    let mut tools = Vec::new();
    for (line, value) in read_jsonl(path)? {
        let invalid = |message: String| BenchError::Invalid {
            path: path.to_owned(),
            line,
            message,
        };
        let id = str_field(&value, "id").ok_or_else(|| invalid("missing string \"id\"".into()))?;
        if !seen.insert(id.to_owned()) {
            return Err(invalid(format!("duplicate tool id {id:?}")));
        }
        let name = str_field(&value, "name").unwrap_or(id);
        let description = str_field(&value, "description").unwrap_or("");
        let parameters = value.get("parameters").unwrap_or(&Value::Null);
        tools.push(BenchTool {
            id: id.to_owned(),
            doc: tool_doc(name, description, parameters),
        });
    }
    Ok(tools)
}

/// Reads a `queries.jsonl` file.
pub fn load_queries(path: &Path) -> Result<Vec<BenchQuery>, BenchError> {
    let mut queries = Vec::new();
    for (line, value) in read_jsonl(path)? {
        let invalid = |message: &str| BenchError::Invalid {
            path: path.to_owned(),
            line,
            message: message.to_owned(),
        };
        let id = str_field(&value, "id").ok_or_else(|| invalid("missing string \"id\""))?;
        let query =
            str_field(&value, "query").ok_or_else(|| invalid("missing string \"query\""))?;
        let gold = match value.get("gold") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|g| g.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| invalid("\"gold\" must be a list of strings"))?,
            Some(_) => return Err(invalid("\"gold\" must be a list of strings")),
        };
        queries.push(BenchQuery {
            id: id.to_owned(),
            query: query.to_owned(),
            gold,
        });
    }
    Ok(queries)
}

/// Loads both files and runs [`evaluate`]. A gold id that is not a tool is an error.
pub fn run_retrieval(
    tools_path: &Path,
    queries_path: &Path,
) -> Result<RetrievalReport, BenchError> {
    let tools = load_tools(tools_path)?;
    let queries = load_queries(queries_path)?;
    check_gold(&tools, &queries, tools_path, queries_path)?;
    Ok(evaluate(tools, &queries))
}

/// Every gold id must be a tool.
fn check_gold(
    tools: &[BenchTool],
    queries: &[BenchQuery],
    tools_path: &Path,
    queries_path: &Path,
) -> Result<(), BenchError> {
    let ids: HashSet<&str> = tools.iter().map(|t| t.id.as_str()).collect();
    for (i, q) in queries.iter().enumerate() {
        if let Some(unknown) = q.gold.iter().find(|g| !ids.contains(g.as_str())) {
            return Err(BenchError::Invalid {
                path: queries_path.to_owned(),
                line: i + 1,
                message: format!("gold id {unknown:?} is not in {}", tools_path.display()),
            });
        }
    }
    Ok(())
}

/// Builds the index over `tools` (timed), runs each query alone for its top 10 (each timed) and
/// averages the scores.
pub fn evaluate(tools: Vec<BenchTool>, queries: &[BenchQuery]) -> RetrievalReport {
    let (ids, docs) = split_tools(tools);
    // Load the jieba dictionary (once per process, about 0.1 s) before timing the build.
    let _ = crate::search::tokenize("预热");
    let start = Instant::now();
    let index = SearchIndex::build(docs);
    let build_ms = ms(start);
    score_queries(&ids, queries, build_ms, &|q| {
        index
            .search(q, TOP, &|_| true)
            .iter()
            .map(|h| h.doc)
            .collect()
    })
}

/// One method's figures on one corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodReport {
    /// The method.
    pub method: Method,
    /// Its figures. For the dense and hybrid methods, `build_ms` is the time to embed every
    /// tool with an empty cache (with each model they use; plus the BM25 index for the hybrid
    /// ones).
    #[serde(flatten)]
    pub report: RetrievalReport,
    /// Bytes of the vectors the method's index holds (none for `bm25`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_bytes: Option<u64>,
}

/// The models a benchmark run may use, and the fusion weights.
#[derive(Clone)]
pub struct BenchModels {
    /// The multilingual model, for every method but `bm25`.
    pub model: Option<Arc<dyn Embedder>>,
    /// The English booster, for the `+minilm` methods.
    pub booster: Option<Arc<dyn Embedder>>,
    /// The dense weight of `hybrid` (and of `hybrid+minilm` for queries with CJK characters).
    pub weight: f32,
    /// The dense weight of `hybrid+minilm` for queries without CJK characters.
    pub boosted_weight: f32,
}

impl Default for BenchModels {
    fn default() -> Self {
        BenchModels {
            model: None,
            booster: None,
            weight: DEFAULT_WEIGHT,
            boosted_weight: BOOSTED_WEIGHT,
        }
    }
}

impl fmt::Debug for BenchModels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BenchModels")
            .field("model", &self.model.as_ref().map(|m| m.name()))
            .field("booster", &self.booster.as_ref().map(|m| m.name()))
            .field("weight", &self.weight)
            .field("boosted_weight", &self.boosted_weight)
            .finish()
    }
}

/// Loads both files and runs [`evaluate_methods`].
pub fn run_methods(
    tools_path: &Path,
    queries_path: &Path,
    methods: &[Method],
    models: &BenchModels,
) -> Result<Vec<MethodReport>, BenchError> {
    let tools = load_tools(tools_path)?;
    let queries = load_queries(queries_path)?;
    check_gold(&tools, &queries, tools_path, queries_path)?;
    evaluate_methods(tools, &queries, methods, models)
}

/// A dense index and the time its vectors took to embed.
struct Timed {
    index: DenseIndex,
    ms: f64,
}

/// Runs every method of `methods` over the same tools and queries. The dense and hybrid
/// methods need `models.model`, the `+minilm` ones `models.booster` too. Each model embeds the
/// tools into a fresh in-memory cache, so the build times are the real embedding times.
pub fn evaluate_methods(
    tools: Vec<BenchTool>,
    queries: &[BenchQuery],
    methods: &[Method],
    models: &BenchModels,
) -> Result<Vec<MethodReport>, BenchError> {
    let (ids, docs) = split_tools(tools);
    let _ = crate::search::tokenize("预热");
    let start = Instant::now();
    let index = SearchIndex::build(docs.clone());
    let bm25_ms = ms(start);
    let needs_model = methods.iter().any(|m| *m != Method::Bm25);
    let needs_booster = methods.iter().any(|m| m.boosted());
    let cache = Arc::new(VectorCache::in_memory());
    let plain = match (needs_model, &models.model) {
        (false, _) => None,
        (true, None) => return Err(BenchError::NoModel),
        (true, Some(model)) => {
            let semantic = Semantic::new(model.clone(), cache.clone()).with_weight(models.weight);
            let start = Instant::now();
            let index = DenseIndex::build(semantic, &docs);
            Some(Timed {
                index,
                ms: ms(start),
            })
        }
    };
    let boosted = match (needs_booster, &plain, &models.booster) {
        (false, _, _) | (_, None, _) => None,
        (true, _, None) => return Err(BenchError::NoBooster),
        (true, Some(plain), Some(booster)) => {
            // The multilingual vectors come from the cache the plain index filled: the time
            // added is the booster's.
            let semantic = plain.index.semantic().clone().with_booster(
                Booster::new(booster.clone(), Arc::new(VectorCache::in_memory()))
                    .with_weight(models.boosted_weight),
            );
            let start = Instant::now();
            let index = DenseIndex::build(semantic, &docs);
            Some(Timed {
                index,
                ms: plain.ms + ms(start),
            })
        }
    };
    let mut reports = Vec::new();
    for &method in methods {
        let dense = match method {
            Method::Bm25 => None,
            _ if method.boosted() => boosted.as_ref(),
            _ => plain.as_ref(),
        };
        let build_ms = match (method, dense) {
            (Method::Hybrid | Method::HybridMiniLm, Some(dense)) => bm25_ms + dense.ms,
            (_, Some(dense)) => dense.ms,
            (_, None) => bm25_ms,
        };
        let report = score_queries(&ids, queries, build_ms, &|q| {
            rank(method, &index, dense.map(|d| &d.index), q, TOP, &|_| true)
                .iter()
                .map(|h| h.doc)
                .collect()
        });
        let vector_bytes = dense.map(|d| d.index.vector_bytes() as u64);
        reports.push(MethodReport {
            method,
            report,
            vector_bytes,
        });
    }
    Ok(reports)
}

fn split_tools(tools: Vec<BenchTool>) -> (Vec<String>, Vec<SearchDoc>) {
    tools.into_iter().map(|t| (t.id, t.doc)).unzip()
}

/// Runs each query alone through `rank` (timed) and averages the scores of its top 10.
fn score_queries(
    ids: &[String],
    queries: &[BenchQuery],
    build_ms: f64,
    rank: &dyn Fn(&str) -> Vec<usize>,
) -> RetrievalReport {
    let index_of: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut latencies = Vec::with_capacity(queries.len());
    let mut sums = QueryScores::default();
    let mut scored = 0usize;
    for q in queries {
        let start = Instant::now();
        let ranking = rank(&q.query);
        latencies.push(ms(start));
        let gold: Vec<usize> = q
            .gold
            .iter()
            .filter_map(|g| index_of.get(g.as_str()).copied())
            .collect();
        // A gold id missing from the tools can never be found: count it as a miss.
        let gold = if gold.len() < q.gold.len() {
            pad_missing(gold, q.gold.len(), ids.len())
        } else {
            gold
        };
        if let Some(s) = score_ranking(&ranking, &gold) {
            sums.recall_at_1 += s.recall_at_1;
            sums.recall_at_5 += s.recall_at_5;
            sums.mrr_at_10 += s.mrr_at_10;
            sums.ndcg_at_10 += s.ndcg_at_10;
            scored += 1;
        }
    }
    let mean = |x: f64| if scored == 0 { 0.0 } else { x / scored as f64 };
    let latency_ms_mean = if latencies.is_empty() {
        0.0
    } else {
        latencies.iter().sum::<f64>() / latencies.len() as f64
    };
    latencies.sort_unstable_by(f64::total_cmp);
    RetrievalReport {
        recall_at_1: mean(sums.recall_at_1),
        recall_at_5: mean(sums.recall_at_5),
        mrr_at_10: mean(sums.mrr_at_10),
        ndcg_at_10: mean(sums.ndcg_at_10),
        latency_ms_mean,
        latency_ms_p50: percentile(&latencies, 0.50),
        latency_ms_p99: percentile(&latencies, 0.99),
        build_ms,
        queries: queries.len(),
    }
}

/// Stands in for gold ids that are not tools with indices no ranking contains.
fn pad_missing(mut gold: Vec<usize>, want: usize, tools: usize) -> Vec<usize> {
    let mut next = tools;
    while gold.len() < want {
        gold.push(next);
        next += 1;
    }
    gold
}

/// Nearest-rank percentile of sorted values (0 when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// The document a Quiver author would write for a benchmark tool: the description split into
/// summary, when to use, when not to use and input rules where it has those labelled lines, and
/// the parameters flattened.
pub fn tool_doc(name: &str, description: &str, parameters: &Value) -> SearchDoc {
    let (summary, description, when_not_to_use) = split_description(description);
    let params = schema_params(parameters);
    SearchDoc {
        name: name.to_owned(),
        summary,
        description,
        when_not_to_use,
        params,
        ..SearchDoc::default()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Body,
    WhenToUse,
    WhenNotToUse,
    InputRules,
}

const LABELS: &[(&str, Part)] = &[
    ("何时使用", Part::WhenToUse),
    ("何时不用", Part::WhenNotToUse),
    ("参数规则", Part::InputRules),
    ("when to use", Part::WhenToUse),
    ("when not to use", Part::WhenNotToUse),
    ("input rules", Part::InputRules),
    ("parameter rules", Part::InputRules),
];

/// Splits a line starting with a known label followed by a colon (ASCII or full-width).
fn labelled(line: &str) -> Option<(Part, &str)> {
    for &(label, part) in LABELS {
        let Some(head) = line.get(..label.len()) else {
            continue;
        };
        if head.eq_ignore_ascii_case(label) {
            let rest = line[label.len()..].trim_start();
            if let Some(rest) = rest.strip_prefix('：').or_else(|| rest.strip_prefix(':')) {
                return Some((part, rest.trim()));
            }
        }
    }
    None
}

/// (summary, description without the when-not-to-use part, when-not-to-use part).
fn split_description(text: &str) -> (String, String, String) {
    let mut body: Vec<&str> = Vec::new();
    let mut when_not: Vec<&str> = Vec::new();
    let mut current = Part::Body;
    let mut structured = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let content = match labelled(line) {
            Some((part, rest)) => {
                structured = true;
                current = part;
                rest
            }
            None => line,
        };
        if current == Part::WhenNotToUse {
            when_not.push(content);
        } else {
            body.push(content);
        }
    }
    let summary = if structured {
        body.first().map_or_else(String::new, |s| first_sentence(s))
    } else {
        first_sentence(text)
    };
    (summary, body.join("\n"), when_not.join("\n"))
}

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Non-empty lines of a JSON Lines file, parsed, with their 1-based line numbers.
fn read_jsonl(path: &Path) -> Result<Vec<(usize, Value)>, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|source| BenchError::Json {
            path: path.to_owned(),
            line: i + 1,
            source,
        })?;
        rows.push((i + 1, value));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn metrics_on_a_hand_made_ranking() {
        // Gold at rank 3 of 10.
        let s = score_ranking(&[7, 8, 1, 9], &[1]).unwrap_or_default();
        assert!(close(s.recall_at_1, 0.0));
        assert!(close(s.recall_at_5, 1.0));
        assert!(close(s.mrr_at_10, 1.0 / 3.0));
        assert!(close(s.ndcg_at_10, 1.0 / 4f64.log2()));
        // Two gold ids at ranks 1 and 6: R@5 = 1/2, nDCG = (1 + 1/log2 7) / (1 + 1/log2 3).
        let s = score_ranking(&[1, 2, 3, 4, 5, 6], &[1, 6]).unwrap_or_default();
        assert!(close(s.recall_at_1, 0.5));
        assert!(close(s.recall_at_5, 0.5));
        assert!(close(s.mrr_at_10, 1.0));
        assert!(close(
            s.ndcg_at_10,
            (1.0 + 1.0 / 7f64.log2()) / (1.0 + 1.0 / 3f64.log2())
        ));
        // Beyond rank 10 counts as not found.
        let ranking: Vec<usize> = (0..20).collect();
        let s = score_ranking(&ranking, &[15]).unwrap_or_default();
        assert_eq!(s, QueryScores::default());
        assert!(score_ranking::<usize>(&[1], &[]).is_none());
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!(close(percentile(&v, 0.5), 50.0));
        assert!(close(percentile(&v, 0.99), 99.0));
        assert!(close(percentile(&[3.0], 0.99), 3.0));
        assert!(close(percentile(&[], 0.5), 0.0));
    }

    #[test]
    fn splits_labelled_descriptions() {
        let (summary, description, when_not) = split_description(
            "查询天气。\n何时使用：用户问天气。\n何时不用：问空气质量用 get_aqi。\n参数规则：city 必填。",
        );
        assert_eq!(summary, "查询天气。");
        assert_eq!(description, "查询天气。\n用户问天气。\ncity 必填。");
        assert_eq!(when_not, "问空气质量用 get_aqi。");
        let (summary, description, when_not) =
            split_description("Gets the weather. Uses the v2 API.\nWhen not to use: forecasts.");
        assert_eq!(summary, "Gets the weather.");
        assert_eq!(description, "Gets the weather. Uses the v2 API.");
        assert_eq!(when_not, "forecasts.");
        let (summary, _, _) = split_description("Plain text without end");
        assert_eq!(summary, "Plain text without end");
    }

    #[test]
    fn flattens_nested_parameters() {
        let schema: Value = serde_json::from_str(
            r#"{"type":"dict","properties":{"loc":{"type":"dict","description":"where","properties":{"city":{"type":"String","description":"city name"}}},"unit":{"type":"string","enum":["c","f"]},"tags":{"type":"array","items":{"type":"object","properties":{"k":{"description":"key"}}}}}}"#,
        )
        .unwrap_or(Value::Null);
        let doc = tool_doc("t", "d", &schema);
        let names: Vec<&str> = doc.params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["loc", "loc.city", "unit", "tags", "tags.k"]);
        assert_eq!(doc.params[2].1, " c f");
        assert!(tool_doc("t", "d", &Value::Null).params.is_empty());
    }

    #[test]
    fn bad_json_names_file_and_line() {
        let dir = std::env::temp_dir().join(format!("quiver-bench-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("tools.jsonl");
        let _ = std::fs::write(&path, "{\"id\": \"a\", \"name\": \"a\"}\n{oops\n");
        let err = load_tools(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("tools.jsonl:2"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
