//! A seccomp-bpf filter for the process about to run the program (inherited
//! by all it starts): system calls a test program has no use for and an
//! escape needs answer `EPERM`; everything else is allowed. `clone3`
//! answers `ENOSYS` instead: its flags are out of a filter's sight, and
//! libc falls back to `clone`, whose flags are checked. Where nothing else
//! keeps the host's Unix sockets out of reach, the program gets no socket
//! at all (a filter cannot see the address `connect` is given), only
//! connected pairs.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Denied outright: tracing and other processes' memory and descriptors,
/// mounts (the old call, the new mount API and `mount_setattr`, which
/// could make a read-only mount writable again), kernel keyrings, new
/// namespaces, `io_uring` (its socket operations pass by the socket rule),
/// BPF and perf, file handles (a known container escape), modules, kexec,
/// reboot, swap and the clock. `socket`, `clone`, `ioctl` and `kill` are
/// denied for some arguments only (see `restrict`).
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
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

/// The flags of `clone` that make new namespaces (`CLONE_NEWTIME` is not
/// one for `clone`: that bit is part of its exit signal).
const NEW_NAMESPACES: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The bits of a socket's type that are its type, not its flags
/// (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`): the kernel's `SOCK_TYPE_MASK`.
const SOCKET_TYPE_MASK: u64 = 0xf;

/// Installs the filters on this process (setting `no_new_privs`); the
/// layer's name or why it is not in force. `no_sockets`: `socket` is
/// refused whatever its family, and `socketpair` but for stream and
/// sequenced-packet pairs, already connected to each other (a datagram
/// socket of a pair could still send to any address).
pub(super) fn restrict(no_sockets: bool) -> Result<String, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no filter for {}", std::env::consts::ARCH))?;
    let fail = |e: seccompiler::BackendError| format!("failed to build the seccomp filter: {e}");
    let arg = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(fail)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // Sockets: only AF_UNIX (Python's multiprocessing uses it); no IPv4,
    // IPv6, raw packets or netlink. An empty rule list matches every call.
    let socket = if no_sockets {
        // Pairs stay: multiprocessing.Pipe, asyncio and subprocess use
        // them.
        let type_mask = SeccompCmpOp::MaskedEq(SOCKET_TYPE_MASK);
        rules.insert(
            libc::SYS_socketpair,
            vec![
                arg(1, type_mask.clone(), libc::SOCK_DGRAM as u64)?,
                // Unix sockets take SOCK_RAW for SOCK_DGRAM.
                arg(1, type_mask, libc::SOCK_RAW as u64)?,
            ],
        );
        Vec::new()
    } else {
        vec![arg(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?]
    };
    rules.insert(libc::SYS_socket, socket);
    // Threads and forks pass; a clone into new namespaces does not.
    rules.insert(
        libc::SYS_clone,
        NEW_NAMESPACES
            .iter()
            .map(|&flag| {
                let flag = u64::from(flag.unsigned_abs());
                arg(0, SeccompCmpOp::MaskedEq(flag), flag)
            })
            .collect::<Result<_, _>>()?,
    );
    // No input pushed into a terminal, nor the console's special
    // functions: without a controlling terminal the program has none to
    // use, but a terminal it could open would do.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            arg(1, SeccompCmpOp::Eq, libc::TIOCSTI),
            arg(1, SeccompCmpOp::Eq, libc::TIOCLINUX),
        ]
        .into_iter()
        .collect::<Result<_, _>>()?,
    );
    // kill(-1) (every process the program may signal) and kill(-pgid)
    // (a process group): pid_t is 32 bits and negative ones are at or
    // above 2^31 as unsigned. tkill and tgkill take no such ids: they
    // answer EINVAL to ids below 1 by themselves.
    rules.insert(libc::SYS_kill, vec![arg(0, SeccompCmpOp::Ge, 1 << 31)?]);
    install(rules, libc::EPERM, arch)?;
    let clone3 = [(libc::SYS_clone3, Vec::new())].into_iter().collect();
    install(clone3, libc::ENOSYS, arch)?;
    Ok("seccomp".to_owned())
}

/// Compiles and installs a filter answering `errno` to what `rules` match.
fn install(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
    arch: TargetArch,
) -> Result<(), String> {
    let fail = |e: seccompiler::BackendError| format!("failed to build the seccomp filter: {e}");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.unsigned_abs()),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("refused: {e}"))
}
