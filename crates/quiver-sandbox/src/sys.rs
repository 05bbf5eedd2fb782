//! The few system calls no safe crate wraps: `fork`, `unshare`, `waitpid`, `_exit`, the
//! loopback interface's flags, and the Landlock ABI probe. Each `unsafe` block is one call
//! with plain-value arguments.
#![allow(unsafe_code)]

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets};

/// `fork(2)`: 0 in the child, the child's pid in the parent. Called only by the launcher,
/// which is single-threaded at that point.
pub(crate) fn fork() -> io::Result<i32> {
    // SAFETY: the launcher has started no thread yet, so the child inherits a consistent
    // process; the child only sets limits and identity and then execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// `unshare(2)` with `flags`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes a flag word and touches no memory of ours.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `_exit(2)`: ends the forked child without running the parent's exit handlers.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and takes a plain integer.
    unsafe { libc::_exit(code) }
}

/// Waits for `child`; its exit code, or `128 + signal` when a signal ended it.
pub(crate) fn wait_for(child: i32) -> io::Result<i32> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable int for the duration of the call.
        let pid = unsafe { libc::waitpid(child, &mut status, 0) };
        if pid < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if libc::WIFEXITED(status) {
            return Ok(libc::WEXITSTATUS(status));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(128 + libc::WTERMSIG(status));
        }
    }
}

/// Kills `pid` with `SIGKILL` and reaps it.
pub(crate) fn kill_and_reap(pid: i32) {
    // SAFETY: plain integers; `pid` is our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = wait_for(pid);
}

/// Brings up `lo` in the current network namespace.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: a datagram socket whose descriptor is closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: `request` is a valid ifreq for both ioctls; `fd` is an open socket.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) < 0 {
            Err(io::Error::last_os_error())
        } else {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
    result
}

/// The Landlock ABI version of the running kernel; `None` when Landlock is missing or off.
pub fn landlock_abi() -> Option<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call only returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (version > 0).then_some(version)
}

/// Changes the (single-threaded) child to `uid`/`gid` with no supplementary groups, keeping
/// only `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH` as ambient capabilities: Landlock, not
/// Unix permissions, decides what the tool may read and write, while `RLIMIT_NPROC` (which
/// never applies to uid 0) counts the tool's processes.
pub(crate) fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    rustix::thread::set_keep_capabilities(true)?;
    rustix::thread::set_thread_groups(&[])?;
    let gid = rustix::process::Gid::from_raw(gid);
    let uid = rustix::process::Uid::from_raw(uid);
    rustix::thread::set_thread_gid(gid)?;
    rustix::thread::set_thread_uid(uid)?;
    let kept = CapabilitySet::DAC_OVERRIDE | CapabilitySet::DAC_READ_SEARCH;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: kept,
            permitted: kept,
            inheritable: kept,
        },
    )?;
    for cap in [CapabilitySet::DAC_OVERRIDE, CapabilitySet::DAC_READ_SEARCH] {
        rustix::thread::configure_capability_in_ambient_set(cap, true)?;
    }
    rustix::thread::set_keep_capabilities(false)?;
    Ok(())
}
