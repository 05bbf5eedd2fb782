//! `quiver index build DIR`: a package index folder (one file of versions per package and a
//! signed snapshot with the next sequence number and an expiry) from the `.qpkg` files under
//! it. `quiver install publisher/id[@version] --index DIR` reads it.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::install::{install_failure, state};

/// `quiver index`.
#[derive(Debug, clap::Subcommand)]
pub enum IndexCommand {
    /// Index every `.qpkg` under a folder and sign the snapshot.
    Build {
        /// The index folder.
        dir: PathBuf,
        /// The key that signs the snapshot (clients trust it with `--scope @index`).
        #[arg(long)]
        key: String,
        /// Days until the snapshot expires.
        #[arg(long, default_value_t = 7)]
        ttl_days: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `quiver index`.
pub fn run(command: IndexCommand) -> miette::Result<ExitCode> {
    match command {
        IndexCommand::Build {
            dir,
            key,
            ttl_days,
            json,
        } => {
            let key = quiver_install::keys::find_key(&state()?, &key)
                .and_then(|k| k.signing_key())
                .map_err(|e| miette::miette!("{e}"))?;
            match quiver_install::index::build(&dir, &key, ttl_days * 86_400) {
                Ok(built) => {
                    if json {
                        crate::out(&json!({"sequence": built.snapshot.sequence, "expires": built.snapshot.expires, "versions": built.versions, "files": built.snapshot.files.len()}).to_string());
                    } else {
                        crate::out(&format!(
                            "sequence {}: {} versions of {} packages, expires in {ttl_days} days",
                            built.snapshot.sequence,
                            built.versions,
                            built.snapshot.files.len()
                        ));
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => install_failure(e, json),
            }
        }
    }
}
