//! What a tool's sandbox grants, computed by one function, [`plan`], from the job's
//! declarations and the runtime's fixed system paths only.
//!
//! Nothing a package writes widens its own view: an entry point's `#!` line, a link in the
//! package, a file name or a relative word of its command only ever select among paths that
//! are granted anyway (the system folders, the package folder, the declared paths); a path
//! they name outside those is refused with a clear error, never mounted. The hidden paths
//! (Quiver's state folder, the state database wherever it lives, the config file, tokens) are
//! checked last, on canonical paths, against every list: a grant inside one is dropped unless
//! it lies inside the tool's own data folder or package folder, which the view mounts back.
//!
//! [`plan`] reads the package's files (to resolve links and read the `#!` line) and starts
//! nothing, so it is tested on generated package folders without processes.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::sandbox::{Job, SANDBOX_PATH};

/// System folders every tool may read (and, with `shell: true`, execute from).
pub const SYSTEM_DIRS: &[&str] = &["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"];
/// Files under `/etc` that programs need to start, resolve names and check certificates;
/// never `/etc/shadow` and the like.
pub const SYSTEM_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/passwd",
    "/etc/group",
    "/etc/alternatives",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
];
/// Dynamic loaders, which `execve` opens for execution.
pub const LOADERS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-linux-armhf.so.3",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/ld-musl-aarch64.so.1",
];

/// What one job may see and run, and how it is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program to execute (the first word of the command, found in the tool's folder, or
    /// in the `bin` of the job's Python environment, then in [`SANDBOX_PATH`]).
    pub program: PathBuf,
    /// The argument vector: the program, then the command's words, relative words that name
    /// files of the tool made absolute.
    pub argv: Vec<OsString>,
    /// Paths readable and executable.
    pub read_exec: Vec<PathBuf>,
    /// Paths readable only.
    pub read: Vec<PathBuf>,
    /// Paths readable and writable.
    pub read_write: Vec<PathBuf>,
    /// Paths that never show in the view (canonical, and as given where that differs).
    pub hidden: Vec<PathBuf>,
}

impl Plan {
    /// Every granted path, whatever its access.
    pub fn granted(&self) -> impl Iterator<Item = &PathBuf> {
        self.read_exec
            .iter()
            .chain(&self.read)
            .chain(&self.read_write)
    }
}

/// The plan of `job`, whose data folder is `data`, with `hidden` never shown. A command, a
/// `#!` interpreter or an `env` target outside the system folders, the package folder and
/// the declared readable paths, or inside a hidden path, is refused.
pub fn plan(job: &Job, data: &Path, hidden: &[PathBuf]) -> Result<Plan, SandboxError> {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p)
            .map_err(|e| SandboxError::Setup(format!("cannot find `{}`: {e}", p.display())))
    };
    let package = canonical(&job.package_dir)?;
    let command_dir = canonical(&job.command_dir)?;
    let venv = job.python_env.as_deref().map(canonical).transpose()?;
    let data = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_owned());
    let hidden = canonical_hidden(hidden);
    // The package folder is mounted back inside a hidden path that holds it (an installed
    // package in the state folder): never one among, or holding, the packages' data folders
    // (a link in a root leading there would show another package's data).
    // The same for the Python environment, which lies in the state folder too.
    if let Some(all_data) = data.parent() {
        for (what, dir) in std::iter::once(("package folder", &package))
            .chain(venv.iter().map(|v| ("Python environment", v)))
        {
            if dir.starts_with(all_data)
                || (all_data.starts_with(dir) && hidden.iter().any(|h| dir.starts_with(h)))
            {
                return Err(SandboxError::Setup(format!(
                    "the {what} `{}` lies among the packages' data folders, so the sandbox does not run it",
                    dir.display()
                )));
            }
        }
    }
    let mut holes = vec![data.clone(), package.clone()];
    holes.extend(venv.clone());
    let visible = Visible {
        hidden: &hidden,
        holes,
    };
    let read_declared = declared(&job.access.read, &visible, &job.package);
    let write_declared = declared(&job.access.write, &visible, &job.package);

    let (program, named) = resolve_command(job, &command_dir, venv.as_deref())?;
    // Where a file may be executed from: the system folders (as the host resolves them), the
    // package folder and the declared readable paths. Nothing else, whatever names it.
    let mut exec_roots: Vec<PathBuf> = SYSTEM_DIRS
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    exec_roots.push(package.clone());
    exec_roots.extend(venv.iter().cloned());
    exec_roots.extend(read_declared.iter().cloned());
    let mut read_exec = Vec::new();
    for (what, path) in named {
        let real = std::fs::canonicalize(&path).map_err(|e| {
            SandboxError::Setup(format!("{what} `{}` cannot be found: {e}", path.display()))
        })?;
        if !exec_roots.iter().any(|root| real.starts_with(root)) || !visible.shows(&real) {
            return Err(SandboxError::Setup(format!(
                "{what} `{}` is outside the system folders, the package and its declared paths (or hidden), so the sandbox does not grant it",
                path.display()
            )));
        }
        read_exec.push(real);
    }
    read_exec.extend(LOADERS.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
    read_exec.extend(venv.iter().cloned());

    let system = SYSTEM_DIRS.iter().map(PathBuf::from);
    let mut read: Vec<PathBuf> = SYSTEM_FILES.iter().map(PathBuf::from).collect();
    if job.access.shell {
        read_exec.extend(system);
        read_exec.push(package.clone());
    } else {
        read.extend(system);
        read.push(package.clone());
    }
    read.extend(read_declared);
    let mut read_write = vec![data.clone(), PathBuf::from("/dev/null")];
    read_write.extend(write_declared);

    // Hidden paths last, on every list.
    for list in [&mut read_exec, &mut read, &mut read_write] {
        list.retain(|p| visible.shows(p));
        list.dedup();
    }
    let argv = std::iter::once(program.clone().into_os_string())
        .chain(job.command[1..].iter().map(|word| {
            let candidate = command_dir.join(word);
            if !word.starts_with('-') && !Path::new(word).is_absolute() && candidate.exists() {
                candidate.into_os_string()
            } else {
                OsString::from(word)
            }
        }))
        .collect();
    Ok(Plan {
        program,
        argv,
        read_exec,
        read,
        read_write,
        hidden,
    })
}

/// The hidden paths and the tool's own folders that may show inside them.
struct Visible<'a> {
    hidden: &'a [PathBuf],
    /// The data folder, the package folder and the package's Python environment: mounted
    /// back inside a hidden path that holds them (the state folder holds every data folder
    /// and every environment).
    holes: Vec<PathBuf>,
}

impl Visible<'_> {
    /// Whether `path` may be granted: it lies inside no hidden path, or inside one of the
    /// tool's own folders that itself lies inside that hidden path.
    fn shows(&self, path: &Path) -> bool {
        self.hidden.iter().all(|h| {
            !path.starts_with(h)
                || self
                    .holes
                    .iter()
                    .any(|hole| path.starts_with(hole) && hole.starts_with(h) && hole != h)
        })
    }
}

/// Each hidden path canonical (a missing file: its folder canonical, then its name), and as
/// given too where that differs.
fn canonical_hidden(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in hidden {
        let real = std::fs::canonicalize(path).ok().or_else(|| {
            let parent = std::fs::canonicalize(path.parent()?).ok()?;
            Some(parent.join(path.file_name()?))
        });
        for p in real.into_iter().chain([path.clone()]) {
            if p.is_absolute() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Declared paths as granted: absolute, existing, canonical, and shown (a relative path, a
/// missing one or one inside a hidden path is dropped and logged).
fn declared(paths: &[PathBuf], visible: &Visible<'_>, package: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        let why = if !path.is_absolute() {
            "is not absolute"
        } else {
            match std::fs::canonicalize(path) {
                Err(_) => "does not exist",
                Ok(real) if !visible.shows(&real) => "is inside Quiver's state or config",
                Ok(real) => {
                    out.push(real);
                    continue;
                }
            }
        };
        tracing::warn!(package, path = %path.display(), "a declared path that {why} is not granted");
    }
    out
}

/// Finds `name` in the `bin` folder of the Python environment `venv`, then in
/// [`SANDBOX_PATH`] (the tool's `PATH`, in that order); a name with a `/` is never looked up.
fn which(name: &str, venv: Option<&Path>) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    venv.map(|v| v.join("bin"))
        .into_iter()
        .chain(SANDBOX_PATH.split(':').map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A file a job needs to execute, with what named it (`the command`, `the #! interpreter`).
type Named = (&'static str, PathBuf);

/// The program of `job`, and the files it needs to execute, each with what named it: the
/// program, its `#!` interpreter, and the command an `env` interpreter runs.
fn resolve_command(
    job: &Job,
    command_dir: &Path,
    venv: Option<&Path>,
) -> Result<(PathBuf, Vec<Named>), SandboxError> {
    let first = job
        .command
        .first()
        .ok_or_else(|| SandboxError::Setup("the tool's `run` command is empty".into()))?;
    let program = if first.contains('/') {
        let path = command_dir.join(first);
        path.is_file().then_some(path)
    } else {
        which(first, venv)
    }
    .ok_or_else(|| {
        SandboxError::Setup(format!(
            "`{first}` was not found (looked in the tool's folder and {SANDBOX_PATH})"
        ))
    })?;
    let mut named = vec![("the command", program.clone())];
    let mut head = Vec::new();
    if let Ok(file) = std::fs::File::open(&program) {
        let _ = file.take(512).read_to_end(&mut head);
    }
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        if let Some(interpreter) = words.next() {
            named.push(("the `#!` interpreter", PathBuf::from(interpreter)));
            if interpreter.ends_with("/env")
                && let Some(target) = env_command(words)
            {
                let path = if target.contains('/') {
                    Some(PathBuf::from(target))
                } else {
                    which(&target, venv)
                };
                if let Some(path) = path {
                    named.push(("the command `env` runs", path));
                }
            }
        }
    }
    Ok((program, named))
}

/// The command `env` runs, given the words after it (GNU `env`: `-S`/`--split-string` values
/// are split too; `-u`/`--unset` and `-C`/`--chdir` take a value; `NAME=value` sets a
/// variable). `None` when there is none. What it finds is only ever checked against the paths
/// granted anyway, so a word read wrongly can make a call fail, never widen a view.
fn env_command<'a>(words: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut todo: Vec<String> = words.map(str::to_owned).collect();
    todo.reverse();
    while let Some(word) = todo.pop() {
        let split = |value: &str, todo: &mut Vec<String>| {
            todo.extend(value.split_whitespace().rev().map(str::to_owned));
        };
        if let Some(value) = word.strip_prefix("--split-string=") {
            split(value, &mut todo);
        } else if let Some(value) = word.strip_prefix("-S") {
            split(value, &mut todo);
        } else if matches!(word.as_str(), "-u" | "--unset" | "-C" | "--chdir") {
            todo.pop();
        } else if word.starts_with('-') || word.contains('=') {
            // Another option, a joined value (`-uNAME`, `--unset=NAME`) or an assignment.
        } else {
            return Some(word);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_finds_the_command_it_runs() {
        let cases: &[(&str, Option<&str>)] = &[
            ("python3", Some("python3")),
            ("-S python3 -u", Some("python3")),
            ("--split-string=python3 -u", Some("python3")),
            ("-S -u /state.db /lib64/ld.so cat", Some("/lib64/ld.so")),
            ("--split-string=-u /x sh -c 'cat /x'", Some("sh")),
            ("-i A=1 --unset=B -C /tmp node", Some("node")),
            ("-uX -- perl", Some("perl")),
            ("-S", None),
            ("", None),
        ];
        for (words, want) in cases {
            assert_eq!(
                env_command(words.split_whitespace()).as_deref(),
                *want,
                "{words}"
            );
        }
    }

    #[test]
    fn a_python_environment_is_granted_and_searched_first_inside_the_hidden_state() {
        let Ok(system) = std::fs::canonicalize("/usr/bin/python3") else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(tmp.path()).unwrap();
        let state = top.join("state");
        let env = state.join("envs/ab12");
        let package = state.join("store/ab12/dated");
        let data = state.join("data/dated");
        for dir in [env.join("bin"), package.join("tools/show"), data.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink("/usr/bin/python3", env.join("bin/python3")).unwrap();
        std::fs::write(package.join("tools/show/main.py"), "print(1)\n").unwrap();
        let job = |python_env: Option<PathBuf>| Job {
            package: "dated".into(),
            package_dir: package.clone(),
            command: vec!["python3".into(), "main.py".into()],
            command_dir: package.join("tools/show"),
            access: Default::default(),
            settings: Default::default(),
            timeout: std::time::Duration::from_secs(1),
            limits: Default::default(),
            python_env,
        };
        let hidden = [state.clone()];

        let with = plan(&job(Some(env.clone())), &data, &hidden).unwrap();
        assert_eq!(with.program, env.join("bin/python3"));
        assert_eq!(with.argv[0], env.join("bin/python3").into_os_string());
        assert!(with.read_exec.contains(&env), "{:?}", with.read_exec);
        assert!(with.read_exec.contains(&system), "{:?}", with.read_exec);
        assert!(!with.granted().any(|p| p == &state.join("envs")));

        let plain = plan(&job(None), &data, &hidden).unwrap();
        assert_ne!(plain.program, env.join("bin/python3"));
        assert!(!plain.granted().any(|p| p.starts_with(&env)));

        // An environment among the data folders is refused, as a package folder there is.
        let among = state.join("data/other");
        std::fs::create_dir_all(&among).unwrap();
        let err = plan(&job(Some(among)), &data, &hidden).unwrap_err();
        assert!(err.to_string().contains("Python environment"), "{err}");
    }

    #[test]
    fn a_path_shows_outside_hidden_ones_or_in_the_tools_own_folders() {
        let hidden = [PathBuf::from("/state"), PathBuf::from("/tmp/db")];
        let visible = Visible {
            hidden: &hidden,
            holes: vec![
                PathBuf::from("/state/data/p"),
                PathBuf::from("/state/packages/p"),
                PathBuf::from("/state/envs/e1"),
            ],
        };
        let cases = [
            ("/usr", true),
            ("/", true),
            ("/tmp", true),
            ("/state", false),
            ("/state/state.db", false),
            ("/state/data/other", false),
            ("/state/data/p", true),
            ("/state/data/p/x", true),
            ("/state/packages/p/tools", true),
            ("/state/envs/e1/bin/python3", true),
            ("/state/envs/e2", false),
            ("/state/envs", false),
            ("/tmp/db", false),
            ("/tmp/db-wal", true),
        ];
        for (path, shows) in cases {
            assert_eq!(visible.shows(Path::new(path)), shows, "{path}");
        }
    }
}
