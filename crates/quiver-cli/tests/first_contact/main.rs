//! Issue 23, items 4 and 5: what a new user meets first, through the built binary. The
//! environment as the ecosystem sets it (empty variables, XDG folders, the official SDKs'
//! provider variables), and nothing missing without a word.
//!
//! One test binary with a module per concern; every test runs `quiver` in a clean
//! environment of its own ([`Quiver`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

#[path = "../support/mod.rs"]
mod support;

mod env;
mod json;
mod logs;
mod progress;
mod shell;
mod silent;

/// The variables a test must not inherit from whoever runs the suite.
const INHERITED: [&str; 16] = [
    "QUIVER_PATH",
    "QUIVER_CONFIG",
    "QUIVER_AGENT_CONFIG",
    "QUIVER_LOG",
    "QUIVER_PROVIDER",
    "QUIVER_PROVIDER_KIND",
    "QUIVER_BASE_URL",
    "QUIVER_API_KEY_ENV",
    "QUIVER_MODEL",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "RUST_LOG",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
];

/// A temporary home, state folder and working folder for `quiver`.
pub struct Quiver {
    pub dir: tempfile::TempDir,
}

impl Default for Quiver {
    fn default() -> Self {
        Self::new()
    }
}

impl Quiver {
    /// A fresh temporary folder with `home`, `state` and `cwd` in it.
    pub fn new() -> Quiver {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["home", "state", "cwd"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Quiver { dir }
    }

    /// A path under the temporary folder.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes `text` at `rel` under the temporary folder.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        write(self.dir.path(), rel, text)
    }

    /// `quiver` with `args`, in the working folder, with a clean environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(args)
            .current_dir(self.path("cwd"))
            .env("HOME", self.path("home"))
            .env("QUIVER_HOME", self.path("state"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        for name in INHERITED {
            command.env_remove(name);
        }
        command
    }

    /// Runs `quiver` with `args` and extra variables.
    pub fn run(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut command = self.command(args);
        command.envs(vars.iter().copied());
        command.output().unwrap()
    }
}

/// Writes `text` at `rel` under `root`, creating folders.
pub fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// Stdout and stderr, for assertion messages.
pub fn both(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether package tools can run here; prints why not.
pub fn sandbox_ok() -> bool {
    match quiver_sandbox::support() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED: the sandbox cannot run here: {why}");
            false
        }
    }
}
