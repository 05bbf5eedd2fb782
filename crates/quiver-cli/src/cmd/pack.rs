//! `quiver pack`, `quiver sign` and `quiver verify`: a package folder into a deterministic,
//! optionally signed `.qpkg`, a signature added to one, and one checked as `install` checks it
//! (unpacked safely, signatures against the trust store, loaded and checked) without
//! installing it.

use std::path::PathBuf;
use std::process::ExitCode;

use quiver_install::pack::{PackOptions, Packed, add_signature, pack_dir};
use quiver_install::store::Store;
use quiver_install::trust::TrustStore;
use serde_json::json;

use super::install::{install_failure, state};

/// Arguments of `quiver pack`.
#[derive(Debug, clap::Args)]
pub struct PackArgs {
    /// The package folder.
    pub dir: PathBuf,
    /// Where to write the archive (default `<id>-<version>.qpkg` in the current folder).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The publisher named in the manifest (default: the signing key's, else `local`).
    #[arg(long)]
    pub publisher: Option<String>,
    /// Sign with this key (a key id or a publisher with one key; `quiver keys list`).
    #[arg(long)]
    pub key: Option<String>,
    /// The version, when the folder declares none or it is to be overridden.
    #[arg(long = "set-version", value_name = "VERSION")]
    pub version: Option<semver::Version>,
    /// Print the manifest and digest as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// The `.qpkg` to sign (rewritten in place with the signature added).
    pub package: PathBuf,
    /// The key (a key id or a publisher with one key).
    #[arg(long)]
    pub key: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `quiver verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The `.qpkg` to check.
    pub package: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `quiver pack`.
pub fn pack(args: PackArgs) -> miette::Result<ExitCode> {
    let signer = match &args.key {
        Some(name) => Some(quiver_install::keys::find_key(&state()?, name).map_err(report)?),
        None => None,
    };
    let publisher = args
        .publisher
        .clone()
        .or_else(|| signer.as_ref().map(|k| k.publisher.clone()))
        .unwrap_or_else(|| "local".to_owned());
    if let Some(key) = &signer
        && key.publisher != publisher
    {
        return Err(miette::miette!(
            "key `{}` belongs to `{}`, not to `{publisher}`",
            key.key_id,
            key.publisher
        ));
    }
    let options = PackOptions {
        publisher,
        version: args.version.clone(),
        signer: signer
            .map(|k| k.signing_key())
            .transpose()
            .map_err(report)?,
    };
    let packed = match pack_dir(&args.dir, &options) {
        Ok(p) => p,
        Err(e) => return install_failure(e, args.json),
    };
    let base = std::env::current_dir().unwrap_or_default();
    crate::diagnostics::emit(&packed.diagnostics, false, &base);
    let output = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}-{}.qpkg",
            packed.manifest.id, packed.manifest.version
        ))
    });
    std::fs::write(&output, &packed.bytes)
        .map_err(|e| miette::miette!("cannot write `{}`: {e}", output.display()))?;
    print_packed(&packed, &output, args.json);
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver sign`.
pub fn sign(args: SignArgs) -> miette::Result<ExitCode> {
    let key = quiver_install::keys::find_key(&state()?, &args.key).map_err(report)?;
    let bytes = std::fs::read(&args.package)
        .map_err(|e| miette::miette!("cannot read `{}`: {e}", args.package.display()))?;
    let signing = key.signing_key().map_err(report)?;
    let packed = match add_signature(&bytes, &signing) {
        Ok(p) => p,
        Err(e) => return install_failure(e, args.json),
    };
    if packed.manifest.publisher != key.publisher {
        return Err(miette::miette!(
            "the package is published by `{}`; key `{}` belongs to `{}`",
            packed.manifest.publisher,
            key.key_id,
            key.publisher
        ));
    }
    std::fs::write(&args.package, &packed.bytes)
        .map_err(|e| miette::miette!("cannot write `{}`: {e}", args.package.display()))?;
    print_packed(&packed, &args.package, args.json);
    Ok(ExitCode::SUCCESS)
}

/// Runs `quiver verify`: exit 0 when `install` would take the package, 1 when it would not.
pub fn verify(args: VerifyArgs) -> miette::Result<ExitCode> {
    let trust = TrustStore::load(&state()?).map_err(report)?;
    let scratch = quiver_install::scratch::verify_scratch().map_err(report)?;
    let staged = match Store::new(scratch.path()).stage_archive(&args.package, &trust) {
        Ok(s) => s,
        Err(e) => return install_failure(e, args.json),
    };
    let base = std::env::current_dir().unwrap_or_default();
    crate::diagnostics::emit(&staged.diagnostics, false, &base);
    if args.json {
        crate::out(&json!({"ok": true, "record": staged.record}).to_string());
    } else {
        let r = &staged.record;
        crate::out(&format!(
            "ok: {}/{} {} {} signed by {}",
            r.publisher,
            r.id,
            r.version,
            r.digest,
            r.signed_by.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_packed(packed: &Packed, output: &std::path::Path, json: bool) {
    let m = &packed.manifest;
    let keys: Vec<&str> = packed
        .signatures
        .signatures
        .iter()
        .map(|s| s.key_id.as_str())
        .collect();
    if json {
        crate::out(
            &json!({"path": output, "digest": m.digest(), "manifest": m, "signed_by": keys})
                .to_string(),
        );
    } else {
        crate::out(&output.display().to_string());
        crate::err(&format!(
            "{}/{} {}: {} files, {}, {}",
            m.publisher,
            m.id,
            m.version,
            m.files.len(),
            m.digest(),
            if keys.is_empty() {
                "unsigned".to_owned()
            } else {
                format!("signed by {}", keys.join(", "))
            }
        ));
    }
}

fn report(e: quiver_install::InstallError) -> miette::Report {
    miette::miette!("{e}")
}
