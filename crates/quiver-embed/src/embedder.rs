//! What the vector cache and the search index need of a sentence-embedding model, so that the
//! multilingual model and the optional English booster are used the same way.

use crate::error::EmbedError;
use crate::model::{DIM, Usem3};

/// A sentence-embedding model: texts in, L2-normalized vectors out.
pub trait Embedder: Send + Sync {
    /// The model's name (`usem3`, `minilm`); it also tags the model's keys in a [`VectorCache`](crate::VectorCache).
    fn name(&self) -> &'static str;

    /// Length of its vectors.
    fn dim(&self) -> usize;

    /// The vectors of `texts`, in order.
    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// The vector of one text.
    fn embed_text(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed_texts(&[text])?;
        Ok(vectors.pop().unwrap_or_else(|| vec![0.0; self.dim()]))
    }
}

impl Embedder for Usem3 {
    fn name(&self) -> &'static str {
        "usem3"
    }

    fn dim(&self) -> usize {
        DIM
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self.embed_batch(texts))
    }

    fn embed_text(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed(text))
    }
}
