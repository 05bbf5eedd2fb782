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
//!
//! With the English booster ([`Booster`], all-MiniLM-L6-v2), a query without CJK characters
//! has as its dense term the mean of the two models' cosines, fused with the booster's weight
//! (0.8); a query with CJK characters uses the multilingual model alone, as without it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use quiver_embed::{Embedder, VectorCache};
use rayon::prelude::*;
use serde::Serialize;

use super::tokenize::is_cjk;
use super::{SearchDoc, SearchHit, top_k};

/// The default weight of the dense term in [`fuse`].
pub const DEFAULT_WEIGHT: f32 = 0.7;
/// The default weight of the dense term when the English booster takes part.
pub const BOOSTED_WEIGHT: f32 = 0.8;

/// Longest query embedded, in bytes (longer ones are cut at a character boundary).
const MAX_QUERY_BYTES: usize = 4096;
/// Longest description embedded with a document, in characters.
const MAX_DESCRIPTION_CHARS: usize = 1200;

/// How to rank: BM25 alone, the embedding model alone, or both fused; the last two also with
/// the English booster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Method {
    /// Bilingual BM25F.
    #[serde(rename = "bm25")]
    Bm25,
    /// Cosine of sentence embeddings.
    #[serde(rename = "dense")]
    Dense,
    /// Both, fused by [`fuse`].
    #[serde(rename = "hybrid")]
    Hybrid,
    /// [`Method::Dense`] with the English booster: for a query without CJK characters, the
    /// mean of the multilingual and the MiniLM cosine.
    #[serde(rename = "dense+minilm")]
    DenseMiniLm,
    /// [`Method::Hybrid`] with the English booster: that dense term, fused with weight 0.8
    /// (for a query without CJK characters).
    #[serde(rename = "hybrid+minilm")]
    HybridMiniLm,
}

impl Method {
    /// The methods without the booster, in report order.
    pub const ALL: [Method; 3] = [Method::Bm25, Method::Dense, Method::Hybrid];
    /// Every method, the boosted ones last.
    pub const WITH_BOOSTER: [Method; 5] = [
        Method::Bm25,
        Method::Dense,
        Method::Hybrid,
        Method::DenseMiniLm,
        Method::HybridMiniLm,
    ];

    /// Its name: `bm25`, `dense`, `hybrid`, `dense+minilm` or `hybrid+minilm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Bm25 => "bm25",
            Method::Dense => "dense",
            Method::Hybrid => "hybrid",
            Method::DenseMiniLm => "dense+minilm",
            Method::HybridMiniLm => "hybrid+minilm",
        }
    }

    /// Whether it uses the English booster.
    pub fn boosted(self) -> bool {
        matches!(self, Method::DenseMiniLm | Method::HybridMiniLm)
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
        Method::WITH_BOOSTER
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown search method `{s}`; use `bm25`, `dense`, `hybrid`, `dense+minilm` or `hybrid+minilm`"
                )
            })
    }
}

/// The optional English booster: a second model (all-MiniLM-L6-v2) whose cosine is averaged
/// with the multilingual one for queries without CJK characters.
#[derive(Clone)]
pub struct Booster {
    /// The model.
    pub model: Arc<dyn Embedder>,
    /// Its vectors of texts already embedded (its own cache, not the multilingual model's).
    pub cache: Arc<VectorCache>,
    /// Weight of the dense term in [`fuse`] when the booster takes part, in `[0, 1]`.
    pub weight: f32,
}

impl Booster {
    /// The booster `model` with `cache` and the weight [`BOOSTED_WEIGHT`].
    pub fn new(model: Arc<dyn Embedder>, cache: Arc<VectorCache>) -> Booster {
        Booster {
            model,
            cache,
            weight: BOOSTED_WEIGHT,
        }
    }

    /// The same with the dense weight `weight` (clamped to `[0, 1]`; NaN means the default).
    pub fn with_weight(mut self, weight: f32) -> Booster {
        self.weight = clamp_weight(weight, BOOSTED_WEIGHT);
        self
    }
}

impl fmt::Debug for Booster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Booster")
            .field("model", &self.model.name())
            .field("cached_vectors", &self.cache.len())
            .field("weight", &self.weight)
            .finish()
    }
}

fn clamp_weight(weight: f32, default: f32) -> f32 {
    if weight.is_nan() {
        default
    } else {
        weight.clamp(0.0, 1.0)
    }
}

/// What dense retrieval needs: the model, the vector cache and the fusion weight, and
/// optionally the English booster.
#[derive(Clone)]
pub struct Semantic {
    /// The sentence-embedding model (USE multilingual v3, [`quiver_embed::Usem3`]).
    pub model: Arc<dyn Embedder>,
    /// Vectors of texts already embedded.
    pub cache: Arc<VectorCache>,
    /// Weight of the dense term in [`fuse`], in `[0, 1]`.
    pub weight: f32,
    /// The English booster, if any.
    pub booster: Option<Booster>,
}

impl Semantic {
    /// Dense retrieval with `model`, `cache` and the default weight, without a booster.
    pub fn new(model: Arc<dyn Embedder>, cache: Arc<VectorCache>) -> Semantic {
        Semantic {
            model,
            cache,
            weight: DEFAULT_WEIGHT,
            booster: None,
        }
    }

    /// The same with the dense weight `weight` (clamped to `[0, 1]`; NaN means the default).
    pub fn with_weight(mut self, weight: f32) -> Semantic {
        self.weight = clamp_weight(weight, DEFAULT_WEIGHT);
        self
    }

    /// The same with the English booster.
    pub fn with_booster(mut self, booster: Booster) -> Semantic {
        self.booster = Some(booster);
        self
    }
}

impl fmt::Debug for Semantic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semantic")
            .field("model", &self.model.name())
            .field("cached_vectors", &self.cache.len())
            .field("weight", &self.weight)
            .field("booster", &self.booster)
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

/// One document's vectors from one model.
#[derive(Default)]
struct DocEntry {
    /// Its text, then its example requests.
    own: Vec<Arc<[f32]>>,
    /// Its negative example requests.
    negatives: Vec<Arc<[f32]>>,
}

/// Each document's vectors, in document order.
type DocVectors = Vec<DocEntry>;

/// The vectors of one snapshot's documents, in document order.
pub struct DenseIndex {
    semantic: Semantic,
    vectors: DocVectors,
    /// The booster's vectors of the same texts, when it takes part.
    boost: Option<DocVectors>,
}

impl fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DenseIndex")
            .field("semantic", &self.semantic)
            .field("docs", &self.vectors.len())
            .field("boosted", &self.boost.is_some())
            .finish()
    }
}

/// Whether `text` has a CJK ideograph, kana or Hangul syllable (the booster is English only).
pub fn has_cjk(text: &str) -> bool {
    text.chars().any(is_cjk)
}

/// `query` cut to [`MAX_QUERY_BYTES`] at a character boundary.
fn cut_query(query: &str) -> &str {
    let mut end = query.len().min(MAX_QUERY_BYTES);
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    &query[..end]
}

/// Each document's cosine with `q`, by doc index: the best of its own vectors, lowered when
/// one of its negative examples is closer ([`against_negatives`]).
fn best_cosines(vectors: &DocVectors, q: &[f32]) -> Vec<f32> {
    let best = |vectors: &[Arc<[f32]>]| {
        vectors
            .iter()
            .map(|v| v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>())
            .fold(f32::NEG_INFINITY, f32::max)
    };
    let score = |d: &DocEntry| against_negatives(best(&d.own), best(&d.negatives));
    if vectors.len() > 4096 {
        vectors.par_iter().map(score).collect()
    } else {
        vectors.iter().map(score).collect()
    }
}

/// Embeds `texts` with `model` through `cache` and splits the vectors per document, each
/// `(own, negatives)` of `counts` taking its own vectors, then its negatives'.
fn embed_docs(
    model: &dyn Embedder,
    cache: &VectorCache,
    texts: &[String],
    counts: &[(usize, usize)],
) -> Result<DocVectors, quiver_embed::EmbedError> {
    let flat = cache.vectors(model, texts)?;
    let mut flat = flat.into_iter();
    let vectors = counts
        .iter()
        .map(|&(own, negatives)| DocEntry {
            own: flat.by_ref().take(own).collect(),
            negatives: flat.by_ref().take(negatives).collect(),
        })
        .collect();
    if let Err(e) = cache.save() {
        tracing::warn!(
            "the {} embedding cache could not be saved: {e}",
            model.name()
        );
    }
    Ok(vectors)
}

impl DenseIndex {
    /// Embeds `docs` (what the cache lacks, in parallel on rayon's threads) with the model and
    /// the booster, if any, and saves the caches. A cache that cannot be saved is logged and
    /// otherwise ignored; a booster that fails is logged and left out.
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
        let vectors = embed_docs(&*semantic.model, &semantic.cache, &texts, &counts)
            .unwrap_or_else(|e| {
                // USE multilingual v3 never fails; no vectors rank nothing.
                tracing::warn!("dense retrieval is left out: {e}");
                counts.iter().map(|_| DocEntry::default()).collect()
            });
        let boost = semantic.booster.as_ref().and_then(|b| {
            embed_docs(&*b.model, &b.cache, &texts, &counts)
                .map_err(|e| tracing::warn!("search goes on without the English booster: {e}"))
                .ok()
        });
        DenseIndex {
            semantic,
            vectors,
            boost,
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

    /// Whether the English booster's vectors are there.
    pub fn boosted(&self) -> bool {
        self.boost.is_some()
    }

    /// Bytes of the vectors it holds (both models').
    pub fn vector_bytes(&self) -> usize {
        let bytes = |docs: &DocVectors| -> usize {
            docs.iter()
                .flat_map(|d| d.own.iter().chain(&d.negatives))
                .map(|v| v.len() * std::mem::size_of::<f32>())
                .sum()
        };
        bytes(&self.vectors) + self.boost.as_ref().map_or(0, bytes)
    }

    /// The cosine of each document with `query`, by doc index, with the multilingual model
    /// alone: the best of its own vectors, lowered when a negative example comes closer
    /// (by as much again as it is closer).
    pub fn cosines(&self, query: &str) -> Vec<f32> {
        match self.semantic.model.embed_text(cut_query(query)) {
            Ok(q) => best_cosines(&self.vectors, &q),
            Err(e) => self.failed(&e),
        }
    }

    /// No cosine for any document (they rank nothing), after a model failed on a query.
    fn failed(&self, e: &quiver_embed::EmbedError) -> Vec<f32> {
        tracing::warn!("dense retrieval is left out of this query: {e}");
        vec![f32::NEG_INFINITY; self.vectors.len()]
    }

    /// The dense term for `query` and its weight in [`fuse`]. With `boost`, the booster built
    /// in and `query` free of CJK characters: the mean of both models' cosines (each the best
    /// of a document's vectors) and the booster's weight; otherwise [`DenseIndex::cosines`] and
    /// the model's weight. A booster that fails on the query is logged and left out.
    pub fn dense_term(&self, query: &str, boost: bool) -> (Vec<f32>, f32) {
        let plain = || (self.cosines(query), self.semantic.weight);
        let (Some(booster), Some(boost_vectors), true) = (
            &self.semantic.booster,
            &self.boost,
            boost && !has_cjk(query),
        ) else {
            return plain();
        };
        let query = cut_query(query);
        let (base, extra) = rayon::join(
            || self.semantic.model.embed_text(query),
            || booster.model.embed_text(query),
        );
        let base = match base {
            Ok(base) => base,
            Err(e) => return (self.failed(&e), self.semantic.weight),
        };
        let extra = match extra {
            Ok(extra) => extra,
            Err(e) => {
                tracing::warn!("the English booster is left out of this query: {e}");
                return (best_cosines(&self.vectors, &base), self.semantic.weight);
            }
        };
        let a = best_cosines(&self.vectors, &base);
        let b = best_cosines(boost_vectors, &extra);
        let mean = a.iter().zip(&b).map(|(x, y)| 0.5 * (x + y)).collect();
        (mean, booster.weight)
    }

    /// The `k` documents `admit` accepts with the highest cosine to `query` (with `boost`, the
    /// dense term of [`DenseIndex::dense_term`]).
    pub fn search(
        &self,
        query: &str,
        k: usize,
        boost: bool,
        admit: &dyn Fn(usize) -> bool,
    ) -> Vec<SearchHit> {
        if k == 0 || self.vectors.is_empty() {
            return Vec::new();
        }
        let hits = self
            .dense_term(query, boost)
            .0
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
        for m in Method::WITH_BOOSTER {
            assert_eq!(m.as_str().parse::<Method>(), Ok(m));
            assert_eq!(
                serde_json::to_value(m).ok(),
                Some(serde_json::Value::from(m.as_str()))
            );
        }
        assert!(Method::ALL.iter().all(|m| !m.boosted()));
        assert!("vector".parse::<Method>().is_err());
    }

    /// A model that knows a few texts' vectors (the others get a zero vector).
    struct Table {
        name: &'static str,
        vectors: Vec<(&'static str, [f32; 2])>,
    }

    impl Embedder for Table {
        fn name(&self) -> &'static str {
            self.name
        }
        fn dim(&self) -> usize {
            2
        }
        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, quiver_embed::EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let found = self.vectors.iter().find(|(k, _)| k == t);
                    found.map_or(vec![0.0, 0.0], |(_, v)| v.to_vec())
                })
                .collect())
        }
    }

    #[test]
    fn the_booster_averages_cosines_for_queries_without_cjk() {
        let docs = vec![
            SearchDoc {
                name: "a".into(),
                ..SearchDoc::default()
            },
            SearchDoc {
                name: "b".into(),
                examples: vec!["bee".into()],
                ..SearchDoc::default()
            },
        ];
        let base = Table {
            name: "usem3",
            vectors: vec![
                ("a", [1.0, 0.0]),
                ("b", [0.6, 0.8]),
                ("query", [1.0, 0.0]),
                ("查询", [1.0, 0.0]),
            ],
        };
        // The booster sees doc b (through its example) as the query's match.
        let boost = Table {
            name: "minilm",
            vectors: vec![
                ("a", [0.0, 1.0]),
                ("bee", [1.0, 0.0]),
                ("query", [1.0, 0.0]),
                ("查询", [1.0, 0.0]),
            ],
        };
        let boost_cache = Arc::new(VectorCache::in_memory());
        let semantic = Semantic::new(Arc::new(base), Arc::new(VectorCache::in_memory()))
            .with_booster(Booster::new(Arc::new(boost), boost_cache.clone()));
        let index = DenseIndex::build(semantic.clone(), &docs);
        assert!(index.boosted());
        // Three texts: "a", "b", "bee"; the booster has its own cache.
        assert_eq!((semantic.cache.len(), boost_cache.len()), (3, 3));
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(close(&index.cosines("query"), &[1.0, 0.6]));
        let (term, w) = index.dense_term("query", true);
        // Doc a: (1 + 0) / 2; doc b: (0.6 + max(0, 1)) / 2.
        assert!(close(&term, &[0.5, 0.8]), "{term:?}");
        assert!((w - BOOSTED_WEIGHT).abs() < 1e-6);
        assert_eq!(docs_of(&index.search("query", 2, true, &|_| true)), [1, 0]);
        assert_eq!(docs_of(&index.search("query", 2, false, &|_| true)), [0, 1]);
        // Without boost, or for a CJK query: the multilingual model alone, weight 0.7.
        for (query, boost) in [("query", false), ("查询", true)] {
            let (term, w) = index.dense_term(query, boost);
            assert!(close(&term, &[1.0, 0.6]), "{query}: {term:?}");
            assert!((w - DEFAULT_WEIGHT).abs() < 1e-6);
        }
        // Without a booster, asking for one changes nothing.
        let plain = DenseIndex::build(Semantic::new(semantic.model.clone(), semantic.cache), &docs);
        assert!(!plain.boosted());
        assert!(close(&plain.dense_term("query", true).0, &[1.0, 0.6]));
    }

    fn docs_of(hits: &[SearchHit]) -> Vec<usize> {
        hits.iter().map(|h| h.doc).collect()
    }

    #[test]
    fn cjk_queries_are_told_apart() {
        for (query, cjk) in [
            ("What will the weather be in Beijing tomorrow?", false),
            ("Café naïve — ½ ① 😀", false),
            ("北京明天多少度", true),
            ("帮我 send 一封 email", true),
            ("日本語のテキスト", true),
            ("한국어", true),
            ("", false),
        ] {
            assert_eq!(has_cjk(query), cjk, "{query}");
        }
    }
}
