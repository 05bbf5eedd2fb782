//! The launcher: `quiver sandbox-exec --policy-stdin -- CMD...`.
//!
//! It runs in a fresh, single-threaded process (the runtime re-executes itself), so nothing is
//! built inside `pre_exec` of the multi-threaded runtime. In order, it:
//!
//! 1. reads its [`Policy`] from the first frame of stdin (never a file: it holds the
//!    package's secret settings); the rest of stdin is the tool's;
//! 2. starts a new session and process group;
//! 3. enters new PID, network and IPC namespaces (when the tool's first process ends, the
//!    kernel kills every process left in its PID namespace, daemons included);
//! 4. for a tool with network, brings up loopback in the new namespace and relays
//!    `127.0.0.1:<port>` to the runtime's proxy socket;
//! 5. builds the seccomp filters and the call's cgroups (memory, processes, CPU), and refuses
//!    a call whose data folder is already over its disk budget;
//! 6. forks the tool's first process, which moves itself into the cgroups (see
//!    `Cgroup::join`: no global lock, no RCU grace period on v1), enters a mount namespace
//!    whose root holds only what the policy grants (the `view` module), builds the Landlock
//!    ruleset, sets rlimits, drops every capability and becomes its package's own user, sets
//!    `no_new_privs`, restricts itself with Landlock and seccomp, closes every descriptor
//!    above 2, and `execve`s the tool with exactly the policy's environment;
//! 7. waits for it (stopping it when its data folder goes over the budget) and exits with its
//!    status; if the runtime that started the launcher dies first, kills it (and so its whole
//!    namespace).
//!
//! A setup failure exits with [`SETUP_FAILED`] and one line on stderr starting with
//! [`ERROR_PREFIX`]; a machine that cannot enforce the sandbox says [`UNAVAILABLE`] after it,
//! a call stopped by a limit [`LIMIT`].

use std::ffi::OsString;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
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

use crate::cgroup::Cgroup;
use crate::policy::{Network, Policy};
use crate::seccomp;

/// The exit code of a launcher whose setup failed (the tool never started).
pub const SETUP_FAILED: i32 = 125;
/// The prefix of the launcher's own error line on stderr.
pub const ERROR_PREFIX: &str = "quiver-sandbox: ";
/// What follows [`ERROR_PREFIX`] when the machine cannot enforce the sandbox.
pub const UNAVAILABLE: &str = "unavailable: ";
/// What follows [`ERROR_PREFIX`] when a limit of the call stopped (or refused) it.
pub const LIMIT: &str = "limit: ";

/// The one argument that makes the launcher print its [`crate::BUILD`] and exit, so the
/// runtime can check that a launcher binary beside it was built with it.
pub const BUILD_ID_FLAG: &str = "--build-id";

/// How often the data folder's disk use is measured while the tool runs.
const DISK_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

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
    /// A limit of the call refused or stopped it.
    #[error("limit: {0}")]
    Limit(String),
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
    if args.len() == 1 && args[0] == BUILD_ID_FLAG {
        let _ = writeln!(io::stdout(), "{}", crate::BUILD);
        return 0;
    }
    match launch(args) {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(io::stderr(), "{ERROR_PREFIX}{err}");
            SETUP_FAILED
        }
    }
}

fn parse(args: &[OsString]) -> Result<Vec<OsString>, LaunchError> {
    let usage = || LaunchError::Usage("usage: quiver sandbox-exec --policy-stdin -- CMD...".into());
    match args {
        [flag, dash, command @ ..]
            if flag == "--policy-stdin" && dash == "--" && !command.is_empty() =>
        {
            Ok(command.to_vec())
        }
        _ => Err(usage()),
    }
}

/// Reads the policy frame from stdin without reading past it (unbuffered, on a duplicate of
/// the descriptor): what follows is the tool's input.
fn read_policy() -> Result<Policy, LaunchError> {
    let fd = io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(sys("reading the policy"))?;
    Policy::read_frame(&mut std::fs::File::from(fd))
        .map_err(|e| LaunchError::Usage(format!("the policy is not valid: {e}")))
}

fn launch(args: &[OsString]) -> Result<i32, LaunchError> {
    // Watched from the start, before the runtime can die unseen.
    let runtime = watch_parent();
    let command = parse(args)?;
    let mut policy = read_policy()?;

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
    let filters = seccomp::filters(policy.network == Network::None)
        .map_err(|e| LaunchError::Usage(format!("building the seccomp filter: {e}")))?;
    let result = run_confined(
        &policy,
        relay_port.map(|(port, _)| port),
        &filters,
        &command,
        runtime.as_ref(),
    );
    if let Some((_, relay_pid)) = relay_port {
        crate::sys::kill_and_reap(relay_pid);
    }
    result
}

/// Forks the tool's first process (PID 1 of the new PID namespace) in the call's cgroups and
/// waits for it.
fn run_confined(
    policy: &Policy,
    port: Option<u16>,
    filters: &[BpfProgram],
    command: &[OsString],
    runtime: Option<&OwnedFd>,
) -> Result<i32, LaunchError> {
    let limits = policy.limits;
    let used = crate::disk::usage(&policy.data_dir);
    if used > limits.data_bytes {
        return Err(LaunchError::Limit(format!(
            "the package's data folder holds {} MiB, over its disk budget of {} MiB; the call was refused (free space in it first)",
            used >> 20,
            limits.data_bytes >> 20
        )));
    }
    let cgroup = Cgroup::create(std::process::id(), &limits)
        .map_err(|e| LaunchError::Usage(e.to_string()))?;
    let child = fork().map_err(sys("fork"))?;
    if child == 0 {
        // The child (one thread, still root, the host's file system in view) moves itself
        // into the groups before anything else, so everything it starts is counted.
        let err = match cgroup.join() {
            Ok(()) => confine_and_exec(policy, port, filters, command),
            Err(e) => LaunchError::Usage(format!("joining the call's cgroups: {e}")),
        };
        let _ = writeln!(io::stderr(), "{ERROR_PREFIX}{err}");
        exit_now(SETUP_FAILED);
    }
    let code = wait(child, runtime, policy);
    let out_of_memory = cgroup.out_of_memory();
    cgroup.remove();
    match code {
        // Whether the kernel killed the first process or another of the call's.
        Ok(_) if out_of_memory => Err(LaunchError::Limit(format!(
            "the call went over its memory limit of {} MiB; the kernel killed its largest process",
            limits.memory >> 20
        ))),
        other => other,
    }
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
    crate::relay::relay(listener, socket);
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
/// no tool or server outlives the Quiver that ran it. Every [`DISK_CHECK`] the data folder's
/// disk use is measured; past its budget the tool is stopped.
fn wait(child: i32, runtime: Option<&OwnedFd>, policy: &Policy) -> Result<i32, LaunchError> {
    let tool = Pid::from_raw(child).and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let budget = policy.limits.data_bytes;
    if let Some(tool) = tool {
        let timeout = rustix::event::Timespec::try_from(DISK_CHECK).ok();
        loop {
            let mut fds = vec![PollFd::new(&tool, PollFlags::IN)];
            if let Some(runtime) = runtime {
                fds.push(PollFd::new(runtime, PollFlags::IN));
            }
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) if !fds[0].revents().is_empty() => break,
                Ok(_) if fds.get(1).is_some_and(|f| !f.revents().is_empty()) => {
                    crate::sys::kill_and_reap(child);
                    return Ok(128 + libc::SIGKILL);
                }
                Ok(0) if crate::disk::usage(&policy.data_dir) > budget => {
                    crate::sys::kill_and_reap(child);
                    return Err(LaunchError::Limit(format!(
                        "the tool wrote past its data folder's disk budget of {} MiB and was stopped",
                        budget >> 20
                    )));
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
    }
    let status = crate::sys::wait_for(child).map_err(sys("waiting for the tool"))?;
    // A write that finished between two measurements still fails its call: the folder is
    // measured once more after the tool ended.
    if crate::disk::usage(&policy.data_dir) > budget {
        return Err(LaunchError::Limit(format!(
            "the tool wrote past its data folder's disk budget of {} MiB",
            budget >> 20
        )));
    }
    Ok(status)
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
            // `/proc` is the tool's own PID namespace's (see `crate::view`).
            policy
                .read
                .iter()
                .map(PathBuf::as_path)
                .chain([Path::new("/proc")]),
            AccessFs::ReadFile | AccessFs::ReadDir,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            policy
                .read_write
                .iter()
                .map(PathBuf::as_path)
                .chain([Path::new("/tmp")]),
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

/// In the forked child, once in the call's cgroups: mount view, Landlock, limits, privileges,
/// `no_new_privs`, seccomp, descriptors, then `execve`. Returns only on failure.
fn confine_and_exec(
    policy: &Policy,
    port: Option<u16>,
    filters: &[BpfProgram],
    command: &[OsString],
) -> LaunchError {
    match confine(policy, port, filters) {
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

fn confine(policy: &Policy, port: Option<u16>, filters: &[BpfProgram]) -> Result<(), LaunchError> {
    if crate::sys::unshare(libc::CLONE_NEWNS).is_err() {
        let source = io::Error::last_os_error();
        return Err(LaunchError::Unavailable(format!(
            "cannot create a mount namespace ({source}), so the tool's view of the file system cannot be limited"
        )));
    }
    crate::view::enter(policy, policy.limits.tmp_bytes)
        .map_err(|e| LaunchError::Usage(e.to_string()))?;
    let ruleset = landlock_ruleset(policy, port)?;
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
    crate::sys::drop_privileges(policy.run_as).map_err(sys(
        "dropping capabilities and changing to the package's user",
    ))?;
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
    crate::sys::close_from_3().map_err(sys("closing inherited descriptors"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_arguments() {
        let args = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
        let cases: [(&[&str], bool); 5] = [
            (&["--policy-stdin", "--", "python3", "main.py"], true),
            (&["--policy-stdin", "--"], false),
            (&["--", "python3"], false),
            (&["--policy", "p.json", "--", "x"], false),
            (&["--bogus", "--", "x"], false),
        ];
        for (input, ok) in cases {
            assert_eq!(parse(&args(input)).is_ok(), ok, "{input:?}");
        }
        let command = parse(&args(&["--policy-stdin", "--", "a", "b"])).unwrap();
        assert_eq!(command, args(&["a", "b"]));
    }
}
