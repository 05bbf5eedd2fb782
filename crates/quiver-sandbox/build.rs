//! Names this build of the sandbox: a hash of the crate's sources and of the workspace's
//! `Cargo.lock`, as `QUIVER_SANDBOX_BUILD`. The runtime uses a launcher binary only when it
//! reports the same name, so a stale `quiver-sandbox-exec` left beside a rebuilt `quiver`
//! (`cargo run` builds one binary) never enforces an older sandbox.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut inputs = Vec::new();
    files(&manifest.join("src"), &mut inputs);
    inputs.sort();
    let lock = manifest.join("../../Cargo.lock");
    if lock.is_file() {
        inputs.push(lock);
    }
    let mut hasher = DefaultHasher::new();
    for path in &inputs {
        path.strip_prefix(&manifest)
            .unwrap_or(path)
            .hash(&mut hasher);
        std::fs::read(path).unwrap_or_default().hash(&mut hasher);
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed=src");
    println!(
        "cargo:rustc-env=QUIVER_SANDBOX_BUILD={}-{:016x}",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        hasher.finish()
    );
}
