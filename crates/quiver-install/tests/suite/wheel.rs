//! A tiny pure-Python wheel built in the test (a module and its `.dist-info`: `METADATA`,
//! `WHEEL`, `RECORD`), so requirements install from a local folder with no network. Also
//! included (by `#[path]`) by quiver-cli's `python_env` test, so one copy serves both.
// Saying why a test skips is the point.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `<dir>/<name>-<version>-py3-none-any.whl` holding the module `<name>.py` with
/// `source`, depending on `requires` (`Requires-Dist` lines), and returns its path.
pub fn build_wheel(
    dir: &Path,
    name: &str,
    version: &str,
    source: &str,
    requires: &[&str],
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    const SCRIPT: &str = r#"
import base64, hashlib, sys, zipfile
out, name, version, source = sys.argv[1:5]
requires = sys.argv[5:]
dist = f"{name}-{version}.dist-info"
meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
files = {
    f"{name}.py": source,
    f"{dist}/METADATA": meta,
    f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: quiver-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{dist}/RECORD,,")
files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(out, "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
"#;
    let out = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let status = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&out)
        .args([name, version, source])
        .args(requires)
        .status()
        .unwrap();
    assert!(status.success(), "building the wheel {name} {version}");
    out
}

/// Whether this machine can make Python environments (`python3 -m venv` with pip, from the
/// interpreter `quiver install` uses); tests that need one print why and return when not.
pub fn can_make_envs() -> bool {
    let python = ["/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let Some(python) = python else {
        eprintln!("SKIPPED: no python3 in /usr/local/bin, /usr/bin or /bin");
        return false;
    };
    let ok = Command::new(python)
        .args(["-c", "import ensurepip, venv"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: {python} has no `venv`/`ensurepip` module (Debian: python3-venv)");
    }
    ok
}
