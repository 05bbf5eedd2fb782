//! The figures of `quiver bench install`: verifying a signed package of many files (unpack,
//! digests, signature, load and check), and installing one package (the same, then the rename
//! into the store and the installed list), each timed over several rounds.

use std::path::Path;
use std::time::Instant;

use ed25519_dalek::SigningKey;
use serde::Serialize;

use crate::InstallError;
use crate::pack::{PackOptions, pack_dir};
use crate::store::{CommitOptions, Store};
use crate::trust::TrustStore;

/// What the benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Files in the generated package.
    pub files: usize,
    /// Its archive's size in bytes.
    pub archive_bytes: usize,
    /// Median time to verify it, in milliseconds.
    pub verify_ms: f64,
    /// The package installed.
    pub install_package: String,
    /// Median time to install it into an empty store, in milliseconds.
    pub install_ms: f64,
    /// Rounds each figure is the median of.
    pub rounds: usize,
}

/// Runs both measurements in `scratch` (an empty folder): a generated package of `files`
/// files, and the package folder `example`.
pub fn run(
    scratch: &Path,
    files: usize,
    example: &Path,
    rounds: usize,
) -> Result<BenchReport, InstallError> {
    let key = SigningKey::from_bytes(&[42; 32]);
    let state = scratch.join("state");
    let mut trust = TrustStore::load(&state)?;
    trust.add("bench", &key.verifying_key(), vec![])?;
    let options = PackOptions {
        publisher: "bench".into(),
        version: None,
        signer: Some(key),
    };
    let big = scratch.join("many");
    generate(&big, files)?;
    let packed = pack_dir(&big, &options)?;
    let archive = scratch.join("many.qpkg");
    std::fs::write(&archive, &packed.bytes).map_err(crate::error::io(&archive))?;
    let mut verify = Vec::new();
    for _ in 0..rounds {
        // As `quiver verify` does: a new scratch folder each time, removed at the end.
        let start = Instant::now();
        let folder = crate::scratch::verify_scratch()?;
        drop(Store::new(folder.path()).stage_archive(&archive, &trust)?);
        drop(folder);
        verify.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let example_packed = pack_dir(example, &options)?;
    let example_archive = scratch.join("example.qpkg");
    std::fs::write(&example_archive, &example_packed.bytes)
        .map_err(crate::error::io(&example_archive))?;
    let mut install = Vec::new();
    for round in 0..rounds {
        let store = Store::new(&scratch.join(format!("install-{round}")));
        let start = Instant::now();
        let staged = store.stage_archive(&example_archive, &trust)?;
        store.commit(staged, &CommitOptions::default())?;
        install.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(BenchReport {
        files,
        archive_bytes: packed.bytes.len(),
        verify_ms: median(&mut verify),
        install_package: example_packed.manifest.full_name(),
        install_ms: median(&mut install),
        rounds,
    })
}

/// A package of `files` files: a skill and small references spread over folders.
fn generate(dir: &Path, files: usize) -> Result<(), InstallError> {
    let write = |path: &Path, text: String| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(crate::error::io(parent))?;
        }
        std::fs::write(path, text).map_err(crate::error::io(path))
    };
    write(
        &dir.join("SKILL.md"),
        "---\nname: many\ndescription: A benchmark skill with many reference files. Use for benchmarks.\n---\n\nRead the references.\n".into(),
    )?;
    for i in 1..files {
        let path = dir.join(format!("references/part-{:02}/note-{i:04}.md", i % 20));
        write(
            &path,
            format!("# Note {i}\n\n{}\n", "Some reference text. ".repeat(20)),
        )?;
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}
