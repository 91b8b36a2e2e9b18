//! A seccomp-bpf filter for the process about to run the program (inherited
//! by all it starts): system calls a test program has no use for and an
//! escape needs answer `EPERM`; everything else is allowed.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Denied outright: tracing and other processes' memory, mounts, kernel
/// keyrings, new namespaces, `io_uring` (its socket operations pass by the
/// socket rule), BPF and perf, file handles (a known container escape),
/// modules, kexec, reboot, swap and the clock.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_io_uring_setup,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
];

/// Installs the filter on this process (setting `no_new_privs`); the
/// layer's name or why it is not in force.
pub(super) fn restrict() -> Result<String, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no filter for {}", std::env::consts::ARCH))?;
    let fail = |e: seccompiler::BackendError| format!("failed to build the seccomp filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // Sockets: only AF_UNIX (Python's multiprocessing uses it); no IPv4,
    // IPv6, raw packets or netlink.
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(fail)?;
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![not_unix]).map_err(fail)?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("refused: {e}"))?;
    Ok("seccomp".to_owned())
}
