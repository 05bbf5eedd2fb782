//! `quiver keys new|list|export` (the user's signing keys) and `quiver trust add|list|revoke|
//! retire` (the publisher keys the user trusts, with their scopes and states), each printing
//! fingerprints.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_install::keys::{find_key, list_keys, new_key, parse_export_line};
use quiver_install::store::Store;
use quiver_install::trust::TrustStore;
use quiver_package::distribution::signature::{
    KeyState, TrustedKey, decode_public_key, fingerprint,
};
use serde_json::json;

use super::install::state;

/// `quiver keys`.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Make a new signing key for a publisher.
    New {
        /// The publisher (`acme`).
        publisher: String,
        /// Print the key as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the signing keys (never their secrets).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a key's public line, for `quiver trust add` on another machine.
    Export {
        /// A key id or a publisher with one key.
        key: String,
    },
}

/// `quiver trust`.
#[derive(Debug, clap::Subcommand)]
pub enum TrustCommand {
    /// Trust a publisher key: a `quiver-key v1 ...` line, or a file holding one.
    Add {
        /// The line, or a file with it.
        key: String,
        /// What it may sign: `acme/*` (default: every package of its publisher) or
        /// `acme/weather` (repeatable).
        #[arg(long)]
        scope: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the trusted keys with their scopes, states and fingerprints.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: its signatures count for nothing, and installed packages signed only by
    /// it are disabled.
    Revoke {
        /// A key id (or a prefix of at least 4 digits).
        key: String,
    },
    /// Retire a key: it installs nothing new; what it signed stays installed.
    Retire {
        /// A key id (or a prefix of at least 4 digits).
        key: String,
    },
}

/// Runs `quiver keys`.
pub fn keys(command: KeysCommand) -> miette::Result<ExitCode> {
    let state = state()?;
    match command {
        KeysCommand::New { publisher, json } => {
            let key = new_key(&state, &publisher).map_err(report)?;
            let fp = fingerprint(&key.verifying_key().map_err(report)?);
            if json {
                crate::out(
                    &json!({"publisher": key.publisher, "key_id": key.key_id, "fingerprint": fp})
                        .to_string(),
                );
            } else {
                crate::out(&key.key_id);
                crate::err(&format!(
                    "new key for `{}`, fingerprint {}\n\nhint: `quiver keys export {}` prints the line others pass to `quiver trust add`",
                    key.publisher,
                    grouped(&fp),
                    key.key_id
                ));
            }
        }
        KeysCommand::List { json } => {
            let keys = list_keys(&state).map_err(report)?;
            let rows: Vec<_> = keys
                .iter()
                .map(|k| {
                    let fp = decode_public_key(&k.public_key)
                        .map(|p| fingerprint(&p))
                        .unwrap_or_default();
                    (k.publisher.clone(), k.key_id.clone(), fp)
                })
                .collect();
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|(p, id, fp)| json!({"publisher": p, "key_id": id, "fingerprint": fp}))
                    .collect();
                crate::out(&serde_json::Value::Array(v).to_string());
            } else if rows.is_empty() {
                crate::err("no signing keys; `quiver keys new PUBLISHER` makes one");
            } else {
                for (p, id, fp) in rows {
                    crate::out(&format!("{p}\t{id}\t{}", grouped(&fp)));
                }
            }
        }
        KeysCommand::Export { key } => {
            crate::out(&find_key(&state, &key).map_err(report)?.export_line());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver trust`.
pub fn trust(command: TrustCommand) -> miette::Result<ExitCode> {
    let state = state()?;
    // `trust.json` is read, changed and written under the state lock, as installs are.
    let _held = Store::new(&state).lock_state().map_err(report)?;
    let mut store = TrustStore::load(&state).map_err(report)?;
    match command {
        TrustCommand::Add { key, scope, json } => {
            let line = if PathBuf::from(&key).is_file() {
                std::fs::read_to_string(&key).map_err(|e| miette::miette!("`{key}`: {e}"))?
            } else {
                key
            };
            let (publisher, public) = parse_export_line(&line).map_err(report)?;
            let entry = store.add(&publisher, &public, scope).map_err(report)?;
            store.save().map_err(report)?;
            if json {
                crate::out(&row_json(&entry).to_string());
            } else {
                crate::err(&format!(
                    "trusting key {} of `{}` for {}\nfingerprint {}\n\nhint: compare the fingerprint with the one the publisher shows",
                    entry.key_id,
                    entry.publisher,
                    entry.scopes.join(", "),
                    grouped(&fingerprint(&public))
                ));
            }
        }
        TrustCommand::List { json } => {
            if json {
                let v: Vec<_> = store.keys.iter().map(row_json).collect();
                crate::out(&serde_json::Value::Array(v).to_string());
            } else if store.keys.is_empty() {
                crate::err("no trusted keys; `quiver trust add` adds one");
            } else {
                for k in &store.keys {
                    crate::out(&format!(
                        "{}\t{}\t{}\t{}\t{}",
                        k.publisher,
                        k.key_id,
                        state_word(k.state),
                        k.scopes.join(","),
                        grouped(&row_fingerprint(k))
                    ));
                }
            }
        }
        TrustCommand::Revoke { key } => {
            let entry = store.set_state(&key, KeyState::Revoked).map_err(report)?;
            store.save().map_err(report)?;
            super::install::tell_servers(&state);
            let disabled = Store::new(&state).roots(&store).map_err(report)?.disabled;
            crate::err(&format!(
                "revoked key {} of `{}` (fingerprint {})",
                entry.key_id,
                entry.publisher,
                grouped(&row_fingerprint(&entry))
            ));
            for r in disabled
                .iter()
                .filter(|r| r.signed_by.contains(&entry.key_id))
            {
                crate::err(&format!(
                    "disabled `{}` {} (signed only by revoked keys)",
                    r.id, r.version
                ));
            }
        }
        TrustCommand::Retire { key } => {
            let entry = store.set_state(&key, KeyState::Retired).map_err(report)?;
            store.save().map_err(report)?;
            crate::err(&format!(
                "retired key {} of `{}` (fingerprint {}): it installs nothing new; what it signed stays installed",
                entry.key_id,
                entry.publisher,
                grouped(&row_fingerprint(&entry))
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn row_fingerprint(k: &TrustedKey) -> String {
    decode_public_key(&k.public_key)
        .map(|p| fingerprint(&p))
        .unwrap_or_default()
}

fn row_json(k: &TrustedKey) -> serde_json::Value {
    json!({"publisher": k.publisher, "key_id": k.key_id, "scopes": k.scopes, "state": k.state, "fingerprint": row_fingerprint(k)})
}

fn state_word(state: KeyState) -> &'static str {
    match state {
        KeyState::Active => "active",
        KeyState::Retired => "retired",
        KeyState::Revoked => "revoked",
    }
}

/// A fingerprint in groups of four hex digits, easier to compare by eye.
fn grouped(fp: &str) -> String {
    fp.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn report(e: quiver_install::InstallError) -> miette::Report {
    miette::miette!("{e}")
}
