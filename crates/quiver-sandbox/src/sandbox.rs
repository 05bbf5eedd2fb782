//! The runtime's side: turns a [`Job`] (a package's command and its permissions) into a
//! policy file and a launcher process, and runs it with a timeout, an output limit and the
//! network proxy.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::SandboxError;
use crate::launcher::{ERROR_PREFIX, LIMIT, SETUP_FAILED, UNAVAILABLE};
use crate::policy::{LimitRequest, Limits, Network, Policy};
use crate::proxy::Proxy;

/// The `PATH` inside the sandbox; commands are looked up in it, never in the runtime's own.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What a tool may do beyond its package folder (read) and data folder (read-write).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Hosts reachable over HTTP(S) through the proxy (`*` for any).
    pub network: Vec<String>,
    /// Extra readable paths.
    pub read: Vec<PathBuf>,
    /// Extra writable paths.
    pub write: Vec<PathBuf>,
    /// Whether it may start other programs.
    pub shell: bool,
    /// Environment variables passed through from the runtime's environment.
    pub env: Vec<String>,
    /// Environment variables with fixed values (an operator's `env: {NAME: value}` for an MCP
    /// server in the config file); Quiver's own variables below win over them.
    pub env_values: BTreeMap<String, String>,
}

/// One thing to run in a package's sandbox.
#[derive(Debug, Clone)]
pub struct Job {
    /// The package id (names its data folder).
    pub package: String,
    /// The package folder.
    pub package_dir: PathBuf,
    /// The command as declared (`[python3, main.py]`).
    pub command: Vec<String>,
    /// The folder relative words of the command are resolved in (the tool's folder).
    pub command_dir: PathBuf,
    /// The permissions.
    pub access: Access,
    /// The package's settings, given to the tool as `QUIVER_SETTINGS` (JSON) and one
    /// `QUIVER_SETTING_<KEY>` variable each.
    pub settings: serde_json::Map<String, Value>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Resource limits it asks for instead of the defaults, granted within
    /// [`SandboxConfig::ceiling`].
    pub limits: LimitRequest,
    /// The package's Python environment (an installed package with a `requirements.txt`):
    /// granted read and execute, its `bin` first in `PATH` (so `python3` is its interpreter),
    /// `VIRTUAL_ENV` set. `None`: the system's Python.
    pub python_env: Option<PathBuf>,
}

/// How the sandbox is set up.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The program and leading arguments that start the launcher (`quiver-sandbox-exec`, or
    /// Quiver's own binary and `sandbox-exec`).
    pub launcher: Vec<OsString>,
    /// Quiver's state folder: data folders go to `data/<package>/`, temporary files to
    /// `tmp/<package>/`, proxy sockets and policies to `run/`.
    pub state_dir: PathBuf,
    /// Resource limits of a tool that asks for none (the CPU-seconds limit is raised to cover
    /// each call's timeout).
    pub limits: Limits,
    /// The most a tool may ask for ([`Job::limits`]); a value over it is granted as the
    /// ceiling, with a warning.
    pub ceiling: Limits,
    /// Paths no tool may see, even inside a folder it was granted (the config file); the
    /// state folder always is.
    pub hidden: Vec<PathBuf>,
    /// Bytes of stdout a call may write before it is stopped.
    pub stdout_limit: usize,
    /// Run package tools without isolation where this machine cannot isolate them (an
    /// operator's explicit choice).
    pub allow_unsandboxed: bool,
}

impl SandboxConfig {
    /// The defaults for `launcher` and `state_dir`: limits of [`Limits::default`], which are
    /// also the ceiling (a tool may only ask for lower ones), nothing hidden beyond the state
    /// folder, 1 MiB of stdout, no unsandboxed execution. Tools run as
    /// their package's own user ([`crate::identity::package_uid`]) when Quiver runs as root.
    pub fn new(launcher: Vec<OsString>, state_dir: PathBuf) -> Self {
        Self {
            launcher,
            state_dir,
            limits: Limits::default(),
            ceiling: Limits::default(),
            hidden: Vec::new(),
            stdout_limit: 1 << 20,
            allow_unsandboxed: false,
        }
    }
}

/// Whether this machine can enforce the sandbox; `Err` says why not.
pub fn support() -> Result<(), String> {
    if crate::sys::landlock_abi().is_none() {
        return Err("this kernel has no Landlock (or it is disabled), so Quiver cannot restrict what a package's tools read and write".into());
    }
    if !rustix::process::geteuid().is_root() {
        return Err(
            "Quiver's sandbox creates PID and network namespaces, which needs root here".into(),
        );
    }
    Ok(())
}

/// Runs jobs in sandboxes.
#[derive(Debug)]
pub struct Sandbox {
    config: SandboxConfig,
    run_dir: PathBuf,
    support: Result<(), String>,
}

/// What a finished process left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Its exit code (`128 + signal` when a signal ended it).
    pub code: i32,
    /// The end of what it wrote to stderr (the rest went to the log).
    pub stderr_tail: String,
    /// Whether it ran without the sandbox (the operator allowed it on a machine without one).
    pub unsandboxed: bool,
}

/// A started sandboxed process (a worker, or a call in progress).
pub struct Spawned {
    /// The launcher process (the tool's process group and session leader).
    pub child: Child,
    /// The tool's stdin.
    pub stdin: Option<ChildStdin>,
    /// The tool's stdout.
    pub stdout: Option<ChildStdout>,
    /// The end of the tool's stderr, filled by a thread that logs every line.
    pub stderr_tail: Arc<Mutex<String>>,
    /// The proxy, for a tool with network.
    pub proxy: Option<Proxy>,
    /// Whether it runs without the sandbox.
    pub unsandboxed: bool,
    stderr_done: Option<mpsc::Receiver<()>>,
}

/// Sends SIGKILL to the process group `pgid` (a sandboxed job's, as [`Sandbox::run_watched`]
/// tells it): the launcher and everything it started, and the launcher itself (which leads
/// its group only once it has called `setsid`). `false` if nothing could be signalled.
pub fn kill_process_group(pgid: u32) -> bool {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let group = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).is_ok();
    let leader = rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok();
    group || leader
}

impl Spawned {
    /// Kills the whole process group and reaps the launcher.
    pub fn kill(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.unsandboxed {
            crate::cgroup::remove_for(self.child.id());
        }
        // SIGKILL is delivered at once but a process takes a moment to exit: return only when
        // no process of the group runs any more (bounded, so a stuck kernel cannot hang the
        // call). The launcher's children are reaped by whoever adopts them, which may take a
        // second or more (a container's init): their zombies have ended and are not waited for.
        if let Some(pid) = pid {
            for _ in 0..400 {
                if rustix::process::test_kill_process_group(pid).is_err()
                    || !group_runs(pid.as_raw_nonzero().get())
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Waits (briefly) until stderr is drained, so the tail is complete.
    pub fn settle_stderr(&mut self) {
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(Duration::from_millis(500));
        }
    }

    /// The stderr tail so far.
    pub fn stderr(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// A setup failure of the launcher, read from its stderr, as an error.
    pub fn setup_error(&self, code: i32) -> Option<SandboxError> {
        if code != SETUP_FAILED || self.unsandboxed {
            return None;
        }
        let tail = self.stderr();
        let line = tail
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(ERROR_PREFIX))?;
        Some(if let Some(why) = line.strip_prefix(UNAVAILABLE) {
            SandboxError::Unavailable(unavailable_message(why))
        } else if let Some(limit) = line.strip_prefix(LIMIT) {
            SandboxError::Failed(limit.to_owned())
        } else {
            SandboxError::Setup(line.to_owned())
        })
    }

    /// The first network denial recorded by the proxy, if any.
    pub fn denial(&self) -> Option<String> {
        self.proxy
            .as_ref()
            .and_then(|p| p.take_denials().into_iter().next())
    }
}

/// Whether a process of the process group `pgid` still runs (is neither a zombie nor
/// gone), from `/proc`; `true` when `/proc` cannot be read.
fn group_runs(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| running_in_group(&stat, pgid))
                .unwrap_or(false)
    })
}

/// From a `/proc/<pid>/stat` line: whether the process is in group `pgid` and not a zombie.
fn running_in_group(stat: &str, pgid: i32) -> Option<bool> {
    // `pid (comm) state ppid pgrp ...`; `comm` may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let group: i32 = fields.nth(1)?.parse().ok()?;
    Some(group == pgid && !matches!(state, "Z" | "X" | "x"))
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

fn unavailable_message(why: &str) -> String {
    format!(
        "package tools cannot run: {why}. Quiver refuses to run package code without its sandbox; an operator who accepts the risk can set `allow_unsandboxed: true` in the config file's `runtime:` section (or QUIVER_ALLOW_UNSANDBOXED=1)"
    )
}

impl Sandbox {
    /// A sandbox with `config`; checks once whether the machine can enforce it.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run_dir = config.state_dir.join("run").join(format!(
            "sandbox-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        remove_leftovers(&config.state_dir.join("run"));
        create_private_dir(&run_dir)?;
        let support = support();
        if support.is_ok() {
            for limit in crate::cgroup::prepare() {
                tracing::warn!(
                    "this machine has no cgroup controller for {limit}; package tools run without it"
                );
            }
        }
        Ok(Sandbox {
            config,
            run_dir,
            support,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Whether jobs run isolated: `Ok(true)` sandboxed, `Ok(false)` unsandboxed by the
    /// operator's choice, `Err` when they cannot run at all.
    pub fn isolation(&self) -> Result<bool, SandboxError> {
        match (&self.support, self.config.allow_unsandboxed) {
            (Ok(()), _) => Ok(true),
            (Err(_), true) => Ok(false),
            (Err(why), false) => Err(SandboxError::Unavailable(unavailable_message(why))),
        }
    }

    /// The data folder's name (and the uid's key) of the package `id` at `package_dir`
    /// (canonical): `<id>` for the folder that owns the id, one of its own for any other (see
    /// [`crate::ownership`]).
    fn data_key(&self, id: &str, package_dir: &Path) -> Result<String, SandboxError> {
        crate::ownership::claim(&self.config.state_dir, id, package_dir).map_err(|e| {
            SandboxError::Setup(format!("recording the owner of package id `{id}`: {e}"))
        })
    }

    /// Starts `job` with piped stdio.
    pub fn spawn(&self, job: &Job) -> Result<Spawned, SandboxError> {
        // One span per sandbox start (inside the call's span when a call starts it).
        let span = tracing::info_span!("sandbox_start", package = %job.package);
        let _entered = span.enter();
        if job.package.is_empty()
            || job.package.contains(['/', '\\'])
            || job.package.starts_with('.')
        {
            return Err(SandboxError::Setup(format!(
                "`{}` is not a package id",
                job.package
            )));
        }
        let sandboxed = self.isolation()?;
        let absolute = |p: &Path| {
            std::fs::canonicalize(p)
                .map_err(|e| SandboxError::Setup(format!("cannot find `{}`: {e}", p.display())))
        };
        let job = &Job {
            package_dir: absolute(&job.package_dir)?,
            command_dir: absolute(&job.command_dir)?,
            python_env: job.python_env.as_deref().map(absolute).transpose()?,
            ..job.clone()
        };
        // Data, the uid and an unsandboxed tool's temporary folder belong to the package's
        // identity (its folder), not to the id alone.
        let key = self.data_key(&job.package, &job.package_dir)?;
        let data = self.config.state_dir.join("data").join(&key);
        create_private_dir(&data)?;
        let tmp = if sandboxed {
            PathBuf::from("/tmp")
        } else {
            let tmp = self.config.state_dir.join("tmp").join(&key);
            create_private_dir(&tmp)?;
            tmp
        };
        let plan = self.plan(job, &data)?;
        let (program, argv) = (plan.program.clone(), plan.argv.clone());
        let env = environment(job, &data, &tmp);
        let mut command;
        let mut proxy = None;
        let mut policy_frame = None;
        if sandboxed {
            let network = if job.access.network.is_empty() {
                Network::None
            } else {
                let p = Proxy::start(&self.run_dir, job.access.network.clone())
                    .map_err(|e| SandboxError::Setup(format!("starting the network proxy: {e}")))?;
                let socket = p.socket().to_owned();
                proxy = Some(p);
                Network::Proxy { socket }
            };
            let limits = self.limits(job);
            let uid = crate::identity::package_uid(&key);
            let run_as = rustix::process::geteuid().is_root().then_some((uid, uid));
            if run_as.is_some() {
                crate::identity::own(&data, uid).map_err(|e| {
                    SandboxError::Setup(format!(
                        "giving `{}` to the package's user: {e}",
                        data.display()
                    ))
                })?;
            }
            let policy = Policy {
                env,
                cwd: data.clone(),
                read_exec: plan.read_exec,
                read: plan.read,
                read_write: plan.read_write,
                hidden: plan.hidden,
                data_dir: data.clone(),
                network,
                limits,
                run_as,
            };
            let (launcher, leading) = self
                .config
                .launcher
                .split_first()
                .ok_or_else(|| SandboxError::Setup("no launcher configured".into()))?;
            command = Command::new(launcher);
            command
                .args(leading)
                .arg("--policy-stdin")
                .arg("--")
                .arg(&program)
                .args(&argv[1..]);
            policy_frame = Some(policy.frame());
        } else {
            tracing::warn!(package = %job.package, "running a package tool WITHOUT the sandbox (the operator allowed unsandboxed execution)");
            command = Command::new(&program);
            command
                .args(&argv[1..])
                .env_clear()
                .envs(&env)
                .current_dir(&data);
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| {
            SandboxError::Setup(format!("cannot start `{}`: {e}", program.display()))
        })?;
        // The policy (secret settings included) goes through the pipe, never to a file; a
        // launcher that failed before reading it reports why on stderr.
        if let (Some(frame), Some(stdin)) = (policy_frame, child.stdin.as_mut()) {
            let _ = stdin.write_all(&frame);
        }
        tracing::debug!(
            pid = child.id(),
            sandboxed,
            program = %program.display(),
            "tool process started"
        );
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let stderr_done = child
            .stderr
            .take()
            .map(|stderr| log_stderr(stderr, job.package.clone(), stderr_tail.clone()));
        Ok(Spawned {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            stderr_tail,
            proxy,
            unsandboxed: !sandboxed,
            stderr_done,
        })
    }

    /// Runs `job` once with `input` on stdin: waits at most its timeout, reads at most the
    /// stdout limit, and leaves no process behind.
    pub fn run(&self, job: &Job, input: &[u8]) -> Result<Output, SandboxError> {
        self.run_watched(job, input, &|_| {})
    }

    /// [`Sandbox::run`], telling `started` the id of the process group that runs the job (the
    /// launcher's pid) as soon as it is started, so that someone else can stop it
    /// ([`kill_process_group`]).
    pub fn run_watched(
        &self,
        job: &Job,
        input: &[u8],
        started: &dyn Fn(u32),
    ) -> Result<Output, SandboxError> {
        let mut spawned = self.spawn(job)?;
        started(spawned.child.id());
        let writer = spawned.stdin.take().map(|mut stdin| {
            let input = input.to_vec();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        });
        let (tx, rx) = mpsc::channel();
        let limit = self.config.stdout_limit;
        if let Some(mut stdout) = spawned.stdout.take() {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let read = (&mut stdout).take(limit as u64 + 1).read_to_end(&mut buf);
                let _ = tx.send((buf, read.is_ok()));
            });
        }
        let outcome = rx.recv_timeout(job.timeout);
        let (stdout, _) = match outcome {
            Ok(pair) => pair,
            Err(_) => {
                spawned.kill();
                return Err(SandboxError::TimedOut(job.timeout));
            }
        };
        if stdout.len() > limit {
            spawned.kill();
            return Err(SandboxError::OutputTooLarge(limit));
        }
        let status = spawned
            .child
            .wait()
            .map_err(|e| SandboxError::Setup(format!("waiting for the tool: {e}")))?;
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        spawned.settle_stderr();
        let code = status.code().unwrap_or_else(|| {
            128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
        });
        if let Some(err) = spawned.setup_error(code) {
            return Err(err);
        }
        if let Some(denial) = spawned.denial() {
            return Err(SandboxError::Denied(denial));
        }
        Ok(Output {
            stdout,
            code,
            stderr_tail: spawned.stderr(),
            unsandboxed: spawned.unsandboxed,
        })
    }
}

impl Sandbox {
    /// The limits `job` runs with: the defaults, with what it asks for within the ceiling
    /// (each value over it logged); CPU seconds cover the timeout unless it asks for fewer.
    pub fn limits(&self, job: &Job) -> Limits {
        let covering = job.timeout.as_secs() + 1;
        let mut defaults = self.config.limits;
        defaults.cpu_seconds = defaults.cpu_seconds.max(covering);
        let mut ceiling = self.config.ceiling;
        ceiling.cpu_seconds = ceiling.cpu_seconds.max(covering);
        let (limits, warnings) = defaults.grant(&job.limits, &ceiling);
        for warning in warnings {
            tracing::warn!(package = %job.package, "{warning}");
        }
        limits
    }

    /// What `job` (canonical folders) may see and run, with its data folder `data`: see
    /// [`crate::grants::plan`]; hidden are the state folder and [`SandboxConfig::hidden`].
    fn plan(&self, job: &Job, data: &Path) -> Result<crate::grants::Plan, SandboxError> {
        let hidden: Vec<PathBuf> = std::iter::once(&self.config.state_dir)
            .chain(&self.config.hidden)
            .cloned()
            .collect();
        crate::grants::plan(job, data, &hidden)
    }
}

/// Removes what runtimes that died left in `run/` (a `sandbox-<pid>-<n>` folder whose process
/// is gone: proxy sockets, and policy files of older versions).
fn remove_leftovers(run: &Path) {
    let Ok(entries) = std::fs::read_dir(run) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("sandbox-"))
            .and_then(|n| n.split('-').next())
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != std::process::id()
            && !Path::new("/proc").join(pid.to_string()).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

fn create_private_dir(dir: &Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| SandboxError::Setup(format!("creating `{}`: {e}", dir.display())))
}

/// Drains the tool's stderr on a thread of its own with fixed bounds
/// ([`crate::output::drain_stderr`]); the receiver hears when stderr closed.
fn log_stderr(
    stderr: ChildStderr,
    package: String,
    tail: Arc<Mutex<String>>,
) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        crate::output::drain_stderr(stderr, &package, &tail);
        let _ = tx.send(());
    });
    rx
}

/// The tool's whole environment. A declared variable that is unset or empty in the runtime's
/// environment is left out: an empty value counts as unset (as the XDG rule and the official
/// SDKs read one), so a client that passes `OPENAI_BASE_URL=` never hands the tool a value
/// its libraries would take for a setting.
fn environment(job: &Job, data: &Path, tmp: &Path) -> BTreeMap<String, String> {
    environment_from(job, data, tmp, &|name| std::env::var(name).ok())
}

/// [`environment`] with the runtime's environment read through `lookup`.
fn environment_from(
    job: &Job,
    data: &Path,
    tmp: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let mut env = job.access.env_values.clone();
    for name in &job.access.env {
        if let Some(value) = lookup(name).filter(|v| !v.is_empty()) {
            env.insert(name.clone(), value);
        }
    }
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let search = match &job.python_env {
        Some(venv) => format!("{}:{SANDBOX_PATH}", path(&venv.join("bin"))),
        None => SANDBOX_PATH.to_owned(),
    };
    if let Some(venv) = &job.python_env {
        env.insert("VIRTUAL_ENV".to_owned(), path(venv));
    }
    for (key, value) in [
        ("PATH", search),
        ("LANG", "C.UTF-8".to_owned()),
        ("LC_ALL", "C.UTF-8".to_owned()),
        ("PYTHONDONTWRITEBYTECODE", "1".to_owned()),
        ("PYTHONIOENCODING", "utf-8".to_owned()),
        ("HOME", path(data)),
        ("TMPDIR", path(tmp)),
        ("QUIVER_DATA_DIR", path(data)),
        ("QUIVER_PACKAGE_DIR", path(&job.package_dir)),
        (
            "QUIVER_SETTINGS",
            Value::Object(job.settings.clone()).to_string(),
        ),
    ] {
        env.insert(key.to_owned(), value);
    }
    for (key, value) in &job.settings {
        let name: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        env.insert(format!("QUIVER_SETTING_{name}"), text);
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `/proc` shows `pid` gone or a zombie.
    fn ended(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    }

    #[test]
    fn killing_a_process_group_stops_the_leader_and_what_it_started() {
        use std::os::unix::process::CommandExt;
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let child: u32 = line.trim().parse().unwrap();
        assert!(kill_process_group(leader.id()));
        let status = leader.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        let started = std::time::Instant::now();
        while !ended(child) && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ended(child), "the leader's child still runs");
    }

    #[test]
    fn a_group_runs_while_one_of_its_processes_is_not_a_zombie() {
        let cases = [
            ("12 (sh) S 1 40 40 0", 40, Some(true)),
            ("12 (a) b) (c) R 1 40 40 0", 40, Some(true)),
            ("12 (sh) Z 1 40 40 0", 40, Some(false)),
            ("12 (sh) S 1 41 41 0", 40, Some(false)),
            ("garbage", 40, None),
        ];
        for (stat, pgid, want) in cases {
            assert_eq!(running_in_group(stat, pgid), want, "{stat}");
        }
        assert!(group_runs(
            rustix::process::getpgrp().as_raw_nonzero().get()
        ));
    }

    fn job(dir: &Path, command: &[&str]) -> Job {
        Job {
            package: "demo".into(),
            package_dir: dir.to_owned(),
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            command_dir: dir.to_owned(),
            access: Access::default(),
            settings: serde_json::Map::new(),
            timeout: Duration::from_secs(5),
            limits: LimitRequest::default(),
            python_env: None,
        }
    }

    #[test]
    fn resolves_commands_in_the_sandbox_path_and_the_tool_folder() {
        let dir = tempfile::tempdir().unwrap();
        let dir = &std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(dir.join("main.py"), "print(1)\n").unwrap();
        std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        // The tool's data folder, under the packages' data folders (never the package's own).
        let state = tempfile::tempdir().unwrap();
        let data = state.path().join("data").join("demo");
        std::fs::create_dir_all(&data).unwrap();
        let plan = |command: &[&str]| crate::grants::plan(&job(dir, command), &data, &[]);
        let python = plan(&["python3", "main.py", "-v"]).unwrap();
        assert!(
            python.program.starts_with("/usr") || python.program.starts_with("/bin"),
            "{:?}",
            python.program
        );
        assert_eq!(python.argv[1], dir.join("main.py").into_os_string());
        assert_eq!(python.argv[2], OsString::from("-v"));
        assert!(
            python
                .read_exec
                .iter()
                .any(|p| p.to_string_lossy().contains("python3"))
        );
        let script = plan(&["./run.sh"]).unwrap();
        assert_eq!(script.program, dir.join("./run.sh"));
        assert!(
            script
                .read_exec
                .contains(&std::fs::canonicalize("/bin/sh").unwrap())
        );
        let missing = plan(&["no-such-program-here"]);
        assert!(matches!(missing, Err(SandboxError::Setup(m)) if m.contains("was not found")));
    }

    #[test]
    fn environment_holds_only_what_is_declared() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = job(dir.path(), &["python3"]);
        j.settings
            .insert("api-key".into(), Value::String("k".into()));
        j.settings.insert("limit".into(), serde_json::json!(3));
        let env = environment(&j, Path::new("/d"), Path::new("/t"));
        assert_eq!(env["QUIVER_SETTING_API_KEY"], "k");
        assert_eq!(env["QUIVER_SETTING_LIMIT"], "3");
        assert_eq!(env["QUIVER_DATA_DIR"], "/d");
        assert!(
            !env.contains_key("CARGO"),
            "nothing undeclared is inherited"
        );
    }

    #[test]
    fn a_python_environment_comes_first_in_path_and_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = job(dir.path(), &["python3"]);
        let none = |_: &str| None;
        let plain = environment_from(&j, Path::new("/d"), Path::new("/t"), &none);
        assert_eq!(plain["PATH"], SANDBOX_PATH);
        assert!(!plain.contains_key("VIRTUAL_ENV"));
        j.python_env = Some(PathBuf::from("/state/envs/ab12"));
        // A package cannot set the variable itself: Quiver's value wins over a fixed one.
        j.access
            .env_values
            .insert("VIRTUAL_ENV".into(), "/elsewhere".into());
        let env = environment_from(&j, Path::new("/d"), Path::new("/t"), &none);
        assert_eq!(env["PATH"], format!("/state/envs/ab12/bin:{SANDBOX_PATH}"));
        assert_eq!(env["VIRTUAL_ENV"], "/state/envs/ab12");
    }

    #[test]
    fn a_declared_variable_empty_in_the_runtime_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = job(dir.path(), &["python3"]);
        j.access.env = vec!["SET".into(), "EMPTY".into(), "UNSET".into(), "SPACE".into()];
        let lookup = |name: &str| match name {
            "SET" => Some("v".to_owned()),
            "EMPTY" => Some(String::new()),
            "SPACE" => Some(" ".to_owned()),
            _ => None,
        };
        let env = environment_from(&j, Path::new("/d"), Path::new("/t"), &lookup);
        let cases = [
            ("SET", Some("v")),
            ("EMPTY", None),
            ("UNSET", None),
            ("SPACE", Some(" ")),
        ];
        for (name, want) in cases {
            assert_eq!(env.get(name).map(String::as_str), want, "{name}");
        }
    }
}
