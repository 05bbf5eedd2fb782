//! The seccomp filters: system calls no tool needs are refused with `EPERM`; `clone3`, whose
//! flags a filter cannot read, gets `ENOSYS` so the C library falls back to `clone`, whose
//! namespace flags are refused.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// System calls refused outright: debugging other processes, mounts, namespaces, kernel
/// keyrings, BPF, modules, reboot, clocks, swap, accounting, raw I/O and handles.
const REFUSED: &[libc::c_long] = &[
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

fn arg0_is(value: u64) -> Result<SeccompRule, FilterError> {
    SeccompRule::new(vec![
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value).map_err(err)?,
    ])
    .map_err(err)
}

/// The filters to apply, in order. `no_network` also refuses IP sockets (the tool has no
/// network at all). Unix-domain and packet sockets are always refused: the tool's only way
/// out is the proxy relay on `127.0.0.1`.
pub fn filters(no_network: bool) -> Result<Vec<BpfProgram>, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| arg0_has(flag as u64))
        .collect::<Result<Vec<_>, _>>()?;
    refused.insert(libc::SYS_clone, clone_rules);
    let mut families = vec![libc::AF_UNIX, libc::AF_PACKET, libc::AF_NETLINK];
    if no_network {
        families.extend([libc::AF_INET, libc::AF_INET6]);
    }
    let socket_rules = families
        .iter()
        .map(|&family| arg0_is(family as u64))
        .collect::<Result<Vec<_>, _>>()?;
    refused.insert(libc::SYS_socket, socket_rules);
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
    Ok(vec![
        BpfProgram::try_from(eperm).map_err(err)?,
        BpfProgram::try_from(clone3).map_err(err)?,
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_build_for_both_modes() {
        for no_network in [true, false] {
            let filters = super::filters(no_network).unwrap();
            assert_eq!(filters.len(), 2);
            assert!(filters.iter().all(|f| !f.is_empty()));
        }
    }
}
