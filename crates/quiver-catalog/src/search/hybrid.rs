//! Dense retrieval and its fusion with BM25.
//!
//! Each document is embedded once, as the text [`dense_text`] builds (its name made readable,
//! its summary and description), plus one vector per example request and per negative example;
//! a document's cosine is the best of its own vectors against the query's, lowered when a
//! negative example is closer still. Vectors come from a [`VectorCache`] keyed by
//! the text's hash, so a reload embeds only what changed.
//!
//! Fusion ([`fuse`]), over the documents the caller admits: `w · minmax(cosine) +
//! (1 − w) · minmax(bm25)`, where a term whose maximum equals its minimum counts 0.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use quiver_embed::{Usem3, VectorCache};
use rayon::prelude::*;
use serde::Serialize;

use super::{SearchDoc, SearchHit, top_k};

/// The default weight of the dense term in [`fuse`].
pub const DEFAULT_WEIGHT: f32 = 0.7;

/// Longest query embedded, in bytes (longer ones are cut at a character boundary).
const MAX_QUERY_BYTES: usize = 4096;
/// Longest description embedded with a document, in characters.
const MAX_DESCRIPTION_CHARS: usize = 1200;

/// How to rank: BM25 alone, the embedding model alone, or both fused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Bilingual BM25F.
    Bm25,
    /// Cosine of sentence embeddings.
    Dense,
    /// Both, fused by [`fuse`].
    Hybrid,
}

impl Method {
    /// Every method, in report order.
    pub const ALL: [Method; 3] = [Method::Bm25, Method::Dense, Method::Hybrid];

    /// Its name: `bm25`, `dense` or `hybrid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Bm25 => "bm25",
            Method::Dense => "dense",
            Method::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Method {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "bm25" => Ok(Method::Bm25),
            "dense" => Ok(Method::Dense),
            "hybrid" => Ok(Method::Hybrid),
            other => Err(format!(
                "unknown search method `{other}`; use `bm25`, `dense` or `hybrid`"
            )),
        }
    }
}

/// What dense retrieval needs: the model, the vector cache and the fusion weight.
#[derive(Clone)]
pub struct Semantic {
    /// The sentence-embedding model.
    pub model: Arc<Usem3>,
    /// Vectors of texts already embedded.
    pub cache: Arc<VectorCache>,
    /// Weight of the dense term in [`fuse`], in `[0, 1]`.
    pub weight: f32,
}

impl Semantic {
    /// Dense retrieval with `model`, `cache` and the default weight.
    pub fn new(model: Arc<Usem3>, cache: Arc<VectorCache>) -> Semantic {
        Semantic {
            model,
            cache,
            weight: DEFAULT_WEIGHT,
        }
    }

    /// The same with the dense weight `weight` (clamped to `[0, 1]`; NaN means the default).
    pub fn with_weight(mut self, weight: f32) -> Semantic {
        self.weight = if weight.is_nan() {
            DEFAULT_WEIGHT
        } else {
            weight.clamp(0.0, 1.0)
        };
        self
    }
}

impl fmt::Debug for Semantic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semantic")
            .field("model", &"usem3")
            .field("cached_vectors", &self.cache.len())
            .field("weight", &self.weight)
            .finish()
    }
}

/// `get_current_weather` → `get current weather`; `weather.forecast` → `weather forecast`.
fn readable_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if matches!(c, '_' | '.' | '-' | '/' | ':') {
            out.push(' ');
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        out.push(c);
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text embedded for a document: its readable name, then its summary and description
/// (the description cut to a bounded length; the summary is not repeated).
pub fn dense_text(doc: &SearchDoc) -> String {
    let mut text = readable_name(&doc.name);
    let mut push = |part: &str| {
        let part = part.trim();
        if !part.is_empty() {
            let sentence_ended = text.ends_with(['.', '。', '!', '！', '?', '？', ':', '：']);
            text.push_str(match (text.is_empty(), sentence_ended) {
                (true, _) => "",
                (false, true) => " ",
                (false, false) => ". ",
            });
            text.push_str(part);
        }
    };
    push(&doc.summary);
    let description = doc.description.trim();
    let description = description
        .strip_prefix(doc.summary.trim())
        .unwrap_or(description);
    let cut: String = description.chars().take(MAX_DESCRIPTION_CHARS).collect();
    push(&cut);
    if text.is_empty() {
        text = doc.package_name.clone();
    }
    text
}

/// The vectors of one snapshot's documents, in document order.
pub struct DenseIndex {
    semantic: Semantic,
    /// Each document's vectors: its text, then its example requests.
    vectors: Vec<Vec<Arc<[f32]>>>,
    /// Each document's negative example requests.
    negatives: Vec<Vec<Arc<[f32]>>>,
}

impl fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DenseIndex")
            .field("semantic", &self.semantic)
            .field("docs", &self.vectors.len())
            .finish()
    }
}

impl DenseIndex {
    /// Embeds `docs` (what the cache lacks, in parallel on rayon's threads) and saves the
    /// cache. A cache that cannot be saved is logged and otherwise ignored.
    pub fn build(semantic: Semantic, docs: &[SearchDoc]) -> DenseIndex {
        let mut texts: Vec<String> = Vec::with_capacity(docs.len());
        // Per document: how many texts are its own (text and examples), then its negatives.
        let mut counts = Vec::with_capacity(docs.len());
        let non_empty = |list: &[String]| -> Vec<String> {
            list.iter()
                .filter(|e| !e.trim().is_empty())
                .cloned()
                .collect()
        };
        for doc in docs {
            let before = texts.len();
            texts.push(dense_text(doc));
            texts.extend(non_empty(&doc.examples));
            let own = texts.len() - before;
            texts.extend(non_empty(&doc.negative_examples));
            counts.push((own, texts.len() - before - own));
        }
        let flat = semantic.cache.vectors(&semantic.model, &texts);
        let mut flat = flat.into_iter();
        let (vectors, negatives) = counts
            .iter()
            .map(|&(own, negative)| {
                let own: Vec<_> = flat.by_ref().take(own).collect();
                (own, flat.by_ref().take(negative).collect())
            })
            .unzip();
        if let Err(e) = semantic.cache.save() {
            tracing::warn!("the embedding cache could not be saved: {e}");
        }
        DenseIndex {
            semantic,
            vectors,
            negatives,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether it has no documents.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The settings it was built with.
    pub fn semantic(&self) -> &Semantic {
        &self.semantic
    }

    /// The cosine of each document with `query`, by doc index: the best of its own vectors,
    /// lowered by as much again as a negative example comes closer ([`against_negatives`]).
    pub fn cosines(&self, query: &str) -> Vec<f32> {
        let mut end = query.len().min(MAX_QUERY_BYTES);
        while !query.is_char_boundary(end) {
            end -= 1;
        }
        let q = self.semantic.model.embed(&query[..end]);
        let best = |vectors: &Vec<Arc<[f32]>>| {
            vectors
                .iter()
                .map(|v| v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>())
                .fold(f32::NEG_INFINITY, f32::max)
        };
        let score = |d: usize| against_negatives(best(&self.vectors[d]), best(&self.negatives[d]));
        if self.vectors.len() > 4096 {
            (0..self.vectors.len()).into_par_iter().map(score).collect()
        } else {
            (0..self.vectors.len()).map(score).collect()
        }
    }

    /// The `k` documents `admit` accepts with the highest cosine to `query`.
    pub fn search(&self, query: &str, k: usize, admit: &dyn Fn(usize) -> bool) -> Vec<SearchHit> {
        if k == 0 || self.vectors.is_empty() {
            return Vec::new();
        }
        let hits = self
            .cosines(query)
            .into_iter()
            .enumerate()
            .filter(|&(d, c)| c.is_finite() && admit(d))
            .map(|(doc, score)| SearchHit { doc, score })
            .collect();
        top_k(hits, k)
    }
}

/// A document's cosine given the best cosine of its own vectors (`own`) and of its negative
/// examples (`negative`, −∞ without any): a request closer to a negative example than to the
/// document itself is one the author said must not find it, so the cosine drops by the
/// difference (`own − (negative − own)`); otherwise it is `own`.
fn against_negatives(own: f32, negative: f32) -> f32 {
    if negative > own {
        own - (negative - own)
    } else {
        own
    }
}

/// Min and max of `values` over `docs`; `None` when `docs` is empty.
fn range(values: &[f32], docs: &[usize]) -> Option<(f32, f32)> {
    let mut it = docs.iter().map(|&d| values[d]).filter(|v| v.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
}

/// Min-max normalization of one term over the admitted documents.
#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f32,
    span: f32,
}

impl Scale {
    fn of(values: &[f32], docs: &[usize]) -> Scale {
        match range(values, docs) {
            Some((lo, hi)) if hi > lo => Scale { lo, span: hi - lo },
            _ => Scale { lo: 0.0, span: 0.0 },
        }
    }

    /// `(v − min) / (max − min)`; 0 for a flat term or a value that is not finite.
    fn apply(self, v: f32) -> f32 {
        if self.span > 0.0 && v.is_finite() {
            (v - self.lo) / self.span
        } else {
            0.0
        }
    }
}

/// Fuses per-document BM25 scores and cosines over the documents `admit` accepts:
/// `weight · minmax(cosine) + (1 − weight) · minmax(bm25)`, min and max taken over the admitted
/// documents, a term whose maximum equals its minimum counting 0. The best `k` with a positive
/// score, best first (ties to the lower index).
pub fn fuse(
    bm25: &[f32],
    cosine: &[f32],
    weight: f32,
    k: usize,
    admit: &dyn Fn(usize) -> bool,
) -> Vec<SearchHit> {
    let n = bm25.len().min(cosine.len());
    let admitted: Vec<usize> = (0..n).filter(|&d| admit(d)).collect();
    let (dense, sparse) = (Scale::of(cosine, &admitted), Scale::of(bm25, &admitted));
    let hits = admitted
        .iter()
        .map(|&doc| SearchHit {
            doc,
            score: weight * dense.apply(cosine[doc]) + (1.0 - weight) * sparse.apply(bm25[doc]),
        })
        .filter(|h| h.score > 0.0)
        .collect();
    top_k(hits, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(hits: &[SearchHit]) -> Vec<usize> {
        hits.iter().map(|h| h.doc).collect()
    }

    #[test]
    fn fusion_weighs_both_terms() {
        // Doc 0: best BM25, weak cosine; doc 1: no BM25, best cosine; doc 2: middling both.
        let bm25 = [10.0, 0.0, 5.0, 0.0];
        let cosine = [0.2, 0.9, 0.6, 0.1];
        let all = |_| true;
        // w = 0.7: doc 1 = 0.7, doc 2 = 0.7·0.625 + 0.3·0.5 = 0.5875, doc 0 = 0.7·0.125 + 0.3.
        assert_eq!(docs(&fuse(&bm25, &cosine, 0.7, 4, &all)), [1, 2, 0]);
        // w = 0: BM25 order; doc 1 and 3 score 0 and are left out.
        assert_eq!(docs(&fuse(&bm25, &cosine, 0.0, 4, &all)), [0, 2]);
        // w = 1: cosine order; the lowest cosine normalizes to 0.
        assert_eq!(docs(&fuse(&bm25, &cosine, 1.0, 4, &all)), [1, 2, 0]);
        assert_eq!(fuse(&bm25, &cosine, 0.7, 1, &all).len(), 1);
        assert!(fuse(&bm25, &cosine, 0.7, 0, &all).is_empty());
    }

    #[test]
    fn min_and_max_come_from_admitted_docs() {
        let bm25 = [10.0, 0.0, 5.0, 0.0];
        let cosine = [0.2, 0.9, 0.6, 0.1];
        // Without doc 1 (the best cosine), doc 2 holds the cosine maximum.
        let hits = fuse(&bm25, &cosine, 0.7, 4, &|d| d != 1);
        assert_eq!(docs(&hits), [2, 0]);
        assert!((hits[0].score - (0.7 + 0.3 * 0.5)).abs() < 1e-6, "{hits:?}");
    }

    #[test]
    fn a_flat_term_counts_zero() {
        // Every BM25 score equal: only the cosine ranks.
        let hits = fuse(&[0.0; 3], &[0.1, 0.5, 0.3], 0.7, 3, &|_| true);
        assert_eq!(docs(&hits), [1, 2]);
        assert!((hits[0].score - 0.7).abs() < 1e-6);
        // Both flat: nothing scores.
        assert!(fuse(&[1.0; 3], &[0.5; 3], 0.7, 3, &|_| true).is_empty());
        // One admitted doc: both terms are flat.
        assert!(fuse(&[1.0, 2.0], &[0.5, 0.7], 0.7, 3, &|d| d == 0).is_empty());
        // NaN never wins.
        let hits = fuse(&[f32::NAN, 1.0, 0.0], &[0.1, 0.2, 0.3], 0.5, 3, &|_| true);
        assert!(hits.iter().all(|h| h.score.is_finite()));
    }

    #[test]
    fn negative_examples_lower_only_closer_requests() {
        for (own, negative, want) in [
            (0.6, f32::NEG_INFINITY, 0.6), // no negative examples
            (0.6, 0.4, 0.6),               // the request is more like the item
            (0.6, 0.6, 0.6),
            (0.5, 0.9, 0.1), // more like a request that must not find it
            (0.2, 1.0, -0.6),
        ] {
            let got = against_negatives(own, negative);
            assert!((got - want).abs() < 1e-6, "{own} {negative}: {got}");
        }
    }

    #[test]
    fn names_become_words() {
        for (name, want) in [
            ("get_current_weather", "get current weather"),
            ("weather.forecast", "weather forecast"),
            ("getCurrentWeather", "get Current Weather"),
            ("requests.get", "requests get"),
            ("查天气", "查天气"),
            ("weather/cities", "weather cities"),
            ("", ""),
        ] {
            assert_eq!(readable_name(name), want);
        }
    }

    #[test]
    fn dense_text_joins_name_summary_and_description() {
        let doc = SearchDoc {
            name: "get_weather".into(),
            summary: "Get the weather.".into(),
            description: "Get the weather. For any city.".into(),
            ..SearchDoc::default()
        };
        assert_eq!(
            dense_text(&doc),
            "get weather. Get the weather. For any city."
        );
        let long = SearchDoc {
            description: "长".repeat(5000),
            ..SearchDoc::default()
        };
        assert_eq!(dense_text(&long).chars().count(), MAX_DESCRIPTION_CHARS);
    }

    #[test]
    fn methods_parse_and_print() {
        for m in Method::ALL {
            assert_eq!(m.as_str().parse::<Method>(), Ok(m));
        }
        assert!("vector".parse::<Method>().is_err());
    }
}
