//! The Universal Sentence Encoder multilingual v3 forward pass.
//!
//! Per token: the uint8 embedding row, dequantized; a projection to three 256-wide branch
//! inputs and a layer norm; per branch a two-layer convolution over n-grams of order 2, 3 and 5
//! (window starting 0, 1 and 2 tokens to the left, zero padded at the sentence's ends) with
//! ReLU and residuals; then the 512 embedding values and the three branch outputs (1,280
//! features) are layer-normed. Per sentence: the features are summed, projected to 512 and
//! divided by √(tokens); the deep averaging network (ReLU layers with skip projections, tanh)
//! and an L2 normalization give the vector.
//!
//! Sentences are run in flat micro-batches: the tokens of several sentences form one matrix,
//! so each weight matrix is read once per batch; n-gram windows never cross a sentence.

use std::collections::HashMap;
use std::path::Path;

use ndarray::{Array1, Array2, ArrayView2, Axis, s};
use rayon::prelude::*;

use crate::error::EmbedError;
use crate::npy::{Array, Dtype, read_npz};
use crate::sentencepiece::{BOS_ID, EOS_ID, SentencePiece};

/// Length of an embedding.
pub const DIM: usize = 512;
/// Tokens of a text that count (with `<s>` and `</s>`); the rest of a longer text is ignored.
pub const MAX_TOKENS: usize = 2048;

const CHUNKS: usize = 17;
const CHUNK_ROWS: usize = 7530;
const CNN_DIM: usize = 256;
const FEATURES: usize = DIM + 3 * CNN_DIM;
/// (n-gram order, tokens to the left) of the three convolution branches.
const ORDERS: [(usize, usize); 3] = [(2, 0), (3, 1), (5, 2)];
/// Tokens per micro-batch when embedding many texts.
const TOKEN_BUDGET: usize = 384;

/// One convolution branch.
#[derive(Debug)]
struct Branch {
    order: usize,
    left: usize,
    w1: Array2<f32>,
    b1: Array1<f32>,
    w2: Array2<f32>,
    b2: Array1<f32>,
}

/// The USE multilingual v3 model: tokenizer and weights, ready to embed text.
pub struct Usem3 {
    tokenizer: SentencePiece,
    /// The quantized embedding table, chunk after chunk (piece `id` is row `id / 17` of chunk
    /// `id % 17`).
    table: Vec<u8>,
    scale: [f32; CHUNKS],
    lo: [f32; CHUNKS],
    proj_w: Array2<f32>,
    proj_b: Array1<f32>,
    proj_ln_g: Array1<f32>,
    proj_ln_b: Array1<f32>,
    branches: Vec<Branch>,
    ln_g: Array1<f32>,
    ln_b: Array1<f32>,
    cnn_w: Array2<f32>,
    cnn_b: Array1<f32>,
    d0: Array2<f32>,
    d1: Array2<f32>,
    d2: Array2<f32>,
    d3: Array2<f32>,
    p1: Array2<f32>,
    p3: Array2<f32>,
    eps: f32,
}

impl std::fmt::Debug for Usem3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Usem3")
            .field("pieces", &self.tokenizer.vocab_size())
            .field("dim", &DIM)
            .finish_non_exhaustive()
    }
}

/// Reads typed arrays out of the `.npz` map, checking dtype and shape.
struct Weights<'a> {
    file: &'a Path,
    arrays: HashMap<String, Array>,
}

impl Weights<'_> {
    fn take(&mut self, name: &str, dtype: Dtype, shape: &[usize]) -> Result<Array, EmbedError> {
        let error = |message: String| EmbedError::Array {
            file: self.file.to_owned(),
            array: name.to_owned(),
            message,
        };
        let array = self
            .arrays
            .remove(name)
            .ok_or_else(|| error("missing".into()))?;
        if array.dtype != dtype || array.shape != shape {
            return Err(error(format!(
                "is {:?} {:?}, expected {dtype:?} {shape:?}",
                array.dtype, array.shape
            )));
        }
        Ok(array)
    }

    fn floats(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let array = self.take(name, Dtype::F32, shape)?;
        Ok(array
            .data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, EmbedError> {
        let data = self.floats(name, &[rows, cols])?;
        Array2::from_shape_vec((rows, cols), data).map_err(|e| EmbedError::Array {
            file: self.file.to_owned(),
            array: name.to_owned(),
            message: e.to_string(),
        })
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Array1<f32>, EmbedError> {
        Ok(Array1::from(self.floats(name, &[len])?))
    }

    fn chunk_floats(&mut self, name: &str) -> Result<[f32; CHUNKS], EmbedError> {
        let v = self.floats(name, &[CHUNKS])?;
        let mut out = [0f32; CHUNKS];
        out.copy_from_slice(&v);
        Ok(out)
    }
}

impl Usem3 {
    /// Loads `weights.npz` and `sp.model` from `dir`.
    pub fn load(dir: &Path) -> Result<Usem3, EmbedError> {
        Usem3::from_files(&dir.join("weights.npz"), &dir.join("sp.model"))
    }

    /// Loads the weights and the SentencePiece model from their files.
    pub fn from_files(weights: &Path, sp_model: &Path) -> Result<Usem3, EmbedError> {
        let (tokenizer, arrays) =
            rayon::join(|| SentencePiece::open(sp_model), || read_npz(weights));
        let tokenizer = tokenizer?;
        let mut w = Weights {
            file: weights,
            arrays: arrays?,
        };
        if tokenizer.vocab_size() > CHUNKS * CHUNK_ROWS {
            return Err(EmbedError::Tokenizer {
                file: sp_model.to_owned(),
                message: format!(
                    "{} pieces, more than the {} rows of the embedding table",
                    tokenizer.vocab_size(),
                    CHUNKS * CHUNK_ROWS
                ),
            });
        }
        let mut table = Vec::with_capacity(CHUNKS * CHUNK_ROWS * DIM);
        for chunk in 1..=CHUNKS {
            table.extend_from_slice(
                &w.take(&format!("q{chunk}"), Dtype::U8, &[CHUNK_ROWS, DIM])?
                    .data,
            );
        }
        let scale = w.chunk_floats("scale")?;
        let lo = w.chunk_floats("lo")?;
        let eps = w.take("eps", Dtype::F64, &[])?;
        let mut eps_bytes = [0u8; 8];
        eps_bytes.copy_from_slice(&eps.data);
        let eps = f64::from_le_bytes(eps_bytes) as f32;

        let mut proj = Vec::new();
        let mut proj_b = Vec::new();
        let mut ln_g = Vec::new();
        let mut ln_b = Vec::new();
        let mut branches = Vec::new();
        for (order, left) in ORDERS {
            proj.push(w.matrix(&format!("proj{order}"), DIM, CNN_DIM)?);
            proj_b.extend(w.vector(&format!("proj_b{order}"), CNN_DIM)?);
            ln_g.extend(w.vector(&format!("ln_g{order}"), CNN_DIM)?);
            ln_b.extend(w.vector(&format!("ln_b{order}"), CNN_DIM)?);
            branches.push(Branch {
                order,
                left,
                w1: w.matrix(&format!("w1_{order}"), order * CNN_DIM, CNN_DIM)?,
                b1: w.vector(&format!("b1_{order}"), CNN_DIM)?,
                w2: w.matrix(&format!("w2_{order}"), order * CNN_DIM, CNN_DIM)?,
                b2: w.vector(&format!("b2_{order}"), CNN_DIM)?,
            });
        }
        let views: Vec<_> = proj.iter().map(|m| m.view()).collect();
        let proj_w = ndarray::concatenate(Axis(1), &views).map_err(|e| EmbedError::Array {
            file: weights.to_owned(),
            array: "proj".into(),
            message: e.to_string(),
        })?;
        Ok(Usem3 {
            tokenizer,
            table,
            scale,
            lo,
            proj_w,
            proj_b: Array1::from(proj_b),
            proj_ln_g: Array1::from(ln_g),
            proj_ln_b: Array1::from(ln_b),
            branches,
            ln_g: w.vector("ln_g", FEATURES)?,
            ln_b: w.vector("ln_b", FEATURES)?,
            cnn_w: w.matrix("cnn_W", FEATURES, DIM)?,
            cnn_b: w.vector("cnn_b", DIM)?,
            d0: w.matrix("d0", DIM, 320)?,
            d1: w.matrix("d1", 320, 320)?,
            d2: w.matrix("d2", 320, DIM)?,
            d3: w.matrix("d3", DIM, DIM)?,
            p1: w.matrix("p1", DIM, 320)?,
            p3: w.matrix("p3", 320, DIM)?,
            eps,
        })
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &SentencePiece {
        &self.tokenizer
    }

    /// The token ids the model reads for `text`: `<s>`, the pieces, `</s>`, at most
    /// [`MAX_TOKENS`].
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 2 + 2);
        ids.push(BOS_ID);
        ids.extend(self.tokenizer.encode(text));
        ids.truncate(MAX_TOKENS - 1);
        ids.push(EOS_ID);
        ids
    }

    /// The L2-normalized 512-dimensional embedding of `text`.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.token_ids(text);
        let mut out = self.forward(&[ids]);
        out.pop().unwrap_or_else(|| vec![0.0; DIM])
    }

    /// The embeddings of many texts, in order, computed in parallel micro-batches.
    pub fn embed_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<f32>> {
        let ids: Vec<Vec<u32>> = texts
            .par_iter()
            .map(|t| self.token_ids(t.as_ref()))
            .collect();
        let mut groups: Vec<&[Vec<u32>]> = Vec::new();
        let (mut first, mut tokens) = (0, 0);
        for (i, t) in ids.iter().enumerate() {
            if i > first && tokens + t.len() > TOKEN_BUDGET {
                groups.push(&ids[first..i]);
                first = i;
                tokens = 0;
            }
            tokens += t.len();
        }
        if first < ids.len() {
            groups.push(&ids[first..]);
        }
        groups
            .par_iter()
            .map(|g| self.forward(g))
            .collect::<Vec<_>>()
            .into_iter()
            .flatten()
            .collect()
    }

    /// Runs one micro-batch of token id lists (each non-empty).
    fn forward(&self, sentences: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let n: usize = sentences.iter().map(Vec::len).sum();
        if n == 0 {
            return Vec::new();
        }
        // Each token's sentence bounds, for the n-gram windows.
        let mut bounds = Vec::with_capacity(n);
        let mut start = 0;
        for s in sentences {
            bounds.extend(std::iter::repeat_n((start, start + s.len()), s.len()));
            start += s.len();
        }

        let mut feats = Array2::<f32>::zeros((n, FEATURES));
        for (t, &id) in sentences.iter().flatten().enumerate() {
            let id = id as usize;
            let chunk = id % CHUNKS;
            let offset = (chunk * CHUNK_ROWS + id / CHUNKS) * DIM;
            let (scale, lo) = (self.scale[chunk], self.lo[chunk]);
            let Some(row) = self.table.get(offset..offset + DIM) else {
                continue;
            };
            let mut out = feats.row_mut(t);
            for (o, &q) in out.iter_mut().zip(row) {
                *o = f32::from(q) * scale + lo;
            }
        }

        let mut x = matmul(feats.slice(s![.., ..DIM]), &self.proj_w);
        x += &self.proj_b;
        layer_norm(&mut x, &self.proj_ln_g, &self.proj_ln_b, self.eps);

        for (i, b) in self.branches.iter().enumerate() {
            let xs = x.slice(s![.., i * CNN_DIM..(i + 1) * CNN_DIM]);
            let mut h = matmul(window(xs, b.order, b.left, &bounds).view(), &b.w1);
            h += &b.b1;
            h.mapv_inplace(relu);
            h += &xs;
            let mut c = matmul(window(h.view(), b.order, b.left, &bounds).view(), &b.w2);
            c += &b.b2;
            c.mapv_inplace(relu);
            c += &h;
            feats
                .slice_mut(s![.., DIM + i * CNN_DIM..DIM + (i + 1) * CNN_DIM])
                .assign(&c);
        }
        layer_norm(&mut feats, &self.ln_g, &self.ln_b, self.eps);

        // Sum, then project: the sum commutes with the linear projection.
        let m = sentences.len();
        let mut sums = Array2::<f32>::zeros((m, FEATURES));
        let mut at = 0;
        for (k, s) in sentences.iter().enumerate() {
            let rows = feats.slice(s![at..at + s.len(), ..]);
            sums.row_mut(k).assign(&rows.sum_axis(Axis(0)));
            at += s.len();
        }
        let mut mean = matmul(sums.view(), &self.cnn_w);
        for (k, s) in sentences.iter().enumerate() {
            let len = s.len() as f32;
            let mut row = mean.row_mut(k);
            row.scaled_add(len, &self.cnn_b);
            row *= 1.0 / len.sqrt();
        }

        let y0 = matmul(mean.view(), &self.d0).mapv(relu);
        let mut y1 = matmul(mean.view(), &self.p1);
        y1 += &matmul(y0.view(), &self.d1);
        y1.mapv_inplace(relu);
        let y2 = matmul(y1.view(), &self.d2).mapv(relu);
        let mut z = matmul(y1.view(), &self.p3);
        z += &matmul(y2.view(), &self.d3);
        z.mapv_inplace(f32::tanh);
        z.outer_iter()
            .map(|row| {
                let norm = row.dot(&row).max(self.eps).sqrt();
                row.iter().map(|v| v / norm).collect()
            })
            .collect()
    }
}

/// Rows of `a` up to which [`matmul`] streams the weights itself instead of calling the
/// packed GEMM (whose packing of the weight matrix dominates for a few rows).
const SMALL_ROWS: usize = 48;

/// `a · w`. For a few rows (a query), the weights are read once, row by row, and each row of
/// the result accumulates `a[i][k] · w[k]` (skipping zeros, common after ReLU and at the
/// window padding), vectorized for the CPU found at run time; for more rows, ndarray's GEMM.
fn matmul(a: ArrayView2<f32>, w: &Array2<f32>) -> Array2<f32> {
    let (m, k) = a.dim();
    let n = w.ncols();
    if m > SMALL_ROWS || k != w.nrows() {
        return a.dot(w);
    }
    let (Some(a), Some(w)) = (a.as_slice(), w.as_slice()) else {
        return a.dot(w);
    };
    let mut out = vec![0f32; m * n];
    pulp::Arch::new().dispatch(|| {
        for (kk, w_row) in w.chunks_exact(n).enumerate() {
            for (i, out_row) in out.chunks_exact_mut(n).enumerate() {
                let x = a[i * k + kk];
                if x == 0.0 {
                    continue;
                }
                for (o, &wv) in out_row.iter_mut().zip(w_row) {
                    *o += x * wv;
                }
            }
        }
    });
    Array2::from_shape_vec((m, n), out).unwrap_or_else(|_| Array2::zeros((m, n)))
}

fn relu(v: f32) -> f32 {
    v.max(0.0)
}

/// Layer norm over each row, in place.
fn layer_norm(x: &mut Array2<f32>, gamma: &Array1<f32>, beta: &Array1<f32>, eps: f32) {
    let width = x.ncols() as f32;
    for mut row in x.outer_iter_mut() {
        let mean = row.sum() / width;
        row -= mean;
        let var = row.dot(&row) / width;
        row *= 1.0 / (var + eps).sqrt();
        row *= gamma;
        row += beta;
    }
}

/// The n-gram windows of `x`: row `t` holds rows `t - left .. t - left + order` side by side,
/// zeros where a row falls outside token `t`'s sentence.
fn window(x: ArrayView2<f32>, order: usize, left: usize, bounds: &[(usize, usize)]) -> Array2<f32> {
    let (n, width) = x.dim();
    let mut out = Array2::<f32>::zeros((n, order * width));
    for (t, &(start, end)) in bounds.iter().enumerate() {
        let mut row = out.row_mut(t);
        for slot in 0..order {
            let Some(pos) = (t + slot).checked_sub(left) else {
                continue;
            };
            if pos < start || pos >= end {
                continue;
            }
            row.slice_mut(s![slot * width..(slot + 1) * width])
                .assign(&x.row(pos));
        }
    }
    out
}
