//! The seccomp filters: system calls no tool needs are refused with `EPERM`; `socket` is an
//! allowlist (no family at all without network, only IPv4/IPv6 for the proxy relay with it);
//! `clone3`, whose flags a filter cannot read, gets `ENOSYS` so the C library falls back to
//! `clone`, whose namespace flags are refused. Every filter kills a process calling through
//! another architecture's entry (the i386 `int 0x80` entry), and on x86-64 the x32 system
//! call numbers are refused, so no second system-call table gets around the lists.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// System calls refused outright: debugging other processes, mounts, namespaces, kernel
/// keyrings, BPF, modules, reboot, clocks, swap, accounting, raw I/O and handles, and
/// io_uring (whose operations, `IORING_OP_SOCKET` among them, no filter sees).
const REFUSED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_personality,
    libc::SYS_lookup_dcookie,
    libc::SYS_pidfd_getfd,
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Why a filter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

fn err(e: impl std::fmt::Display) -> FilterError {
    FilterError(e.to_string())
}

fn arg0_has(bits: u64) -> Result<SeccompRule, FilterError> {
    SeccompRule::new(vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(bits),
            bits,
        )
        .map_err(err)?,
    ])
    .map_err(err)
}

/// A rule matching a first argument that is none of `allowed` (every value when it is empty).
fn arg0_none_of(allowed: &[libc::c_int]) -> Result<Vec<SeccompRule>, FilterError> {
    if allowed.is_empty() {
        return Ok(Vec::new());
    }
    let conditions = allowed
        .iter()
        .map(|&family| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
                .map_err(err)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![SeccompRule::new(conditions).map_err(err)?])
}

/// The socket families a tool may create: none without network; with it only IPv4 and IPv6,
/// which reach nothing but the relay on `127.0.0.1` (its network namespace holds only
/// loopback, and Landlock allows a TCP connect only to the relay's port). Unix, packet,
/// netlink, `AF_VSOCK` and every other family are refused.
pub(crate) fn socket_families(no_network: bool) -> &'static [libc::c_int] {
    if no_network {
        &[]
    } else {
        &[libc::AF_INET, libc::AF_INET6]
    }
}

/// On x86-64: refuses system call numbers with the x32 bit set (a second table the lists
/// above do not name) and kills a caller of another architecture's entry.
fn x32_filter() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_ABS_W: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LD_ABS_W, 0, 0, ARCH_OFFSET),
        op(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        op(RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        op(LD_ABS_W, 0, 0, NR_OFFSET),
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// The filters to apply, in order. `no_network` refuses every socket family; with network
/// only those of [`socket_families`] may be created: the tool's only way out is the proxy
/// relay on `127.0.0.1`.
pub fn filters(no_network: bool) -> Result<Vec<BpfProgram>, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| arg0_has(flag as u64))
        .collect::<Result<Vec<_>, _>>()?;
    refused.insert(libc::SYS_clone, clone_rules);
    refused.insert(libc::SYS_socket, arg0_none_of(socket_families(no_network))?);
    let eperm = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(err)?;
    let mut programs = vec![
        BpfProgram::try_from(eperm).map_err(err)?,
        BpfProgram::try_from(clone3).map_err(err)?,
    ];
    if cfg!(target_arch = "x86_64") {
        programs.push(x32_filter());
    }
    Ok(programs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_build_for_both_modes() {
        for no_network in [true, false] {
            let filters = super::filters(no_network).unwrap();
            assert_eq!(
                filters.len(),
                if cfg!(target_arch = "x86_64") { 3 } else { 2 }
            );
            assert!(filters.iter().all(|f| !f.is_empty()));
        }
    }
}
