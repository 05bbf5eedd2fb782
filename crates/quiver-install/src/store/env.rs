//! An installed package's Python environment: made at install time from its
//! `requirements.txt`, in `<state>/envs/<digest hex>/`, never at call time.
//!
//! 1. `python3 -m venv <env>` with the `python3` the sandbox finds ([`PYTHON_DIRS`], its
//!    `PATH`), so the environment's interpreter is one every tool may execute;
//! 2. `<env>/bin/python -m pip install --no-deps --only-binary :all: -r requirements.txt`
//!    (`--require-hashes` when the file has hashes; `--no-index --find-links DIR` with a wheel
//!    folder). `--no-deps`: only what the file pins is installed, never a dependency pip would
//!    pick; `--only-binary`: no source distribution is built, since building one runs its
//!    code on the host, outside the sandbox;
//! 3. `pip check`: a dependency the file does not pin refuses the package;
//! 4. the [`COMPLETE`] marker, last; then the tree is made read-only.
//!
//! Any failure removes the environment. An environment without its marker (a crash) is
//! removed by the next `Store::sweep` or rebuilt by the next install; one with it is reused
//! by every install of the same digest.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use quiver_package::distribution::python_env::{COMPLETE, REQUIREMENTS, env_dir};

use super::files::{make_read_only, remove_tree};
use super::{CommitOptions, Step, Store, stop_at};
use crate::InstallError;
use crate::error::io;

/// Where the `python3` that makes environments is looked for, in order: the sandbox's `PATH`
/// (`quiver_sandbox::SANDBOX_PATH`), so the environment's interpreter is one a tool may run.
pub const PYTHON_DIRS: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// Lines of a failing command's output kept in the error.
const TAIL_LINES: usize = 8;

impl Store {
    /// `<state>/envs/<hex>`: the Python environment of the installed version `digest`.
    pub fn env_folder(&self, digest: &str) -> PathBuf {
        env_dir(&self.state, digest)
    }

    /// Makes the environment of `digest` from `package_dir`'s `requirements.txt` unless it is
    /// complete already; nothing when the package has none. Called under the install lock.
    pub(super) fn ensure_env(
        &self,
        digest: &str,
        package_dir: &Path,
        options: &CommitOptions,
    ) -> Result<Option<PathBuf>, InstallError> {
        let requirements = package_dir.join(REQUIREMENTS);
        if !requirements.is_file() {
            return Ok(None);
        }
        let env = self.env_folder(digest);
        if env.join(COMPLETE).is_file() {
            return Ok(Some(env));
        }
        if env.exists() {
            remove_tree(&env)?;
        }
        let text = fs::read_to_string(&requirements).map_err(io(&requirements))?;
        let (found, problems) = quiver_package::requirements::parse(&text);
        if !problems.is_empty() {
            return Err(InstallError::Check(
                quiver_package::requirements::diagnostics(&problems, &requirements),
            ));
        }
        let built = self.build_env(&env, &requirements, !found.is_empty(), options);
        match built {
            Ok(()) => Ok(Some(env)),
            Err(e) => {
                // A test's stop after the step leaves the environment as a crash would.
                if !matches!(options.fail_at, Some(Step::Environment)) && env.exists() {
                    let _ = remove_tree(&env);
                }
                Err(e)
            }
        }
    }

    fn build_env(
        &self,
        env: &Path,
        requirements: &Path,
        any: bool,
        options: &CommitOptions,
    ) -> Result<(), InstallError> {
        let python = PYTHON_DIRS
            .iter()
            .map(|d| Path::new(d).join("python3"))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                InstallError::Environment(format!(
                    "no `python3` in {}: the package's tools run with that Python",
                    PYTHON_DIRS.join(", ")
                ))
            })?;
        if let Some(parent) = env.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut venv = Command::new(&python);
        venv.args(["-m", "venv"]);
        if !any {
            venv.arg("--without-pip");
        }
        venv.arg(env);
        run(&mut venv, &format!("`{} -m venv`", python.display())).map_err(|e| {
            InstallError::Environment(format!(
                "{e}\n\nhint: the `venv` module (Debian: the `python3-venv` package) makes it"
            ))
        })?;
        if any {
            let env_python = env.join("bin/python");
            let mut pip = Command::new(&env_python);
            pip.args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--no-deps",
                "--only-binary",
                ":all:",
            ]);
            if fs::read_to_string(requirements).is_ok_and(|t| t.contains("--hash=")) {
                pip.arg("--require-hashes");
            }
            if let Some(wheels) = &options.wheels {
                pip.arg("--no-index").arg("--find-links").arg(wheels);
            }
            pip.arg("-r").arg(requirements);
            run(&mut pip, "installing `requirements.txt`").map_err(InstallError::Environment)?;
            let mut check = Command::new(&env_python);
            check.args(["-m", "pip", "check", "--disable-pip-version-check"]);
            run(&mut check, "`pip check`").map_err(|e| {
                InstallError::Environment(format!(
                    "{e}\n\nhint: `requirements.txt` must pin every dependency too (`--no-deps` installs only what it lists), as `pip freeze` or `pip-compile` writes it"
                ))
            })?;
        }
        stop_at(options, Step::Environment)?;
        let marker = env.join(COMPLETE);
        let mut file = fs::File::create(&marker).map_err(io(&marker))?;
        file.write_all(b"complete\n").map_err(io(&marker))?;
        file.sync_all().map_err(io(&marker))?;
        make_read_only(env)
    }
}

/// Runs `command`; on failure, what it said (from pip's first `ERROR:` line when there is one,
/// else its last lines), prefixed with `what`.
fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output: Output = command
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot start it: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    // pip's first `ERROR:` line and the details under it (the requirement, the hashes), else
    // the last lines.
    let lines = match all.iter().position(|l| l.starts_with("ERROR")) {
        Some(first) => &all[first..all.len().min(first + TAIL_LINES)],
        None => &all[all.len().saturating_sub(TAIL_LINES)..],
    };
    Err(format!(
        "{what} failed ({}):\n  {}",
        output.status,
        lines.join("\n  ")
    ))
}
