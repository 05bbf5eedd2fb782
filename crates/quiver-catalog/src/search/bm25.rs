//! The inverted index: BM25F with per-field weights and length normalization, every posting's
//! contribution precomputed at build time so that a query only adds up its terms' postings.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::tokenize::{Analyzer, Kind, analyze_query, clip};
use super::{SearchDoc, SearchHit, top_k};

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
    terms: FxHashMap<String, u32>,
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

/// Documents analyzed in one go, in parallel with other chunks.
const CHUNK_DOCS: usize = 256;

/// A run of consecutive documents analyzed together. Their terms are interned into one
/// vocabulary for the chunk, so that merging consults the index's dictionary once per distinct
/// term of the chunk rather than once per occurrence.
struct Chunk {
    /// Tagged terms by chunk-local id.
    vocab: Vec<String>,
    docs: Vec<DocTerms>,
}

/// What one document contributes to the index.
struct DocTerms {
    /// One entry per (term, field), sorted by term, then field. Terms are chunk-local ids until
    /// the chunk is merged, term ids after.
    entries: Vec<FieldTerm>,
    /// Number of term occurrences in each field.
    lengths: [u32; FIELDS],
}

/// The occurrences of one term in one field of a document.
#[derive(Debug, Clone, Copy)]
struct FieldTerm {
    term: u32,
    field: u8,
    /// The kind of its first occurrence in that field.
    kind: Kind,
    /// How often it occurs there.
    tf: u32,
}

/// Whether a field takes part in the similarity vectors of [`SearchIndex::similar_pairs`].
fn compared(field: usize) -> bool {
    field == Field::Summary as usize
        || field == Field::Description as usize
        || field == Field::Triggers as usize
}

/// The texts of a document, each with its field, in a fixed order.
fn doc_texts(doc: &SearchDoc) -> impl Iterator<Item = (Field, &str)> {
    [
        (Field::Name, doc.name.as_str()),
        (Field::Summary, &doc.summary),
        (Field::Description, &doc.description),
        (Field::WhenNotToUse, &doc.when_not_to_use),
    ]
    .into_iter()
    .chain(doc.triggers.iter().map(|t| (Field::Triggers, t.as_str())))
    .chain(doc.examples.iter().map(|e| (Field::Examples, e.as_str())))
    .chain(doc.params.iter().flat_map(|(name, description)| {
        [
            (Field::ParamNames, name.as_str()),
            (Field::ParamDescriptions, description.as_str()),
        ]
    }))
    .chain([
        (Field::PackageName, doc.package_name.as_str()),
        (Field::PackageDescription, &doc.package_description),
    ])
}

/// Whether a field holds names, analyzed with [`Analyzer::analyze_name`].
fn is_name(field: Field) -> bool {
    matches!(field, Field::Name | Field::ParamNames | Field::PackageName)
}

/// A text with its terms (chunk-local ids and kinds, in text order).
#[derive(Default)]
struct Analyzed {
    text: String,
    terms: Vec<(u32, Kind)>,
}

/// Analyzes the documents of one chunk.
#[derive(Default)]
struct ChunkAnalyzer {
    /// Tagged term → chunk-local id.
    ids: FxHashMap<String, u32>,
    /// The tagged term being looked up.
    tagged: String,
    /// Splits texts into terms.
    analyzer: Analyzer,
    /// The terms of the text being analyzed.
    terms: Vec<(u32, Kind)>,
    /// The last package name and package description analyzed: every item of a package
    /// repeats them, and documents of one package are adjacent.
    package: [Analyzed; 2],
    /// (chunk-local term, field) → position in the current document's entries.
    slots: FxHashMap<(u32, u8), usize>,
}

impl ChunkAnalyzer {
    /// Analyzes `docs`, consecutive documents, one after the other.
    fn analyze(docs: &[SearchDoc]) -> Chunk {
        let mut analyzer = ChunkAnalyzer::default();
        let docs = docs.iter().map(|doc| analyzer.analyze_doc(doc)).collect();
        let mut vocab = vec![String::new(); analyzer.ids.len()];
        for (term, id) in analyzer.ids {
            vocab[id as usize] = term;
        }
        Chunk { vocab, docs }
    }

    /// The terms of `text`, as chunk-local ids with their kinds, into `self.terms`.
    fn analyze_text(&mut self, field: Field, text: &str) {
        let ChunkAnalyzer {
            ids,
            tagged,
            analyzer,
            terms,
            ..
        } = self;
        terms.clear();
        let mut emit = |term: &str, kind: Kind| {
            tagged.clear();
            tagged.push_str(kind.tag());
            tagged.push_str(term);
            let id = match ids.get(tagged.as_str()) {
                Some(&id) => id,
                None => {
                    let id = ids.len() as u32;
                    ids.insert(tagged.clone(), id);
                    id
                }
            };
            terms.push((id, kind));
        };
        if is_name(field) {
            analyzer.analyze_name(text, &mut emit);
        } else {
            analyzer.analyze(text, &mut emit);
        }
    }

    /// The (term, field) entries and field lengths of one document.
    fn analyze_doc(&mut self, doc: &SearchDoc) -> DocTerms {
        let mut entries: Vec<FieldTerm> = Vec::new();
        self.slots.clear();
        for (field, text) in doc_texts(doc) {
            let memo = match field {
                Field::PackageName => Some(0),
                Field::PackageDescription => Some(1),
                _ => None,
            };
            let terms = match memo {
                Some(m) if self.package[m].text == text => &self.package[m].terms,
                Some(m) => {
                    self.analyze_text(field, text);
                    let package = &mut self.package[m];
                    package.text.clear();
                    package.text.push_str(text);
                    package.terms.clone_from(&self.terms);
                    &package.terms
                }
                None => {
                    self.analyze_text(field, text);
                    &self.terms
                }
            };
            let field = field as u8;
            for &(term, kind) in terms {
                let slot = *self.slots.entry((term, field)).or_insert_with(|| {
                    entries.push(FieldTerm {
                        term,
                        field,
                        kind,
                        tf: 0,
                    });
                    entries.len() - 1
                });
                entries[slot].tf = entries[slot].tf.saturating_add(1);
            }
        }
        entries.sort_unstable_by_key(|e| (e.term, e.field));
        let mut lengths = [0u32; FIELDS];
        for e in &entries {
            let l = &mut lengths[e.field as usize];
            *l = l.saturating_add(e.tf);
        }
        DocTerms { entries, lengths }
    }
}

/// The index's term dictionary, built from analyzed chunks in document order.
#[derive(Default)]
struct Dictionary {
    terms: FxHashMap<String, u32>,
    kinds: Vec<Kind>,
    /// Number of documents each term occurs in.
    df: Vec<u32>,
}

impl Dictionary {
    /// Replaces the chunk-local terms of `chunk`'s documents by term ids. Ids are given in
    /// first-seen order: documents in order, and a document's new terms sorted by their text.
    /// A new term takes the kind of its entry in the document's first field that has it.
    fn merge(&mut self, chunk: &mut Chunk) {
        const UNSEEN: u32 = u32::MAX;
        let mut ids = vec![UNSEEN; chunk.vocab.len()];
        let mut fresh: Vec<(usize, Kind)> = Vec::new();
        for doc in &mut chunk.docs {
            fresh.clear();
            for group in doc.entries.chunk_by(|a, b| a.term == b.term) {
                let local = group[0].term as usize;
                if ids[local] == UNSEEN {
                    match self.terms.get(chunk.vocab[local].as_str()) {
                        Some(&id) => ids[local] = id,
                        None => fresh.push((local, group[0].kind)),
                    }
                }
            }
            fresh.sort_unstable_by(|a, b| chunk.vocab[a.0].cmp(&chunk.vocab[b.0]));
            for &(local, kind) in &fresh {
                let id = self.kinds.len() as u32;
                self.terms
                    .insert(std::mem::take(&mut chunk.vocab[local]), id);
                self.kinds.push(kind);
                self.df.push(0);
                ids[local] = id;
            }
            for e in &mut doc.entries {
                e.term = ids[e.term as usize];
            }
            for group in doc.entries.chunk_by(|a, b| a.term == b.term) {
                self.df[group[0].term as usize] += 1;
            }
        }
    }
}

impl SearchIndex {
    /// Builds the index; documents are analyzed in parallel.
    pub fn build(docs: Vec<SearchDoc>) -> Self {
        let index = Self::build_with(&docs, Params::default());
        // Many small strings: free them on all threads.
        docs.into_par_iter().for_each(drop);
        index
    }

    fn build_with(docs: &[SearchDoc], params: Params) -> Self {
        let mut chunks: Vec<Chunk> = docs
            .par_chunks(CHUNK_DOCS)
            .map(ChunkAnalyzer::analyze)
            .collect();
        let mut dictionary = Dictionary::default();
        for chunk in &mut chunks {
            dictionary.merge(chunk);
        }
        let Dictionary { terms, kinds, df } = dictionary;
        let doc_terms: Vec<DocTerms> = chunks.into_iter().flat_map(|c| c.docs).collect();
        let n = doc_terms.len();

        // Average field lengths over the docs.
        let mut avg = [0f64; FIELDS];
        for d in &doc_terms {
            for (a, &l) in avg.iter_mut().zip(&d.lengths) {
                *a += f64::from(l);
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

        // Each doc's postings (term id, weight) and similarity vector, in parallel.
        let per_doc: Vec<_> = doc_terms
            .par_iter()
            .map(|d| {
                (
                    doc_postings(d, &params, &avg, &idf),
                    similarity_vector(d, &df, nf),
                )
            })
            .collect();
        drop(doc_terms);

        // Postings grouped by term, each term's in doc order.
        let mut post_start = vec![0u32; terms.len() + 1];
        for (postings, _) in &per_doc {
            for &(id, _) in postings {
                post_start[id as usize + 1] += 1;
            }
        }
        for t in 0..terms.len() {
            post_start[t + 1] += post_start[t];
        }
        let total = post_start[terms.len()] as usize;
        let mut post_docs = vec![0u32; total];
        let mut post_weights = vec![0f32; total];
        let mut next: Vec<u32> = post_start[..terms.len()].to_vec();
        let mut similarity = Vec::with_capacity(n);
        for (d, (postings, sim)) in per_doc.into_iter().enumerate() {
            for (id, w) in postings {
                let at = next[id as usize] as usize;
                post_docs[at] = d as u32;
                post_weights[at] = w;
                next[id as usize] += 1;
            }
            similarity.push(sim);
        }

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
        let (scores, touched) = self.score_touched(query);
        let hits: Vec<SearchHit> = touched
            .into_iter()
            .map(|d| d as usize)
            .filter(|&d| scores[d] > 0.0 && admit(d))
            .map(|d| SearchHit {
                doc: d,
                score: scores[d],
            })
            .collect();
        top_k(hits, k)
    }

    /// The BM25F score of every doc for `query`, by doc index (0 for a doc sharing no term
    /// with it).
    pub fn scores(&self, query: &str) -> Vec<f32> {
        self.score_touched(query).0
    }

    /// Scores of every doc, and the docs that share a term with `query`.
    fn score_touched(&self, query: &str) -> (Vec<f32>, Vec<u32>) {
        let query = clip(query, MAX_QUERY_BYTES);
        // Term id → (occurrences outside negated parts, occurrences inside).
        let mut qterms: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
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
        (scores, touched)
    }

    /// The similarity vector of doc `doc` (empty past the last doc), as used by
    /// [`SearchIndex::similar_pairs`]: unit length, so the dot product of two is their cosine.
    /// The collision lint clusters with it.
    pub fn similarity_vector(&self, doc: usize) -> &[(u32, f32)] {
        self.similarity.get(doc).map_or(&[], Vec::as_slice)
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
        let mut inverted: FxHashMap<u32, Vec<(u32, f32)>> = FxHashMap::default();
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

/// BM25F: the doc's pseudo term frequency of each term over the weighted, length-normalized
/// fields, saturated once; the (term id, weight) of each term with a positive weight.
fn doc_postings(
    d: &DocTerms,
    params: &Params,
    avg: &[f64; FIELDS],
    idf: &[f32],
) -> Vec<(u32, f32)> {
    let mut out = Vec::new();
    for group in d.entries.chunk_by(|a, b| a.term == b.term) {
        let id = group[0].term;
        let mut tf = 0f32;
        for e in group {
            let f = e.field as usize;
            let p = params.fields[f];
            let norm = 1.0 - p.b + p.b * (d.lengths[f] as f32) / (avg[f] as f32);
            tf += p.weight * e.tf as f32 / norm.max(1e-3);
        }
        if tf > 0.0 {
            let w = idf[id as usize] * tf * (params.k1 + 1.0) / (params.k1 + tf);
            if w > 0.0 && w.is_finite() {
                out.push((id, w));
            }
        }
    }
    out
}

/// The doc's similarity vector: sublinear tf times smoothed idf over the compared fields (CJK
/// unigrams left out), unit length, sorted by term id.
fn similarity_vector(d: &DocTerms, df: &[u32], nf: f32) -> Vec<(u32, f32)> {
    let mut v: Vec<(u32, f32)> = Vec::new();
    for group in d.entries.chunk_by(|a, b| a.term == b.term) {
        if group[0].kind == Kind::CjkUnigram {
            continue;
        }
        let tf: u32 = group
            .iter()
            .filter(|e| compared(e.field as usize))
            .map(|e| e.tf)
            .sum();
        if tf > 0 {
            let id = group[0].term;
            let docs_with = df[id as usize] as f32;
            let idf = ((1.0 + nf) / (1.0 + docs_with)).ln() + 1.0;
            v.push((id, (1.0 + (tf as f32).ln()) * idf));
        }
    }
    v.sort_unstable_by_key(|&(id, _)| id);
    let norm = v.iter().map(|(_, w)| w * w).sum::<f32>().sqrt();
    if norm > 0.0 {
        for (_, w) in &mut v {
            *w /= norm;
        }
    }
    v
}
