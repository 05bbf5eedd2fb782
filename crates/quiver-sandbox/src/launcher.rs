//! The launcher: `quiver sandbox-exec --policy FILE -- CMD...`.
//!
//! It runs in a fresh, single-threaded process (the runtime re-executes itself), so nothing is
//! built inside `pre_exec` of the multi-threaded runtime. In order, it:
//!
//! 1. starts a new session and process group;
//! 2. enters new PID, network and IPC namespaces (when the tool's first process ends, the
//!    kernel kills every process left in its PID namespace, daemons included);
//! 3. for a tool with network, brings up loopback in the new namespace and relays
//!    `127.0.0.1:<port>` to the runtime's proxy socket;
//! 4. builds the Landlock ruleset and the seccomp filters;
//! 5. forks the tool's first process, which sets rlimits, changes to the tool's user, sets
//!    `no_new_privs`, restricts itself with Landlock and seccomp, and `execve`s the tool with
//!    exactly the policy's environment;
//! 6. waits for it and exits with its status; if the runtime that started the launcher dies
//!    first, kills it (and so its whole namespace).
//!
//! A setup failure exits with [`SETUP_FAILED`] and one line on stderr starting with
//! [`ERROR_PREFIX`]; a machine that cannot enforce the sandbox says `unavailable:` after it.

use std::ffi::OsString;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::process::{Pid, PidfdFlags, Resource, Rlimit, getppid, pidfd_open};
use seccompiler::BpfProgram;

use crate::policy::{Network, Policy};
use crate::seccomp;

/// The exit code of a launcher whose setup failed (the tool never started).
pub const SETUP_FAILED: i32 = 125;
/// The prefix of the launcher's own error line on stderr.
pub const ERROR_PREFIX: &str = "quiver-sandbox: ";
/// What follows [`ERROR_PREFIX`] when the machine cannot enforce the sandbox.
pub const UNAVAILABLE: &str = "unavailable: ";

/// The Landlock ABI whose rights the sandbox asks for (7 on the development machine; its
/// access rights are those of 6).
const LANDLOCK_ABI: ABI = ABI::V7;

/// Why the launcher could not start the tool.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Bad arguments or policy file.
    #[error("{0}")]
    Usage(String),
    /// The kernel lacks a feature the sandbox needs.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A system call failed while setting up.
    #[error("{what}: {source}")]
    System {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn sys(what: &'static str) -> impl FnOnce(io::Error) -> LaunchError {
    move |source| LaunchError::System { what, source }
}

/// The launcher's `main`: `args` are the arguments after `sandbox-exec`. Returns the exit code:
/// the tool's, `128 + signal` when a signal ended it, or [`SETUP_FAILED`].
pub fn main(args: &[OsString]) -> i32 {
    match launch(args) {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(io::stderr(), "{ERROR_PREFIX}{err}");
            SETUP_FAILED
        }
    }
}

fn parse(args: &[OsString]) -> Result<(PathBuf, Vec<OsString>), LaunchError> {
    let usage = || LaunchError::Usage("usage: quiver sandbox-exec --policy FILE -- CMD...".into());
    let mut iter = args.iter();
    let mut policy = None;
    while let Some(arg) = iter.next() {
        if arg == "--policy" {
            policy = iter.next().map(PathBuf::from);
        } else if arg == "--" {
            break;
        } else {
            return Err(usage());
        }
    }
    let command: Vec<OsString> = iter.cloned().collect();
    match policy {
        Some(policy) if !command.is_empty() => Ok((policy, command)),
        _ => Err(usage()),
    }
}

fn launch(args: &[OsString]) -> Result<i32, LaunchError> {
    // Watched from the start, before the runtime can die unseen.
    let runtime = watch_parent();
    let (policy_path, command) = parse(args)?;
    let text = std::fs::read_to_string(&policy_path).map_err(sys("reading the policy file"))?;
    let mut policy: Policy = serde_json::from_str(&text)
        .map_err(|e| LaunchError::Usage(format!("the policy file is not valid: {e}")))?;

    rustix::process::setsid().map_err(|e| sys("setsid")(e.into()))?;
    unshare_namespaces(libc::CLONE_NEWNET | libc::CLONE_NEWIPC)?;
    let relay_port = match &policy.network {
        Network::None => None,
        Network::Proxy { socket } => {
            loopback_up().map_err(sys("bringing up loopback in the network namespace"))?;
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(sys("listening for the proxy relay"))?;
            let port = listener.local_addr().map_err(sys("proxy relay"))?.port();
            let url = format!("http://127.0.0.1:{port}");
            for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                policy.env.insert(key.into(), url.clone());
            }
            policy.env.insert("NO_PROXY".into(), String::new());
            policy.env.insert("no_proxy".into(), String::new());
            // The relay is its own process: after `unshare(CLONE_NEWPID)` the launcher can
            // start no thread, and the tool must not share a process with threads.
            let relay_pid = fork().map_err(sys("fork"))?;
            if relay_pid == 0 {
                run_relay(listener, socket);
            }
            Some((port, relay_pid))
        }
    };
    // Only children forked from here on enter the new PID namespace.
    unshare_namespaces(libc::CLONE_NEWPID)?;
    let ruleset = landlock_ruleset(&policy, relay_port.map(|(port, _)| port))?;
    let filters = seccomp::filters(policy.network == Network::None)
        .map_err(|e| LaunchError::Usage(format!("building the seccomp filter: {e}")))?;

    // The tool's first process: PID 1 of the new PID namespace.
    let child = fork().map_err(sys("fork"))?;
    if child == 0 {
        let err = confine_and_exec(&policy, ruleset, &filters, &command);
        let _ = writeln!(io::stderr(), "{ERROR_PREFIX}{err}");
        exit_now(SETUP_FAILED);
    }
    drop(ruleset);
    let code = wait(child, runtime.as_ref());
    if let Some((_, relay_pid)) = relay_port {
        crate::sys::kill_and_reap(relay_pid);
    }
    code
}

/// The relay process: dies with the launcher, holds none of the tool's stdio, and relays
/// connections until killed.
fn run_relay(listener: TcpListener, socket: &Path) -> ! {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
    }
    relay(listener, socket);
    exit_now(0)
}

fn unshare_namespaces(flags: libc::c_int) -> Result<(), LaunchError> {
    if crate::sys::unshare(flags).is_err() {
        let source = io::Error::last_os_error();
        return Err(LaunchError::Unavailable(format!(
            "cannot create PID and network namespaces ({source}); Quiver needs to run as root or with unprivileged user namespaces"
        )));
    }
    Ok(())
}

fn loopback_up() -> io::Result<()> {
    crate::sys::loopback_up()
}

fn fork() -> io::Result<i32> {
    crate::sys::fork()
}

fn exit_now(code: i32) -> ! {
    crate::sys::exit_now(code)
}

/// A pidfd of the process that started the launcher (Quiver's runtime), or `None` on a
/// kernel without pidfds (before Linux 5.3), where the tool is only waited for.
fn watch_parent() -> Option<OwnedFd> {
    pidfd_open(getppid()?, PidfdFlags::empty()).ok()
}

/// Waits for the tool and returns its status. When `runtime` ends first (killed, crashed), the
/// tool is killed: it is PID 1 of its namespace, so every process it started goes with it, and
/// no tool or server outlives the Quiver that ran it.
fn wait(child: i32, runtime: Option<&OwnedFd>) -> Result<i32, LaunchError> {
    let tool = Pid::from_raw(child).and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    if let (Some(runtime), Some(tool)) = (runtime, tool) {
        loop {
            let mut fds = [
                PollFd::new(runtime, PollFlags::IN),
                PollFd::new(&tool, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) if !fds[1].revents().is_empty() => break,
                Ok(_) if !fds[0].revents().is_empty() => {
                    crate::sys::kill_and_reap(child);
                    return Ok(128 + libc::SIGKILL);
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
    }
    crate::sys::wait_for(child).map_err(sys("waiting for the tool"))
}

fn landlock_ruleset(policy: &Policy, port: Option<u16>) -> Result<RulesetCreated, LaunchError> {
    let abi = LANDLOCK_ABI;
    let err = |e: landlock::RulesetError| LaunchError::Usage(format!("landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?;
    ruleset = ruleset
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(err)?;
    let mut created = ruleset.create().map_err(err)?;
    created = created
        .add_rules(path_beneath_rules(
            &policy.read_exec,
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            &policy.read,
            AccessFs::ReadFile | AccessFs::ReadDir,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            &policy.read_write,
            AccessFs::from_all(abi) & !AccessFs::Execute,
        ))
        .map_err(err)?;
    if let Some(port) = port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(err)?;
    }
    Ok(created)
}

/// In the forked child: limits, identity, `no_new_privs`, Landlock, seccomp, then `execve`.
/// Returns only on failure.
fn confine_and_exec(
    policy: &Policy,
    ruleset: RulesetCreated,
    filters: &[BpfProgram],
    command: &[OsString],
) -> LaunchError {
    match confine(policy, ruleset, filters) {
        Ok(()) => {}
        Err(e) => return e,
    }
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).env_clear().envs(&policy.env);
    let err = cmd.exec();
    LaunchError::Usage(format!(
        "cannot start `{}`: {err}",
        Path::new(&command[0]).display()
    ))
}

fn confine(
    policy: &Policy,
    ruleset: RulesetCreated,
    filters: &[BpfProgram],
) -> Result<(), LaunchError> {
    let limits = policy.limits;
    for (resource, value) in [
        (Resource::As, limits.address_space),
        (Resource::Nproc, limits.processes),
        (Resource::Fsize, limits.file_size),
        (Resource::Nofile, limits.open_files),
        (Resource::Cpu, limits.cpu_seconds),
        (Resource::Core, 0),
    ] {
        rustix::process::setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
        .map_err(|e| sys("setrlimit")(e.into()))?;
    }
    std::env::set_current_dir(&policy.cwd).map_err(sys("entering the data folder"))?;
    if let Some((uid, gid)) = policy.run_as
        && rustix::process::geteuid().is_root()
    {
        crate::sys::become_user(uid, gid).map_err(sys("changing to the tool's user"))?;
    }
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| sys("setting the parent-death signal")(e.into()))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| sys("no_new_privs")(e.into()))?;
    let status = ruleset
        .restrict_self()
        .map_err(|e| LaunchError::Usage(format!("landlock: {e}")))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(LaunchError::Unavailable(
            "this kernel does not enforce Landlock, so file access cannot be restricted".into(),
        ));
    }
    for filter in filters {
        seccompiler::apply_filter(filter)
            .map_err(|e| LaunchError::Usage(format!("seccomp: {e}")))?;
    }
    Ok(())
}

/// Relays each connection to `127.0.0.1:<port>` inside the namespace to the proxy socket.
fn relay(listener: TcpListener, socket: &Path) {
    for stream in listener.incoming() {
        let Ok(inside) = stream else { continue };
        let Ok(outside) = UnixStream::connect(socket) else {
            continue;
        };
        std::thread::spawn(move || pipe_both(inside, outside));
    }
}

fn pipe_both(inside: TcpStream, outside: UnixStream) {
    let (Ok(mut inside_read), Ok(mut outside_write)) = (inside.try_clone(), outside.try_clone())
    else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        let _ = io::copy(&mut inside_read, &mut outside_write);
        let _ = outside_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut outside_read, mut inside_write) = (outside, inside);
    let _ = io::copy(&mut outside_read, &mut inside_write);
    let _ = inside_write.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_arguments() {
        let args = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
        let cases: [(&[&str], bool); 5] = [
            (&["--policy", "p.json", "--", "python3", "main.py"], true),
            (&["--policy", "p.json", "--"], false),
            (&["--", "python3"], false),
            (&["--policy"], false),
            (&["--bogus", "--", "x"], false),
        ];
        for (input, ok) in cases {
            assert_eq!(parse(&args(input)).is_ok(), ok, "{input:?}");
        }
        let (policy, command) = parse(&args(&["--policy", "p.json", "--", "a", "b"])).unwrap();
        assert_eq!(policy, PathBuf::from("p.json"));
        assert_eq!(command, args(&["a", "b"]));
    }
}
