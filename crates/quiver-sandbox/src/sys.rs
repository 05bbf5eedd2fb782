//! The few system calls no safe crate wraps: `fork`, `unshare`, `waitpid`, `_exit`,
//! `close_range`, `mount_setattr`, the loopback interface's flags, and the Landlock ABI probe;
//! and dropping capabilities and identity. Each `unsafe` block is one call
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

/// Drops every capability of the (single-threaded) child for good: the bounding set first
/// (while it may still), then the ambient set, then, as root, changes to `uid`/`gid` with no
/// supplementary groups (which empties the permitted and effective sets), and finally empties
/// every set explicitly. With `no_new_privs` after it, no `execve` gives any back. Without
/// `run_as` (a launcher not running as root) the identity is kept and the sets are emptied.
pub(crate) fn drop_privileges(run_as: Option<(u32, u32)>) -> io::Result<()> {
    let root = rustix::process::geteuid().is_root();
    if root {
        for bit in 0..64 {
            let cap = CapabilitySet::from_bits_retain(1 << bit);
            match rustix::thread::remove_capability_from_bounding_set(cap) {
                Ok(()) => {}
                // Past the kernel's last capability.
                Err(rustix::io::Errno::INVAL) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    rustix::thread::clear_ambient_capability_set()?;
    if let Some((uid, gid)) = run_as
        && root
    {
        rustix::thread::set_keep_capabilities(false)?;
        rustix::thread::set_thread_groups(&[])?;
        rustix::thread::set_thread_res_gid(
            rustix::process::Gid::from_raw(gid),
            rustix::process::Gid::from_raw(gid),
            rustix::process::Gid::from_raw(gid),
        )?;
        rustix::thread::set_thread_res_uid(
            rustix::process::Uid::from_raw(uid),
            rustix::process::Uid::from_raw(uid),
            rustix::process::Uid::from_raw(uid),
        )?;
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}

/// Closes every descriptor above 2 (`close_range(3, ~0, 0)`), so nothing the runtime or its
/// caller left open (`quiver call ... 9</etc/shadow`) reaches the tool.
pub(crate) fn close_from_3() -> io::Result<()> {
    // SAFETY: close_range takes plain integers; the child holds no Rust owner of a descriptor
    // above 2 that is used after this point (the Landlock ruleset was consumed before).
    let result = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Per-mount flags of [`mount_setattr`] (`MOUNT_ATTR_*` of `<linux/mount.h>`).
pub(crate) mod mount_attr {
    /// Read-only.
    pub const RDONLY: u64 = 0x1;
    /// No set-user-ID or set-group-ID programs.
    pub const NOSUID: u64 = 0x2;
    /// No device nodes.
    pub const NODEV: u64 = 0x4;
    /// No programs.
    pub const NOEXEC: u64 = 0x8;
}

/// `struct mount_attr` of `<linux/mount.h>` (no crate defines it).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` (Linux 5.12; every kernel with Landlock has it): sets the `set` flags
/// and clears the `clear` flags of the mount at `path`, and of every mount below it when
/// `recursive`. Only the mounts' own flags change, never their file systems'.
pub(crate) fn mount_setattr(
    path: &std::path::Path,
    recursive: bool,
    set: u64,
    clear: u64,
) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 } | libc::AT_SYMLINK_NOFOLLOW;
    // SAFETY: `path` is a valid C string and `attr` a valid `mount_attr` whose size is passed;
    // both outlive the call, which only reads them.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
