//! The inverted index: BM25F with per-field weights and length normalization, every posting's
//! contribution precomputed at build time so that a query only adds up its terms' postings.

use std::collections::HashMap;
use std::sync::LazyLock;

use rayon::prelude::*;

use super::tokenize::{JIEBA, Kind, analyze, analyze_name, analyze_query, clip};
use super::{SearchDoc, SearchHit};

/// The fields of a [`SearchDoc`], in the order of [`Params::fields`].
#[derive(Debug, Clone, Copy)]
enum Field {
    Name,
    Summary,
    Description,
    WhenNotToUse,
    Triggers,
    Examples,
    ParamNames,
    ParamDescriptions,
    PackageName,
    PackageDescription,
}

const FIELDS: usize = 10;

/// Longest query analyzed, in bytes; the rest is ignored.
const MAX_QUERY_BYTES: usize = 16 * 1024;

/// Weight and length normalization of one field.
#[derive(Debug, Clone, Copy)]
struct FieldParams {
    /// How much one occurrence in this field counts.
    weight: f32,
    /// BM25 `b` for this field: 0 ignores its length, 1 normalizes fully.
    b: f32,
}

/// The ranking function's constants.
#[derive(Debug, Clone)]
struct Params {
    /// BM25 term-frequency saturation.
    k1: f32,
    fields: [FieldParams; FIELDS],
    /// Query-side weight of each term kind, indexed by `kind_index`.
    kinds: [f32; 6],
    /// Weight of a query term that only occurs in a negated part of the query.
    negated: f32,
}

const fn fp(weight: f32, b: f32) -> FieldParams {
    FieldParams { weight, b }
}

impl Default for Params {
    /// Chosen on the development corpora of `shared/bench/retrieval` (English BFCL and
    /// MetaTool, Chinese `zh`) as a flat region of the quality surface, not its peak.
    fn default() -> Self {
        Params {
            k1: 1.5,
            fields: [
                fp(3.0, 0.5),  // name: short, precise
                fp(0.25, 0.5), // summary: usually repeated in the description already
                fp(1.0, 0.75), // description
                fp(0.0, 0.75), // when not to use: names other tools, so it would attract them
                fp(2.0, 0.5),  // triggers
                fp(1.5, 0.5),  // examples
                fp(1.0, 0.5),  // parameter names
                fp(0.6, 0.75), // parameter descriptions
                fp(1.0, 0.5),  // package name
                fp(0.5, 0.75), // package description
            ],
            // Word, Compound, CjkWord, CjkUnigram, CjkBigram, Prefix. Chinese character unigrams
            // carry most of the matching; words and bigrams, which overlap them, add precision.
            kinds: [1.0, 1.0, 0.5, 1.0, 0.4, 0.3],
            negated: 0.0,
        }
    }
}

fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Word => 0,
        Kind::Compound => 1,
        Kind::CjkWord => 2,
        Kind::CjkUnigram => 3,
        Kind::CjkBigram => 4,
        Kind::Prefix => 5,
    }
}

/// A searchable, immutable index over [`SearchDoc`]s.
#[derive(Debug, Clone)]
pub struct SearchIndex {
    docs: usize,
    params: Params,
    /// Tagged term → term id.
    terms: HashMap<String, u32>,
    /// Kind of each term id.
    kinds: Vec<Kind>,
    /// Postings of term `t`: `post_docs[post_start[t]..post_start[t + 1]]`.
    post_start: Vec<u32>,
    post_docs: Vec<u32>,
    /// Each posting's precomputed BM25F contribution.
    post_weights: Vec<f32>,
    /// Unit-length TF-IDF vector of each doc's summary, description and triggers, by term id.
    similarity: Vec<Vec<(u32, f32)>>,
}

/// What one document contributes to the index, before term ids exist.
struct Analyzed {
    /// (tagged term, kind, field, term frequency in that field).
    entries: Vec<(String, Kind, usize, u32)>,
    /// Tagged term → frequency in the fields the similarity lint compares.
    similarity: HashMap<String, u32>,
}

fn analyze_doc(doc: &SearchDoc) -> Analyzed {
    let mut counts: HashMap<(String, usize), (Kind, u32)> = HashMap::new();
    let mut similarity: HashMap<String, u32> = HashMap::new();
    let mut add = |field: Field, text: &str, name: bool| {
        let f = field as usize;
        let compare = matches!(field, Field::Summary | Field::Description | Field::Triggers);
        let mut emit = |term: &str, kind: Kind| {
            let tagged = format!("{}{}", kind.tag(), term);
            if compare && kind != Kind::CjkUnigram {
                *similarity.entry(tagged.clone()).or_insert(0) += 1;
            }
            let entry = counts.entry((tagged, f)).or_insert((kind, 0));
            entry.1 = entry.1.saturating_add(1);
        };
        if name {
            analyze_name(text, &mut emit);
        } else {
            analyze(text, &mut emit);
        }
    };
    add(Field::Name, &doc.name, true);
    add(Field::Summary, &doc.summary, false);
    add(Field::Description, &doc.description, false);
    add(Field::WhenNotToUse, &doc.when_not_to_use, false);
    for t in &doc.triggers {
        add(Field::Triggers, t, false);
    }
    for e in &doc.examples {
        add(Field::Examples, e, false);
    }
    for (name, description) in &doc.params {
        add(Field::ParamNames, name, true);
        add(Field::ParamDescriptions, description, false);
    }
    add(Field::PackageName, &doc.package_name, true);
    add(Field::PackageDescription, &doc.package_description, false);
    let entries = counts
        .into_iter()
        .map(|((term, field), (kind, tf))| (term, kind, field, tf))
        .collect();
    Analyzed {
        entries,
        similarity,
    }
}

impl SearchIndex {
    /// Builds the index; documents are analyzed in parallel.
    pub fn build(docs: Vec<SearchDoc>) -> Self {
        Self::build_with(&docs, Params::default())
    }

    fn build_with(docs: &[SearchDoc], params: Params) -> Self {
        LazyLock::force(&JIEBA);
        let analyzed: Vec<Analyzed> = docs.par_iter().map(analyze_doc).collect();
        let n = analyzed.len();

        // Term ids in first-seen order (deterministic: docs in order, entries sorted).
        let mut terms: HashMap<String, u32> = HashMap::new();
        let mut kinds: Vec<Kind> = Vec::new();
        let mut df: Vec<u32> = Vec::new();
        let mut doc_entries: Vec<Vec<(u32, usize, u32)>> = Vec::with_capacity(n);
        let mut doc_similarity: Vec<Vec<(u32, u32)>> = Vec::with_capacity(n);
        for a in analyzed {
            let mut entries = a.entries;
            entries.sort_unstable_by(|x, y| (&x.0, x.2).cmp(&(&y.0, y.2)));
            let mut ids = Vec::with_capacity(entries.len());
            let mut last: Option<u32> = None;
            for (term, kind, field, tf) in entries {
                let next = terms.len() as u32;
                let id = *terms.entry(term).or_insert_with(|| {
                    kinds.push(kind);
                    df.push(0);
                    next
                });
                if last != Some(id) {
                    df[id as usize] += 1;
                    last = Some(id);
                }
                ids.push((id, field, tf));
            }
            doc_entries.push(ids);
            let mut sim: Vec<(u32, u32)> = a
                .similarity
                .into_iter()
                .filter_map(|(term, tf)| terms.get(&term).map(|&id| (id, tf)))
                .collect();
            sim.sort_unstable();
            doc_similarity.push(sim);
        }
        // Average field lengths over the docs.
        let mut avg = [0f64; FIELDS];
        let field_lengths: Vec<[u32; FIELDS]> = doc_entries
            .iter()
            .map(|entries| {
                let mut l = [0u32; FIELDS];
                for &(_, f, tf) in entries {
                    l[f] = l[f].saturating_add(tf);
                }
                l
            })
            .collect();
        for l in &field_lengths {
            for f in 0..FIELDS {
                avg[f] += f64::from(l[f]);
            }
        }
        for a in &mut avg {
            *a = (*a / n.max(1) as f64).max(1.0);
        }

        let nf = n as f32;
        let idf: Vec<f32> = df
            .iter()
            .map(|&d| {
                let d = d as f32;
                (1.0 + (nf - d + 0.5) / (d + 0.5)).ln()
            })
            .collect();

        // BM25F: pseudo term frequency over the weighted, length-normalized fields, saturated once.
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); terms.len()];
        for (d, entries) in doc_entries.iter().enumerate() {
            let l = &field_lengths[d];
            let mut i = 0;
            while i < entries.len() {
                let id = entries[i].0;
                let mut tf = 0f32;
                while i < entries.len() && entries[i].0 == id {
                    let (_, f, raw) = entries[i];
                    let p = params.fields[f];
                    let norm = 1.0 - p.b + p.b * (l[f] as f32) / (avg[f] as f32);
                    tf += p.weight * raw as f32 / norm.max(1e-3);
                    i += 1;
                }
                if tf > 0.0 {
                    let w = idf[id as usize] * tf * (params.k1 + 1.0) / (params.k1 + tf);
                    if w > 0.0 && w.is_finite() {
                        postings[id as usize].push((d as u32, w));
                    }
                }
            }
        }
        let mut post_start = Vec::with_capacity(postings.len() + 1);
        let total: usize = postings.iter().map(Vec::len).sum();
        let mut post_docs = Vec::with_capacity(total);
        let mut post_weights = Vec::with_capacity(total);
        post_start.push(0);
        for p in postings {
            for (d, w) in p {
                post_docs.push(d);
                post_weights.push(w);
            }
            post_start.push(post_docs.len() as u32);
        }

        // Similarity vectors: sublinear tf times smoothed idf, unit length.
        let similarity = doc_similarity
            .into_iter()
            .map(|sim| {
                let mut v: Vec<(u32, f32)> = sim
                    .into_iter()
                    .map(|(id, tf)| {
                        let d = df[id as usize] as f32;
                        let idf = ((1.0 + nf) / (1.0 + d)).ln() + 1.0;
                        (id, (1.0 + (tf as f32).ln()) * idf)
                    })
                    .collect();
                let norm = v.iter().map(|(_, w)| w * w).sum::<f32>().sqrt();
                if norm > 0.0 {
                    for (_, w) in &mut v {
                        *w /= norm;
                    }
                }
                v
            })
            .collect();

        SearchIndex {
            docs: n,
            params,
            terms,
            kinds,
            post_start,
            post_docs,
            post_weights,
            similarity,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs
    }

    /// Whether the index has no documents.
    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// Top `k` docs for `query` among those `admit(doc_index)` accepts, best first; equal scores
    /// go to the lower doc index. Docs sharing no term with the query are never returned.
    pub fn search(&self, query: &str, k: usize, admit: &dyn Fn(usize) -> bool) -> Vec<SearchHit> {
        if k == 0 || self.docs == 0 {
            return Vec::new();
        }
        let query = clip(query, MAX_QUERY_BYTES);
        // Term id → (occurrences outside negated parts, occurrences inside).
        let mut qterms: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut tagged = String::new();
        analyze_query(query, &mut |term, kind, negated| {
            tagged.clear();
            tagged.push_str(kind.tag());
            tagged.push_str(term);
            if let Some(&id) = self.terms.get(tagged.as_str()) {
                let e = qterms.entry(id).or_insert((0, 0));
                if negated {
                    e.1 += 1;
                } else {
                    e.0 += 1;
                }
            }
        });
        let mut scores = vec![0f32; self.docs];
        let mut seen = vec![false; self.docs];
        let mut touched: Vec<u32> = Vec::new();
        let mut qterms: Vec<(u32, (u32, u32))> = qterms.into_iter().collect();
        qterms.sort_unstable();
        for (id, (qtf, negated)) in qterms {
            let kind = self.kinds[id as usize];
            let kw = self.params.kinds[kind_index(kind)];
            // A query term counts once however often it is repeated.
            let qw = if qtf > 0 {
                kw
            } else if negated > 0 {
                kw * self.params.negated
            } else {
                0.0
            };
            if qw == 0.0 {
                continue;
            }
            let (s, e) = (
                self.post_start[id as usize] as usize,
                self.post_start[id as usize + 1] as usize,
            );
            for (&d, &w) in self.post_docs[s..e].iter().zip(&self.post_weights[s..e]) {
                if !seen[d as usize] {
                    seen[d as usize] = true;
                    touched.push(d);
                }
                scores[d as usize] += qw * w;
            }
        }
        let mut hits: Vec<SearchHit> = touched
            .into_iter()
            .map(|d| d as usize)
            .filter(|&d| scores[d] > 0.0 && admit(d))
            .map(|d| SearchHit {
                doc: d,
                score: scores[d],
            })
            .collect();
        let order =
            |a: &SearchHit, b: &SearchHit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
        if hits.len() > k {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_unstable_by(order);
        hits
    }

    /// Pairs of docs `(i, j)`, `i < j`, among `candidates` whose summary, description and
    /// triggers overlap strongly: the cosine of their TF-IDF vectors is at least `threshold`.
    /// Sorted by `i`, then `j`. Used by the collision lint (threshold 0.7).
    pub fn similar_pairs(&self, candidates: &[usize], threshold: f32) -> Vec<(usize, usize, f32)> {
        let mut cands: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&c| c < self.docs)
            .collect();
        cands.sort_unstable();
        cands.dedup();
        // Term id → (position in `cands`, weight) of the candidates seen so far.
        let mut inverted: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
        let mut dots = vec![0f32; cands.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut pairs = Vec::new();
        for (p, &doc) in cands.iter().enumerate() {
            let vector = &self.similarity[doc];
            for &(term, w) in vector {
                if let Some(list) = inverted.get(&term) {
                    for &(q, v) in list {
                        if dots[q as usize] == 0.0 {
                            touched.push(q);
                        }
                        dots[q as usize] += w * v;
                    }
                }
            }
            for q in touched.drain(..) {
                let score = dots[q as usize];
                dots[q as usize] = 0.0;
                if score >= threshold {
                    pairs.push((cands[q as usize], doc, score.min(1.0)));
                }
            }
            for &(term, w) in vector {
                inverted.entry(term).or_default().push((p as u32, w));
            }
        }
        pairs.sort_unstable_by_key(|a| (a.0, a.1));
        pairs
    }
}
