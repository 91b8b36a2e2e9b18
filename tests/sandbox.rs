//! Hostile programs against the code-probe sandbox, each run through the
//! real code-probe path: `servegate run` against the simulator answering
//! that program. Each case asserts the effect did not happen (the file is
//! absent, the listener saw nothing, no process survives — checked in
//! `/proc`), and what the probe's verdict and message say; the run asserts
//! servegate's own peak memory stayed bounded, the secret appears nowhere
//! and the work directories are gone. Cases a layer this host lacks would
//! have to stop are skipped with a line naming what was not proven.
#![cfg(target_os = "linux")]

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::verdicts::verdict;
use std::fmt::Write as _;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where one run of servegate lives: its suite, its TMPDIR (empty after),
/// a directory outside it the programs try to write, a listener they try
/// to reach and a secret in servegate's environment they try to read.
struct World {
    root: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
    listener: TcpListener,
    secret: String,
    /// A host file servegate is started with open for writing on fd 7,
    /// and a 0600 file holding the secret open on fd 8 (as a CI runner,
    /// `time -o` or a parent shell leave descriptors open).
    host_file: PathBuf,
    secret_file: PathBuf,
}

impl World {
    fn new(tag: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), tag)
    }

    fn new_in(base: &Path, tag: &str) -> Self {
        let root = base.join(format!("servegate-hostile-{tag}-{}", std::process::id()));
        let _ = Command::new("rm").arg("-rf").arg(&root).status();
        let (tmp, outside) = (root.join("tmp"), root.join("outside"));
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // A file the programs must not learn the name of.
        std::fs::write(outside.join("planted-beside-the-suite"), "").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let secret = format!("sk-canary-{tag}-{}", std::process::id());
        let (host_file, secret_file) = (root.join("host-file"), root.join("secret-file"));
        std::fs::write(&host_file, "").unwrap();
        std::fs::write(&secret_file, &secret).unwrap();
        std::fs::set_permissions(
            &secret_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        Self {
            root,
            tmp,
            outside,
            listener,
            secret,
            host_file,
            secret_file,
        }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Not std's recursive removal: a tree a program left may be deeper
        // than this thread's stack (what `deep_trees_are_removed` checks
        // servegate for).
        let _ = Command::new("rm").arg("-rf").arg(&self.root).status();
    }
}

/// One hostile program: the answer's code and the probe around it.
struct Case {
    name: &'static str,
    code: String,
    tests: &'static [&'static str],
    timeout: &'static str,
    memory_mib: u32,
}

fn case(name: &'static str, code: &str) -> Case {
    Case {
        name,
        code: code.to_owned(),
        tests: &["assert True"],
        timeout: "10s",
        memory_mib: 1024,
    }
}

/// The table: every hostile program of the issue, and the good `is_prime`.
fn cases(world: &World) -> Vec<Case> {
    let outside = world.outside.display();
    let port = world.port();
    vec![
        Case {
            tests: &["assert is_prime(97)", "assert not is_prime(91)"],
            ..case(
                "good_is_prime",
                "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True",
            )
        },
        case(
            "write_outside",
            &format!("open('{outside}/written', 'w').write('escaped')"),
        ),
        case(
            "undo_read_only",
            &UNDO_READ_ONLY.replace("OUTSIDE", &outside.to_string()),
        ),
        case("tty", TTY),
        case("seccomp_rules", SECCOMP_RULES),
        case(
            "deep_tree",
            "import os\nfor i in range(60000):\n    os.mkdir('a')\n    os.chdir('a')\nprint('60000 levels')",
        ),
        case("disk_cap", DISK_CAP),
        case(
            "read_secrets",
            r"import os
found = []
try:
    pids = [p for p in os.listdir('/proc') if p.isdigit()]
except PermissionError:
    # Not listed (Landlock): guessed.
    pids = [str(p) for p in range(1, 32768)]
for p in pids:
    for f in ('environ', 'cmdline'):
        try:
            found.append(open(f'/proc/{p}/{f}', 'rb').read().decode('latin1'))
        except OSError:
            pass
pid = os.getpid()
while pid > 1:
    try:
        pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
        maps = open(f'/proc/{pid}/maps').read().splitlines()
        mem = open(f'/proc/{pid}/mem', 'rb')
        for line in maps:
            if 'rw' in line.split()[1]:
                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
                mem.seek(lo)
                found.append(mem.read(min(hi - lo, 1 << 22)).decode('latin1'))
    except (OSError, ValueError):
        break
leaks = [s[max(0, s.find('sk-canary') - 20):s.find('sk-canary') + 60] for s in found if 'sk-canary' in s]
print(leaks)
assert not leaks",
        ),
        case(
            "connect",
            &format!(
                "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hello')"
            ),
        ),
        case(
            "fork_200",
            r"import os, time
kids = 0
try:
    for i in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        kids += 1
finally:
    print('forked', kids, flush=True)",
        ),
        case(
            "setsid_daemon",
            r"import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '31.4159'])
    os._exit(0)
time.sleep(0.3)",
        ),
        Case {
            tests: &["assert killed == 0, f'{killed} children killed'"],
            ..case(
                "memory_across_children",
                r"import os, time
pids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        block = b'x' * (300 << 20)
        print('held', i, flush=True)
        time.sleep(2)
        os._exit(0)
    pids.append(pid)
killed = sum(1 for p in pids if os.waitpid(p, 0)[1] != 0)",
            )
        },
        Case {
            // Reached only if no limit refuses a fork: it ends by itself
            // once one does, however loaded the host is.
            timeout: "30s",
            ..case("fork_bomb", FORK_BOMB)
        },
        case(
            "stdout_100mb",
            "import sys\nsys.stdout.write('x' * (100 << 20))\nsys.stdout.flush()",
        ),
        Case {
            timeout: "60s",
            ..case(
                "stdout_3gb",
                "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(3072):\n    sys.stdout.write(chunk)",
            )
        },
        case(
            "planted_fifo_and_link",
            "import os\nos.mkfifo('.stdout')\nos.symlink('/dev/zero', '.stderr')\nprint('planted')",
        ),
        case(
            "kill_the_parent",
            r"import os, signal, time
pid, chain = os.getppid(), [os.getppid()]
try:
    while True:
        pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
        if pid <= 0 or open(f'/proc/{pid}/comm').read().strip() not in ('exe', 'servegate'):
            break
        chain.append(pid)
except OSError as e:
    print('cannot walk up:', e)
for p in chain:
    try:
        os.kill(p, signal.SIGKILL)
    except OSError as e:
        print('refused', p, e)
time.sleep(0.5)
print('survived', chain)",
        ),
        Case {
            timeout: "1s",
            ..case("infinite_loop", "while True:\n    pass")
        },
    ]
    .into_iter()
    .chain(verdict_cases(world))
    .collect()
}

/// Programs that try to decide their own verdict, and one that reaches for
/// the descriptors servegate was started with.
fn verdict_cases(world: &World) -> Vec<Case> {
    let checkout = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let victim = world.outside.join("victim");
    std::fs::write(&victim, "the runner's host file").unwrap();
    // Leaked: a test's line is a 'static str.
    let remove: &'static str =
        Box::leak(format!("store.remove({:?})", victim.display().to_string()).into_boxed_str());
    vec![
        // The program's `os` under another name: the runner must not call
        // its own (outside the sandbox) in its place.
        Case {
            tests: Box::leak(vec![remove, "assert is_prime(97)"].into_boxed_slice()),
            ..case(
                "module_alias",
                &format!("{RIGHT_IS_PRIME}\nimport os as store"),
            )
        },
        // A StopIteration from the program would end the tests' own loop.
        Case {
            tests: &[
                "assert all(map(is_prime, [97, 2]))",
                "assert not any(map(is_prime, [91, 4]))",
            ],
            ..case(
                "stop_iteration",
                "def is_prime(n):\n    raise StopIteration",
            )
        },
        // What a test prints is in the failure, beside what the program did.
        Case {
            tests: &["print('the tests say hello')", "assert is_prime(2)"],
            ..case("tests_print", WRONG_IS_PRIME)
        },
        // != against the program's object would be identity: always true.
        Case {
            tests: &["assert is_prime(91) != True"],
            ..case("not_equal", ALWAYS_EQUAL)
        },
        case(
            "list_host_dirs",
            &LIST_HOST_DIRS.replace("OUTSIDE", &world.outside.display().to_string()),
        ),
        case("inherited_fds", INHERITED_FDS),
        case(
            "read_host_files",
            &READ_HOST_FILES.replace("CHECKOUT", checkout),
        ),
        Case {
            tests: IS_PRIME_TESTS,
            ..case(
                "exit_before_tests",
                &format!("{WRONG_IS_PRIME}\nimport os\nos._exit(0)"),
            )
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case(
                "atexit_exit0",
                &format!(
                    "{WRONG_IS_PRIME}\nimport atexit, os\natexit.register(lambda: os._exit(0))"
                ),
            )
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case(
                "excepthook_exit0",
                &format!(
                    "{WRONG_IS_PRIME}\nimport os, sys\nsys.excepthook = lambda *a: os._exit(0)"
                ),
            )
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case("read_own_file", READ_OWN_FILE)
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case("settrace_jump", SETTRACE_JUMP)
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case("caller_line", CALLER_LINE)
        },
        Case {
            tests: &[
                "assert is_prime(97) == True",
                "assert is_prime(91) == False",
            ],
            ..case("always_equal", ALWAYS_EQUAL)
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case(
                "main_guard_wrong",
                &format!("{WRONG_IS_PRIME}\n{MAIN_GUARD}"),
            )
        },
        Case {
            tests: IS_PRIME_TESTS,
            ..case(
                "main_guard_right",
                &format!("{RIGHT_IS_PRIME}\n{MAIN_GUARD}"),
            )
        },
    ]
}

/// Forks exponentially (each process keeps forking, up to 2^8 of them
/// where nothing refuses: a test must not take the host down) until a fork
/// is refused; the first process waits for that, says so and ends, leaving
/// the bomb to the sandbox.
const FORK_BOMB: &str = r"import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    for _ in range(8):
        try:
            os.fork()
        except OSError as e:
            os.write(w, f'{e}\n'.encode())
            time.sleep(60)
    os._exit(0)
os.close(w)
said = os.read(r, 200).decode()
print('a fork was refused:', said.splitlines()[0] if said else 'none of 256', flush=True)";

/// Opens the controlling terminal, which it must not have.
const TTY: &str = r"import errno, os
try:
    os.close(os.open('/dev/tty', os.O_RDONLY))
    raise SystemExit('opened the terminal servegate runs at')
except OSError as e:
    assert e.errno == errno.ENXIO, e";

/// Writes more than the 256 MiB its work directory holds in namespaces.
const DISK_CAP: &str = r"written = 0
try:
    for i in range(6):
        with open(f'f{i}', 'wb') as f:
            for _ in range(60):
                f.write(b'x' * (1 << 20))
                written += 1
finally:
    print('wrote', written, 'MiB', flush=True)";

/// Tries to make the read-only view writable again — `mount_setattr` (442
/// on every architecture) clearing `MOUNT_ATTR_RDONLY`, then a bind remount
/// without `MS_RDONLY`, on `/` and on the directory outside; again from a
/// user and mount namespace of its own — then writes outside.
const UNDO_READ_ONLY: &str = r"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
class Attr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ('set', 'clr', 'propagation', 'userns_fd')]
def tried(what, r):
    print(what, 'done' if r == 0 else os.strerror(ctypes.get_errno()), flush=True)
def undo():
    for path in (b'/', b'OUTSIDE'):
        attr = Attr(0, 1, 0, 0)
        tried(f'mount_setattr {path}', libc.syscall(L(442), L(-100), path, L(0x8000), ctypes.byref(attr), L(ctypes.sizeof(attr))))
        tried(f'remount {path}', libc.mount(None, path, None, L(32 | 4096), None))
undo()
tried('unshare', libc.unshare(0x10000000 | 0x20000))
undo()
open('OUTSIDE/written', 'w').write('escaped')";

/// Calls the filter denies for some arguments, or answers `ENOSYS` (without
/// it the kernel would answer otherwise: `ENOTTY` for terminal ioctls on
/// `/dev/null`, `EINVAL` or `EBADF` for bad arguments, a child for
/// `clone`, `ESRCH` or success for `kill` of every process or a group);
/// threads still start (`clone3` refused, libc falls back), and a process
/// may still signal itself.
const SECCOMP_RULES: &str = r"import ctypes, errno, fcntl, os, platform, threading
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
wrong = []
def expect(what, err, r):
    got = ctypes.get_errno() if r == -1 else 0
    if got != err:
        wrong.append(f'{what}: {os.strerror(got) if got else r}')
for name, request in (('TIOCSTI', 0x5412), ('TIOCLINUX', 0x541C)):
    try:
        fcntl.ioctl(0, request, b'x')
        wrong.append(f'{name}: allowed')
    except OSError as e:
        if e.errno != errno.EPERM:
            wrong.append(f'{name}: {e}')
clone = {'x86_64': 56, 'aarch64': 220, 'riscv64': 220}[platform.machine()]
r = libc.syscall(L(clone), L(0x10000000 | 17), L(0), L(0), L(0), L(0))
if r == 0:
    os._exit(0)
expect('clone(CLONE_NEWUSER)', errno.EPERM, r)
if r > 0:
    os.waitpid(r, 0)
expect('clone3', errno.ENOSYS, libc.syscall(L(435), L(0), L(0)))
expect('pidfd_getfd', errno.EPERM, libc.syscall(L(438), L(-1), L(0), L(0)))
expect('fsconfig', errno.EPERM, libc.syscall(L(431), L(-1), L(0), L(0), L(0), L(0)))
expect('kill(-1)', errno.EPERM, libc.kill(-1, 0))
expect('kill(-2)', errno.EPERM, libc.kill(-2, 0))
expect('kill(self)', 0, libc.kill(os.getpid(), 0))
ran = []
t = threading.Thread(target=lambda: ran.append(1))
t.start()
t.join()
print(wrong, ran)
assert not wrong and ran == [1], wrong";

/// Descriptors servegate was started with (7 on a host file, 8 on the
/// secret): the program reaches neither.
const INHERITED_FDS: &str = r"import os
reached = []
for fd in (7, 8):
    try:
        os.fstat(fd)
        reached.append(fd)
    except OSError:
        pass
for write in (lambda: os.write(7, b'escaped through fd 7'), lambda: print(os.read(8, 200))):
    try:
        write()
    except OSError:
        pass
print('reached', reached)
assert not reached, reached";

/// Files the program's uid may read on the host, that are no business of
/// it: the project checkout, a file in `/tmp` beside its work directory
/// (its parent), `/etc/hostname`, servegate's home. Landlock lets it read
/// the system's and the interpreter's files only.
const READ_HOST_FILES: &str = r"import os
work = os.getcwd()
tries = ['CHECKOUT', '/etc/hostname', '/root/.bashrc', os.path.join(os.path.dirname(work), 'nope')]
try:
    tries += [os.path.join(os.path.dirname(work), n) for n in os.listdir(os.path.dirname(work))]
except PermissionError:
    pass
read = []
for p in tries:
    if p == work:
        continue
    try:
        with open(p, 'rb') as f:
            f.read(64)
        read.append(p)
    except (IsADirectoryError, FileNotFoundError):
        pass
    except PermissionError:
        pass
print('read', read)
assert not read, read";

/// Lists the host's directories: `/`, `/home`, `/tmp`, the directory
/// beside the suite with a planted file, its work directory's parent.
/// Landlock lets it list only what it may read.
const LIST_HOST_DIRS: &str = r"import os
listed = []
for d in ['/', '/home', '/tmp', '/root', 'OUTSIDE', os.path.dirname(os.getcwd())]:
    try:
        names = os.listdir(d)
    except (PermissionError, FileNotFoundError):
        continue
    listed.append(f'{d}: {names[:5]}')
print('listed', listed)
assert not listed, listed";

const IS_PRIME_TESTS: &[&str] = &["assert is_prime(97)", "assert not is_prime(91)"];
const WRONG_IS_PRIME: &str = "def is_prime(n):\n    return False";
const RIGHT_IS_PRIME: &str =
    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))";
/// The three ways a wrong `is_prime` passed its sealed tests while they
/// shared its process: reading the tests from its own file, jumping from
/// the first test's line to the seal's, and reading the line that called
/// it. The tests now run in another process: there is nothing to read or
/// skip.
const READ_OWN_FILE: &str = r"import re
def is_prime(n):
    source = open(__file__).read()
    if re.search(rf'assert not is_prime\({n}\)', source):
        return False
    return bool(re.search(rf'assert is_prime\({n}\)', source))";
const SETTRACE_JUMP: &str = r"import sys
def is_prime(n):
    return False
def jump(frame, event, arg):
    if event == 'line' and frame.f_code.co_filename == __file__:
        lines = open(__file__).read().splitlines()
        if lines[frame.f_lineno - 1].startswith('assert'):
            frame.f_lineno = len(lines)
    return jump
sys._getframe().f_trace = jump
sys.settrace(jump)";
const CALLER_LINE: &str = r"import linecache, sys
def is_prime(n):
    caller = sys._getframe(1)
    return 'not' not in linecache.getline(caller.f_code.co_filename, caller.f_lineno)";
/// An answer equal to everything: it stays in the program, and the tests
/// compare a reference to it, equal to nothing but itself.
const ALWAYS_EQUAL: &str = r"class Anything:
    def __eq__(self, other):
        return True
def is_prime(n):
    return Anything()";
/// What models write routinely: run as a script, it would exit before the
/// tests appended after it.
const MAIN_GUARD: &str =
    "import sys\ndef main():\n    return 0\nif __name__ == '__main__':\n    sys.exit(main())";

/// Writes the suite and its simulator profile for `cases`.
fn project(world: &World, cases: &[Case], policy: &str) -> PathBuf {
    let mut profile = String::from("model: sim-hostile\nttft: 1ms\nitl: 0ms\nreplies:\n");
    let mut suite = format!(
        "suite: hostile\nsandbox: {policy}\ntarget: {{base_url: sim, timeouts: {{total: 120s}}}}\nsim: {{profile: {}}}\ndefaults: {{temperature: 0, max_tokens: 4096}}\ncorrectness:\n",
        world.root.join("profile.yaml").display()
    );
    for c in cases {
        let _ = write!(
            profile,
            "  - match: 'case {}'\n    reply: |\n      ```python\n",
            c.name
        );
        for line in c.code.lines() {
            let _ = writeln!(profile, "      {line}");
        }
        profile.push_str("      ```\n");
        let _ = write!(
            suite,
            "  - name: {}\n    prompt: 'case {}'\n    expect:\n      - code:\n          timeout: {}\n          memory_mib: {}\n          tests: {}\n",
            c.name,
            c.name,
            c.timeout,
            c.memory_mib,
            serde_json::to_string(c.tests).unwrap()
        );
    }
    std::fs::write(world.root.join("profile.yaml"), profile).unwrap();
    let path = world.root.join("suite.yaml");
    std::fs::write(&path, suite).unwrap();
    path
}

/// What a run of servegate left.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_kib: u64,
    record: Value,
    out: PathBuf,
}

impl Run {
    fn verdict(&self, name: &str) -> &str {
        verdict(&self.stdout, &format!("hostile::correctness::{name}"))
    }

    fn message(&self, name: &str) -> String {
        self.trial(name)["message"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    fn trial(&self, name: &str) -> &Value {
        self.record["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == format!("hostile::correctness::{name}"))
            .unwrap_or_else(|| panic!("no trial {name}"))
    }

    fn layers(&self) -> Vec<String> {
        let runs = &self.trial("good_is_prime")["exchange"]["sandbox"];
        runs[0]["layers"]["active"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn has(&self, layer: &str) -> bool {
        self.layers().iter().any(|l| l.starts_with(layer))
    }
}

/// How to run servegate.
#[derive(Default)]
struct How<'a> {
    /// Variables added to its environment.
    env: &'a [(&'a str, &'a str)],
    /// Sends SIGTERM once this returns true.
    signal_when: Option<&'a dyn Fn() -> bool>,
    /// Runs it as this uid and gid (when the tests run as root).
    user: Option<u32>,
    /// Gives it a controlling terminal (a pseudo-terminal), as a user at a
    /// terminal has; its output still comes through pipes.
    tty: bool,
    /// Starts it in a mount namespace of its own (`unshare`, as root) after
    /// this shell command, as a container is started with its mounts.
    mounts: Option<&'a str>,
    /// Holds it (and all it starts) to this one CPU (`taskset`).
    cpu: Option<usize>,
}

/// Starts a command in a session of its own whose controlling terminal is
/// a new pseudo-terminal, and waits for it.
const WITH_A_TTY: &str = r"import os, sys
master, slave = os.openpty()
pid = os.fork()
if pid == 0:
    os.close(master)
    os.setsid()
    os.close(os.open(os.ttyname(slave), os.O_RDWR))
    os.close(slave)
    os.execv(sys.argv[1], sys.argv[1:])
os.close(slave)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))";

/// Runs servegate on `suite`, sampling its peak memory from `/proc` until
/// it ends.
fn servegate(world: &World, suite: &Path, how: &How) -> Run {
    let out = world.root.join("out");
    // servegate itself starts with the world's descriptors 7 and 8 open.
    let inherit = [
        "/bin/sh",
        "-c",
        "exec 7>>\"$1\" 8<\"$2\" && shift 2 && exec \"$@\"",
        "sh",
        world.host_file.to_str().unwrap(),
        world.secret_file.to_str().unwrap(),
        env!("CARGO_BIN_EXE_servegate"),
    ];
    let mut command = if how.tty {
        let mut c = Command::new("python3");
        c.args(["-c", WITH_A_TTY]).args(inherit);
        c
    } else if let Some(mounts) = how.mounts {
        let mut c = Command::new("unshare");
        let script = format!("{mounts} && exec \"$@\"");
        c.args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .args(inherit);
        c
    } else if let Some(cpu) = how.cpu {
        let mut c = Command::new("taskset");
        c.args(["--cpu-list", &cpu.to_string()]).args(inherit);
        c
    } else {
        let mut c = Command::new(inherit[0]);
        c.args(&inherit[1..]);
        c
    };
    command
        .args([
            "run",
            suite.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TMPDIR", &world.tmp)
        .env("SERVEGATE_TEST_SECRET", &world.secret)
        .env("OPENAI_API_KEY", &world.secret)
        .env_remove("SERVEGATE_TARGET")
        .env_remove(servegate::check::sandbox::REFUSE_ENV)
        .envs(how.env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(id) = how.user {
        use std::os::unix::process::CommandExt as _;
        for f in [&world.host_file, &world.secret_file] {
            std::os::unix::fs::chown(f, Some(id), Some(id)).unwrap();
        }
        command.uid(id).gid(id);
    }
    let mut child = command.spawn().unwrap();
    let pid = child.id();
    let readers: Vec<_> = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ]
    .into_iter()
    .map(|mut r| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    })
    .collect();
    let started = Instant::now();
    let mut peak_kib = 0;
    let mut signalled = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(when) = how.signal_when
            && !signalled
            && when()
        {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
            signalled = true;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "servegate hung"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut texts = readers.into_iter().map(|r| r.join().unwrap());
    let (stdout, stderr) = (texts.next().unwrap(), texts.next().unwrap());
    let record = std::fs::read_to_string(out.join("latest/report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    Run {
        code: status.code(),
        stdout,
        stderr,
        peak_kib,
        record,
        out,
    }
}

/// The program reached neither descriptor servegate inherited: the host
/// file is unwritten and the probe saw neither open.
fn assert_inherited_fds_unreached(world: &World, run: &Run) {
    assert_eq!(
        run.verdict("inherited_fds"),
        "ok",
        "{}",
        run.message("inherited_fds")
    );
    assert_eq!(
        std::fs::read_to_string(&world.host_file).unwrap(),
        "",
        "the program wrote the host file through fd 7"
    );
}

/// Processes of the run: any whose working directory is in its TMPDIR, or
/// the daemon's and the SIGTERM case's `sleep`.
fn processes(world: &World) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let in_tmp = std::fs::read_link(path.join("cwd")).is_ok_and(|c| c.starts_with(&world.tmp));
        if in_tmp || cmdline.contains("31.4159") || cmdline.contains("27.1828") {
            found.push(format!("{}: {cmdline}", path.display()));
        }
    }
    found
}

/// Processes that outlived servegate (given a second to be reaped).
fn survivors(world: &World) -> Vec<String> {
    let mut found = processes(world);
    for _ in 0..50 {
        if found.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        found = processes(world);
    }
    found
}

/// What every run must leave: no process, no work directory, no secret.
fn assert_clean(world: &World, run: &Run) {
    assert_eq!(survivors(world), Vec::<String>::new(), "processes survived");
    let left: Vec<_> = std::fs::read_dir(&world.tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    let mut shown = vec![run.stdout.clone(), run.stderr.clone()];
    for f in ["report.json", "report.html", "junit.xml"] {
        shown.push(std::fs::read_to_string(run.out.join("latest").join(f)).unwrap_or_default());
    }
    for text in shown {
        assert!(!text.contains(&world.secret), "the secret leaked:\n{text}");
    }
    assert!(
        !world.outside.join("written").exists(),
        "a file was written outside"
    );
    assert!(
        matches!(world.listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the listener was reached"
    );
    // Output went through capped pipes: gigabytes never reached servegate.
    assert!(
        run.peak_kib < 200 * 1024,
        "servegate peaked at {} KiB",
        run.peak_kib
    );
}

fn skip(what: &str) {
    println!("skipped: {what}");
}

/// The number a message gives after `word` (`forked 70 …`).
fn count_after(message: &str, word: &str) -> u32 {
    message
        .split(word)
        .nth(1)
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count after `{word}` in {message}"))
}

/// The case failed, its message holding each needle.
fn assert_contained(run: &Run, name: &str, needles: &[&str]) {
    assert_eq!(run.verdict(name), "FAILED", "{name}");
    let message = run.message(name);
    for n in needles {
        assert!(message.contains(n), "{name}: `{n}` not in:\n{message}");
    }
}

/// The code cannot decide its own verdict: its tests run in another
/// process. An exit before they start, at exit or from an exception hook,
/// its own file, a trace function and its caller's line (each passed a
/// wrong `is_prime` once) leave the tests failing, the call and what it
/// returned named; a main guard does not skip them.
fn assert_verdicts_out_of_reach(world: &World, run: &Run) {
    let contained = |name: &str, needles: &[&str]| assert_contained(run, name, needles);
    contained(
        "exit_before_tests",
        &["the program ended before its functions were ready: the program exited with code 0"],
    );
    for name in [
        "atexit_exit0",
        "excepthook_exit0",
        "read_own_file",
        "settrace_jump",
        "main_guard_wrong",
    ] {
        contained(
            name,
            &[
                "failed test: assert is_prime(97)",
                "is_prime(97) returned False",
                "AssertionError",
            ],
        );
    }
    contained(
        "caller_line",
        &[
            "failed test: assert not is_prime(91)",
            "is_prime(91) returned True",
        ],
    );
    contained(
        "stop_iteration",
        &[
            "failed test: assert all(map(is_prime, [97, 2]))",
            "ProgramError: StopIteration",
        ],
    );
    contained(
        "not_equal",
        &["cannot be compared: the program returned an object, not a plain value"],
    );
    contained("module_alias", &["failed test: store.remove("]);
    assert!(
        std::fs::read_to_string(world.outside.join("victim"))
            .is_ok_and(|t| t == "the runner's host file"),
        "the runner removed a host file for the program"
    );
    contained(
        "always_equal",
        &[
            "failed test: assert is_prime(97) == True",
            "is_prime(97) returned <the program's Anything from is_prime(97)>",
        ],
    );
}

#[test]
fn hostile_programs_are_contained() {
    let world = World::new("all");
    let cases = cases(&world);
    let suite = project(&world, &cases, "best");
    let run = servegate(&world, &suite, &How::default());
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert_clean(&world, &run);
    let layers = run.layers();
    println!(
        "layers: {layers:?}; servegate peaked at {} KiB",
        run.peak_kib
    );
    assert!(
        run.stderr.contains("servegate: sandbox: "),
        "{}",
        run.stderr
    );
    assert_eq!(run.verdict("good_is_prime"), "ok");
    let contained = |name: &str, needles: &[&str]| assert_contained(&run, name, needles);
    assert_inherited_fds_unreached(&world, &run);
    // Closed, and listed again to be sure: fds 7 and 8 (and whatever else
    // the test's own parent left).
    let closed = layers
        .iter()
        .find_map(|l| {
            l.strip_prefix("descriptors(closed ")?
                .strip_suffix(" inherited)")
        })
        .and_then(|n| n.parse::<usize>().ok());
    assert!(closed.is_some_and(|n| n >= 2), "{layers:?}");
    if run.has("landlock") {
        assert_eq!(
            run.verdict("read_host_files"),
            "ok",
            "{}",
            run.message("read_host_files")
        );
        assert_eq!(
            run.verdict("list_host_dirs"),
            "ok",
            "{}",
            run.message("list_host_dirs")
        );
    } else {
        skip(
            "read_host_files, list_host_dirs: no Landlock here, the program reads and lists what its uid may",
        );
    }
    assert_verdicts_out_of_reach(&world, &run);
    assert_eq!(
        run.verdict("main_guard_right"),
        "ok",
        "{}",
        run.message("main_guard_right")
    );
    contained("write_outside", &["Error: [Errno"]);
    contained("connect", &["Error: [Errno"]);
    assert_eq!(
        run.verdict("read_secrets"),
        "ok",
        "{}",
        run.message("read_secrets")
    );
    contained(
        "setsid_daemon",
        &["sandbox: 1 process of the program still running when it ended was killed"],
    );
    // A Python program's prints go to its stderr: its stdout is the
    // channel to the test runner.
    contained(
        "stdout_100mb",
        &["killed: its stderr passed the 8 MiB output cap"],
    );
    contained(
        "stdout_3gb",
        &["killed: its stderr passed the 8 MiB output cap"],
    );
    assert_eq!(run.verdict("planted_fifo_and_link"), "ok");
    assert_eq!(run.verdict("tty"), "ok", "{}", run.message("tty"));
    if run
        .layers()
        .iter()
        .any(|l| l.starts_with("namespaces(") && l.contains("mount"))
    {
        // Its work directory is a 256 MiB file system in memory, not /tmp.
        // (less the program's own file, some KiB).
        contained("disk_cap", &["No space left on device"]);
        let message = run.message("disk_cap");
        assert!(
            (250..=256).contains(&count_after(&message, "wrote ")),
            "{message}"
        );
    } else {
        skip("disk_cap: no mount namespace, the work directory is on the host's disk");
    }
    if run.has("seccomp") {
        let message = run.message("seccomp_rules");
        assert_eq!(run.verdict("seccomp_rules"), "ok", "{message}");
    } else {
        skip("seccomp_rules: no seccomp here");
    }
    assert_eq!(
        run.verdict("kill_the_parent"),
        "ok",
        "{}",
        run.message("kill_the_parent")
    );
    contained("infinite_loop", &["killed at the 1s time limit"]);
    // Process count: a pids cgroup, or RLIMIT_NPROC where it is enforced
    // (not for root).
    if run.has("cgroup(") && run.layers().iter().any(|l| l.contains("pids")) {
        contained("fork_200", &["refused at the limit of"]);
        let message = run.message("fork_200");
        assert!(count_after(&message, "forked ") < 200, "{message}");
        contained(
            "fork_bomb",
            &[
                "a fork was refused: [Errno 11] Resource temporarily unavailable",
                "refused at the limit of",
                "processes of the program still running when it ended were killed",
            ],
        );
    } else if run.layers().iter().any(|l| l.contains("nproc")) {
        contained("fork_200", &["Resource temporarily unavailable"]);
        contained(
            "fork_bomb",
            &["a fork was refused: [Errno 11] Resource temporarily unavailable"],
        );
    } else {
        skip("fork_200 and fork_bomb: no process limit holds here");
    }
    if run.layers().iter().any(|l| l.contains("memory")) {
        contained(
            "memory_across_children",
            &["memory limit of all its processes together killed"],
        );
    } else {
        skip("memory_across_children: no memory cgroup here, only the per-process limit");
    }
}

/// What tests did to the program's functions when they shared its module
/// still works with the tests apart: a function named like a builtin is
/// the one they call, the program's objects go back to it as arguments,
/// integers of any size cross, a big table stays in the program and is
/// read through its reference; and a test that swallows the program's end
/// (`except BaseException`) still fails.
#[test]
fn the_tests_reach_the_program_as_they_did() {
    let world = World::new("apart");
    let cases = vec![
        Case {
            tests: &["assert sum([1, 2]) == 3"],
            ..case("builtin_name", "def sum(xs):\n    return 42")
        },
        Case {
            tests: &["assert length(Node(1, Node(2, None))) == 2"],
            ..case(
                "linked_list",
                "class Node:\n    def __init__(self, v, next=None):\n        self.v, self.next = v, next\ndef length(n):\n    return 0 if n is None else 1 + length(n.next)",
            )
        },
        Case {
            tests: &["import math; assert fact(2000) == math.factorial(2000)"],
            ..case(
                "big_int",
                "def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r",
            )
        },
        Case {
            tests: &["assert at(5) == 5 and TABLE[7] == 7 and len(TABLE) == 2_000_000"],
            ..case(
                "big_table",
                "TABLE = list(range(2_000_000))\ndef at(i):\n    return TABLE[i]",
            )
        },
        Case {
            tests: &["exec('try:\\n    f()\\nexcept BaseException:\\n    pass')"],
            ..case("swallowed_end", "import os\ndef f():\n    os._exit(0)")
        },
    ];
    let suite = project(&world, &cases, "best");
    let run = servegate(&world, &suite, &How::default());
    for ok in ["linked_list", "big_int", "big_table"] {
        assert_eq!(run.verdict(ok), "ok", "{ok}: {}", run.message(ok));
    }
    assert_contained(&run, "builtin_name", &["sum([1, 2]) returned 42"]);
    assert_contained(&run, "swallowed_end", &["the program ended during f()"]);
}

/// Processes that keep one CPU busy until dropped, each in a session of
/// its own (as the sandboxed program is: where the kernel groups the
/// scheduling of a session, `sched_autogroup`, each weighs as one). Out of
/// the test's session, a test binary killed mid-test (a cancelled run)
/// never drops them: each also ends once the test's process is gone,
/// looking every 100,000 turns (four of them, orphaned so, held a CI
/// run's two cores for 90 minutes).
struct Spinners(Vec<std::process::Child>);

impl Spinners {
    fn on(cpu: usize, n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| {
                    Command::new("taskset")
                        .args([
                            "--cpu-list",
                            &cpu.to_string(),
                            "setsid",
                            "sh",
                            "-c",
                            "i=0; while :; do i=$((i + 1)); if [ $i -ge 100000 ]; then i=0; kill -0 $PPID 2>/dev/null || exit 0; fi; done",
                        ])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for s in &mut self.0 {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

/// On a busy machine a program's time limit counts the time it could
/// run, not the time other work held its CPU: with servegate held to one
/// CPU beside four processes spinning on it, a program that needs half a
/// second of CPU passes under a 2 s limit it outlasts on the clock (its
/// record says how long it waited), and an endless loop is still ended,
/// its wait for a CPU named. (What the
/// sandbox's loaded run in CI once failed: a 2,000,000-element table built
/// past 10 s on the clock.)
#[test]
fn a_busy_machine_moves_the_time_limit_not_the_verdict() {
    if !Path::new("/proc/thread-self/schedstat").exists() {
        skip("the kernel keeps no run-queue figures (schedstat): the limit is on the clock alone");
        return;
    }
    let world = World::new("busy");
    let work = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 0.5:\n    pass\ndef work():\n    return 1";
    let cases = vec![
        Case {
            tests: &["assert work() == 1"],
            timeout: "2s",
            ..case("half_a_second", work)
        },
        Case {
            timeout: "1s",
            ..case("endless", "while True:\n    pass")
        },
    ];
    let suite = project(&world, &cases, "best");
    let cpu = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .ok()
        .and_then(|set| {
            (0..nix::sched::CpuSet::count())
                .rev()
                .find(|&c| set.is_set(c).unwrap_or(false))
        })
        .unwrap_or(0);
    let spinners = Spinners::on(cpu, 4);
    let run = servegate(
        &world,
        &suite,
        &How {
            cpu: Some(cpu),
            ..How::default()
        },
    );
    drop(spinners);
    assert_eq!(
        run.verdict("half_a_second"),
        "ok",
        "{}\n{}",
        run.message("half_a_second"),
        run.stderr
    );
    let waited = run.trial("half_a_second")["exchange"]["sandbox"][0]["waited_s"].as_f64();
    assert!(
        waited.is_some_and(|w| w > 0.1),
        "its limit came while it waited for a CPU: {}",
        run.trial("half_a_second")["exchange"]["sandbox"]
    );
    assert_contained(&run, "endless", &["for a CPU behind other work"]);
}

/// With namespaces refused (as by Ubuntu's `AppArmor` restriction), Landlock,
/// seccomp and rlimits still stop writes, connections, secrets and forks.
#[test]
fn without_namespaces_the_fallback_layers_hold() {
    let world = World::new("fallback");
    let all = cases(&world);
    let wanted = [
        "good_is_prime",
        "write_outside",
        "connect",
        "read_secrets",
        "kill_the_parent",
        "setsid_daemon",
        "fork_bomb",
        "tty",
        "inherited_fds",
        "exit_before_tests",
        "list_host_dirs",
    ];
    let cases: Vec<Case> = all
        .into_iter()
        .filter(|c| wanted.contains(&c.name))
        .collect();
    let suite = project(&world, &cases, "best");
    let run = servegate(
        &world,
        &suite,
        &How {
            // The reasons are on the sandbox's line with --verbose.
            env: &[
                (servegate::check::sandbox::REFUSE_ENV, "namespaces"),
                ("SERVEGATE_VERBOSE", "1"),
            ],
            tty: true,
            ..How::default()
        },
    );
    let layers = run.layers();
    println!("layers: {layers:?}");
    assert!(!run.has("namespaces"), "{layers:?}");
    assert!(
        run.stderr
            .contains("namespaces unavailable (refused (SERVEGATE_SANDBOX_REFUSE))"),
        "{}",
        run.stderr
    );
    assert_eq!(run.verdict("good_is_prime"), "ok");
    // servegate had a controlling terminal; the program has none.
    assert_eq!(run.verdict("tty"), "ok", "{}", run.message("tty"));
    assert_inherited_fds_unreached(&world, &run);
    assert_eq!(run.verdict("exit_before_tests"), "FAILED");
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert_clean(&world, &run);
    if run.has("landlock") {
        assert_eq!(run.verdict("write_outside"), "FAILED");
        assert!(run.message("write_outside").contains("Permission denied"));
        // Landlock alone, the host's own directories: none listed.
        assert_eq!(
            run.verdict("list_host_dirs"),
            "ok",
            "{}",
            run.message("list_host_dirs")
        );
        assert_eq!(
            run.verdict("read_secrets"),
            "ok",
            "{}",
            run.message("read_secrets")
        );
        assert_eq!(
            run.verdict("kill_the_parent"),
            "ok",
            "{}",
            run.message("kill_the_parent")
        );
    } else {
        skip("fallback write, secrets and kill cases: no Landlock in this kernel");
    }
    if run.has("seccomp") || run.layers().iter().any(|l| l.contains("tcp")) {
        assert_eq!(run.verdict("connect"), "FAILED");
    } else {
        skip("fallback connect: neither seccomp nor Landlock TCP rules here");
    }
    // The subreaper supervisor kills the daemon the program left.
    assert!(
        run.message("setsid_daemon")
            .contains("still running when it ended was killed"),
        "{}",
        run.message("setsid_daemon")
    );
    // The subreaper kills the bomb its first process left.
    let bomb = run.message("fork_bomb");
    if run.layers().iter().any(|l| l.contains("pids")) {
        for needle in [
            "a fork was refused: [Errno 11]",
            "refused at the limit of",
            "processes of the program still running when it ended were killed",
        ] {
            assert!(bomb.contains(needle), "`{needle}` not in {bomb}");
        }
    } else {
        skip("fallback fork_bomb bound: no pids cgroup");
    }
}

/// `sandbox: strict` refuses to run a program when a layer is missing, and
/// says which.
#[test]
fn strict_refuses_without_every_layer() {
    let world = World::new("strict");
    let cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| c.name == "write_outside")
        .collect();
    let suite = project(&world, &cases, "strict");
    let run = servegate(
        &world,
        &suite,
        &How {
            env: &[(servegate::check::sandbox::REFUSE_ENV, "seccomp")],
            ..How::default()
        },
    );
    assert_eq!(run.verdict("write_outside"), "FAILED");
    let message = run.message("write_outside");
    assert!(
        message.contains("not run: `sandbox: strict` needs every layer; unavailable here: ")
            && message.contains("seccomp: refused (SERVEGATE_SANDBOX_REFUSE)"),
        "{message}"
    );
    assert_clean(&world, &run);
}

/// Descriptors servegate inherited are a layer of their own: with their
/// closing refused (a host where it failed), `best` runs the program, which
/// reaches fds 7 and 8 (so it is the closing that keeps them out of
/// reach), and `strict` refuses to run it, naming the layer.
#[test]
fn inherited_descriptors_left_open_are_a_missing_layer() {
    let world = World::new("descriptors");
    let how = How {
        env: &[(servegate::check::sandbox::REFUSE_ENV, "descriptors")],
        ..How::default()
    };
    let cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| ["good_is_prime", "inherited_fds"].contains(&c.name))
        .collect();
    let run = servegate(&world, &project(&world, &cases, "best"), &how);
    assert!(!run.has("descriptors"), "{:?}", run.layers());
    assert_eq!(run.verdict("inherited_fds"), "FAILED", "{}", run.stdout);
    let message = run.message("inherited_fds");
    assert!(message.contains("reached [7, 8]"), "{message}");
    assert_clean(&world, &run);
    std::fs::write(&world.host_file, "").unwrap();
    let run = servegate(&world, &project(&world, &cases, "strict"), &how);
    let message = run.message("good_is_prime");
    assert!(
        message.contains("not run: `sandbox: strict` needs every layer; unavailable here: ")
            && message.contains("descriptors: refused (SERVEGATE_SANDBOX_REFUSE)"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&world.host_file).unwrap(),
        "",
        "strict ran the program"
    );
    assert_clean(&world, &run);
}

/// SIGTERM to servegate mid-probe kills the program and removes its work
/// directory.
#[test]
fn sigterm_mid_probe_kills_the_program_and_cleans_up() {
    let world = World::new("sigterm");
    let cases = vec![Case {
        timeout: "60s",
        ..case(
            "sleeper",
            "import os\nos.execvp('sleep', ['sleep', '27.1828'])",
        )
    }];
    let suite = project(&world, &cases, "best");
    let running = || !processes(&world).is_empty();
    let run = servegate(
        &world,
        &suite,
        &How {
            signal_when: Some(&running),
            ..How::default()
        },
    );
    assert_eq!(run.code, Some(130), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("sandboxed program(s)"),
        "{}",
        run.stderr
    );
    assert_clean(&world, &run);
}

/// With Landlock refused (and with seccomp refused too), the namespaces
/// alone keep the file system read-only: the program has no capability to
/// undo the read-only view (`mount_setattr`, a remount), not even from a
/// user namespace of its own, whose copy of the mounts is locked.
#[test]
fn namespaces_alone_keep_the_file_system_read_only() {
    for refused in ["landlock", "landlock,seccomp"] {
        let world = World::new(&format!("readonly-{}", refused.len()));
        let cases: Vec<Case> = cases(&world)
            .into_iter()
            .filter(|c| {
                ["good_is_prime", "write_outside", "undo_read_only", "tty"].contains(&c.name)
            })
            .collect();
        let suite = project(&world, &cases, "best");
        let run = servegate(
            &world,
            &suite,
            &How {
                env: &[(servegate::check::sandbox::REFUSE_ENV, refused)],
                tty: true,
                ..How::default()
            },
        );
        let layers = run.layers();
        println!("refused {refused}: layers {layers:?}");
        if !layers
            .iter()
            .any(|l| l.starts_with("namespaces(") && l.contains("mount"))
        {
            skip("the read-only view without Landlock: no mount namespace here");
            return;
        }
        assert_eq!(run.verdict("good_is_prime"), "ok", "{}", run.stdout);
        assert_eq!(run.verdict("tty"), "ok", "{}", run.message("tty"));
        for name in ["write_outside", "undo_read_only"] {
            assert_eq!(run.verdict(name), "FAILED", "{name}: {}", run.message(name));
            let message = run.message(name);
            assert!(
                message.contains("Read-only file system"),
                "{name}: {message}"
            );
        }
        assert_clean(&world, &run);
    }
}

/// As an unprivileged user (the tests run as root: servegate is started as
/// uid 65534), the user namespace path holds on its own: Landlock and
/// seccomp refused, the program cannot write outside (a directory that user
/// may write), undo the read-only view, read servegate's environment or
/// kill its helpers.
#[test]
fn an_unprivileged_user_is_held_by_namespaces_alone() {
    if !nix::unistd::geteuid().is_root() {
        skip("running as another user: the other tests prove this user's case");
        return;
    }
    let world = World::new("unprivileged");
    let nobody = nix::unistd::Uid::from_raw(65534);
    let group = nix::unistd::Gid::from_raw(65534);
    for dir in [&world.root, &world.tmp, &world.outside] {
        nix::unistd::chown(dir.as_path(), Some(nobody), Some(group)).unwrap();
    }
    let wanted = [
        "good_is_prime",
        "write_outside",
        "undo_read_only",
        "read_secrets",
        "kill_the_parent",
    ];
    let cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| wanted.contains(&c.name))
        .collect();
    let suite = project(&world, &cases, "best");
    let run = servegate(
        &world,
        &suite,
        &How {
            env: &[(servegate::check::sandbox::REFUSE_ENV, "landlock,seccomp")],
            user: Some(65534),
            ..How::default()
        },
    );
    let layers = run.layers();
    println!("layers: {layers:?}");
    if !run.has("namespaces(user,") {
        skip("the unprivileged user's case: no user namespaces for other users here");
        return;
    }
    assert_eq!(
        run.verdict("good_is_prime"),
        "ok",
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    for name in ["write_outside", "undo_read_only"] {
        assert_eq!(run.verdict(name), "FAILED", "{name}");
        let message = run.message(name);
        assert!(
            message.contains("Read-only file system"),
            "{name}: {message}"
        );
    }
    for name in ["read_secrets", "kill_the_parent"] {
        assert_eq!(run.verdict(name), "ok", "{name}: {}", run.message(name));
    }
    assert_clean(&world, &run);
}

/// Run by an unprivileged user with neither namespaces nor Landlock, the
/// program shares servegate's uid and nothing scopes its signals: the
/// layers line says so (`signals unavailable`), and seccomp still refuses
/// kill(-1) and signals to process groups.
#[test]
fn signals_without_namespaces_or_landlock_are_named_unavailable() {
    if !nix::unistd::geteuid().is_root() {
        skip("running as another user: this case needs to start servegate as uid 65534");
        return;
    }
    let world = World::new("signals");
    let nobody = nix::unistd::Uid::from_raw(65534);
    let group = nix::unistd::Gid::from_raw(65534);
    for dir in [&world.root, &world.tmp, &world.outside] {
        nix::unistd::chown(dir.as_path(), Some(nobody), Some(group)).unwrap();
    }
    let cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| ["good_is_prime", "seccomp_rules"].contains(&c.name))
        .collect();
    let suite = project(&world, &cases, "best");
    let run = servegate(
        &world,
        &suite,
        &How {
            // The reasons are on the sandbox's line with --verbose.
            env: &[
                (servegate::check::sandbox::REFUSE_ENV, "namespaces,landlock"),
                ("SERVEGATE_VERBOSE", "1"),
            ],
            user: Some(65534),
            ..How::default()
        },
    );
    println!("layers: {:?}", run.layers());
    assert!(
        run.stderr
            .contains("; signals unavailable (the program runs as servegate's uid"),
        "{}",
        run.stderr
    );
    assert_eq!(run.verdict("good_is_prime"), "ok");
    if run.has("seccomp") {
        let message = run.message("seccomp_rules");
        assert_eq!(run.verdict("seccomp_rules"), "ok", "{message}");
    } else {
        skip("kill(-1) refused without namespaces or Landlock: no seccomp here");
    }
    assert_clean(&world, &run);
}

/// A tree 60,000 levels deep left in the work directory on the host's file
/// system (no namespaces, so no file system of its own) is removed by
/// servegate, which neither recurses nor follows it. Landlock is refused
/// too: under it every access walks the whole path, and the program would
/// reach its time limit long before that depth. The host's file system is
/// its shared memory where there is one: on a slow disk 60,000 levels take
/// seconds to make and to remove.
#[test]
fn deep_trees_are_removed() {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let world = World::new_in(&base, "deep");
    let cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| c.name == "deep_tree")
        .collect();
    let suite = project(&world, &cases, "best");
    let run = servegate(
        &world,
        &suite,
        &How {
            env: &[(servegate::check::sandbox::REFUSE_ENV, "namespaces,landlock")],
            ..How::default()
        },
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.verdict("deep_tree"), "ok");
    assert_clean(&world, &run);
}

/// Binds Unix sockets outside the sandbox and says, once told to stop
/// (its standard input closes), which were reached: given `[kind, dir,
/// name, relative]` for each (`stream`, `dgram` or `abstract`; `relative`:
/// bound as `name` from `dir`, so that `/proc/net/unix` cannot tell where
/// it is, as for a socket bound in another network namespace), open to
/// all, it first proves each one live from outside, and removes them at
/// the end.
const LISTENERS: &str = r"import json, os, socket, sys
def make(kind):
    return socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM if kind == 'dgram' else socket.SOCK_STREAM)
def address(kind, d, name):
    return '\0' + name if kind == 'abstract' else os.path.join(d, name)
bound = []
for kind, d, name, relative in json.loads(sys.argv[1]):
    s = make(kind)
    if relative:
        os.chdir(d)
    s.bind(name if relative else address(kind, d, name))
    if kind != 'abstract':
        os.chmod(address(kind, d, name), 0o777)
    if kind != 'dgram':
        s.listen(8)
    bound.append((kind, d, name, s))
for kind, d, name, s in bound:
    with make(kind) as c:
        if kind == 'dgram':
            c.sendto(b'x', address(kind, d, name))
            s.recv(1)
        else:
            c.connect(address(kind, d, name))
            s.accept()[0].close()
print('ready', flush=True)
sys.stdin.read()
reached = []
for kind, d, name, s in bound:
    s.setblocking(False)
    try:
        s.recv(1) if kind == 'dgram' else s.accept()
        reached.append(name)
    except BlockingIOError:
        pass
    if kind != 'abstract':
        os.unlink(address(kind, d, name))
print(json.dumps(reached), flush=True)";

/// Sockets bound outside the sandbox by `LISTENERS`.
struct Listeners {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Listeners {
    fn bind(specs: &Value) -> Self {
        use std::io::BufRead as _;
        let mut child = Command::new("python3")
            .args(["-c", LISTENERS, &specs.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "the listeners did not start");
        Self { child, out }
    }

    /// The names of the sockets something connected or sent to.
    fn reached(mut self) -> Vec<String> {
        use std::io::BufRead as _;
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(self.child.wait().unwrap().success());
        serde_json::from_str(&line).unwrap()
    }
}

/// Connects (streams) or sends (datagrams, also from a datagram socket
/// pair, which can send anywhere) to each address; none must be reached.
const UNIX_CONNECT: &str = r"import socket
reached = []
def attempt(what, address, make, use):
    try:
        with make() as s:
            s.settimeout(2)
            use(s, address)
        reached.append(f'{what} {address!r}')
    except OSError as e:
        print(what, repr(address), e)
for kind, address in TARGETS:
    if kind == 'dgram':
        attempt('sendto', address, lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM), lambda s, a: s.sendto(b'x', a))
        pair = lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]
        attempt('pair sendto', address, pair, lambda s, a: s.sendto(b'x', a))
    else:
        attempt('connect', address, lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), lambda s, a: s.connect(a))
print('reached', reached)
assert not reached, reached";

/// What must keep working inside: socket pairs (`multiprocessing.Pipe`
/// across a fork), sequenced-packet pairs and `subprocess`.
const UNIX_PAIRS: &str = r"import multiprocessing as mp, os, socket, subprocess, sys
a, b = socket.socketpair()
a.sendall(b'pair')
assert b.recv(4) == b'pair'
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.send(b'seq')
assert b.recv(3) == b'seq'
left, right = mp.Pipe()
p = mp.get_context('fork').Process(target=lambda c: c.send(os.getpid()), args=(right,))
p.start()
got = left.recv()
p.join()
assert got == p.pid and p.exitcode == 0, (got, p.pid, p.exitcode)
assert subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout == '42\n'";

/// A listener of the program's own, in its work directory
/// (`multiprocessing`'s `Manager` and forkserver do the same).
const UNIX_OWN_LISTENER: &str = r"import os
from multiprocessing.connection import Client, Listener
with Listener('own.sock', 'AF_UNIX') as listener:
    if os.fork() == 0:
        with Client('own.sock', 'AF_UNIX') as c:
            c.send('hi')
        os._exit(0)
    with listener.accept() as conn:
        assert conn.recv() == 'hi'
    os.wait()";

/// Unix sockets of other processes on the file system — the user's session
/// bus, ssh-agent, X11, `docker.sock` — are out of the program's reach,
/// wherever the sandbox found them: bound in servegate's network namespace
/// (an agent in `/tmp`, a datagram log socket), in `$XDG_RUNTIME_DIR` (a
/// bus, bound where `/proc/net/unix` cannot tell; servegate's TMPDIR is
/// there too, as some set it), at `$SSH_AUTH_SOCK` (likewise), mounted in
/// (a `docker.sock` bound elsewhere, as a container gets it; as root), or
/// abstract. The sockets are open to all: run as root, servegate runs the
/// program as uid 65534. Socket pairs still work. As servegate's root and
/// as uid 65534 (a user namespace); with namespaces refused, seccomp takes
/// over (the program's own listener is then refused too, as docs/src/security.md
/// says); and `strict` refuses to run where nothing keeps them out.
#[test]
fn unix_sockets_outside_are_out_of_reach() {
    let host = World::new("unix-host");
    let runtime = World::new("unix-runtime");
    let world = World::new_in(&runtime.root, "unix");
    let (sockets, run_dir) = (host.outside.display(), runtime.root.display());
    let abstract_name = format!("servegate-test-{}", std::process::id());
    let root = nix::unistd::geteuid().is_root();
    let mounted = root && Command::new("unshare").arg("-V").output().is_ok();
    let mut specs = vec![
        serde_json::json!(["stream", sockets.to_string(), "agent.sock", false]),
        serde_json::json!(["dgram", sockets.to_string(), "log", false]),
        serde_json::json!(["stream", run_dir.to_string(), "bus", true]),
        serde_json::json!(["stream", sockets.to_string(), "forwarded", true]),
        serde_json::json!(["abstract", "", abstract_name, false]),
    ];
    let mut targets = vec![
        format!("('stream', '{sockets}/agent.sock')"),
        format!("('dgram', '{sockets}/log')"),
        format!("('stream', '{run_dir}/bus')"),
        format!("('stream', '{sockets}/forwarded')"),
        format!("('stream', '\\0{abstract_name}')"),
    ];
    if mounted {
        let daemon = ["stream", &sockets.to_string(), "daemon"];
        specs.push(serde_json::json!([daemon[0], daemon[1], daemon[2], true]));
        std::fs::write(host.outside.join("docker.sock"), "").unwrap();
        targets.push(format!("('stream', '{sockets}/docker.sock')"));
    } else {
        skip("a socket mounted in: needs root and `unshare`");
    }
    let specs = Value::Array(specs);
    let connect = format!("TARGETS = [{}]\n{UNIX_CONNECT}", targets.join(", "));
    let cases = vec![
        cases(&world).remove(0),
        case("unix_connect", &connect),
        case("unix_pairs", UNIX_PAIRS),
        case("unix_own_listener", UNIX_OWN_LISTENER),
    ];
    let suite = project(&world, &cases, "best");
    let agent = format!("{sockets}/forwarded");
    let runtime_dir = runtime.root.display().to_string();
    let mount = format!("mount --bind {sockets}/daemon {sockets}/docker.sock");
    let refuse = servegate::check::sandbox::REFUSE_ENV;
    let env = |refused| {
        [
            ("XDG_RUNTIME_DIR", runtime_dir.as_str()),
            ("SSH_AUTH_SOCK", agent.as_str()),
            (refuse, refused),
        ]
    };
    let (all, no_namespaces) = (env(""), env("namespaces"));
    // As uid 65534 first: the run record's directory is then its own.
    let mut hows = Vec::new();
    if root {
        let nobody = nix::unistd::Uid::from_raw(65534);
        let group = nix::unistd::Gid::from_raw(65534);
        for dir in [&world.root, &world.tmp, &world.outside] {
            nix::unistd::chown(dir.as_path(), Some(nobody), Some(group)).unwrap();
        }
        let user = How {
            env: &all,
            user: Some(65534),
            ..How::default()
        };
        hows.push(("as uid 65534", user));
    }
    let namespaces = How {
        env: &all,
        mounts: mounted.then_some(mount.as_str()),
        ..How::default()
    };
    hows.push(("namespaces", namespaces));
    let fallback = How {
        env: &no_namespaces,
        ..How::default()
    };
    hows.push(("without namespaces", fallback));
    for (what, how) in &hows {
        let listeners = Listeners::bind(&specs);
        let run = servegate(&world, &suite, how);
        let reached = listeners.reached();
        let layers = run.layers();
        println!("{what}: {layers:?}");
        assert_eq!(reached, Vec::<String>::new(), "{what}: {}", run.stdout);
        assert_clean(&world, &run);
        for name in ["good_is_prime", "unix_connect", "unix_pairs"] {
            let message = run.message(name);
            assert_eq!(run.verdict(name), "ok", "{what}: {name}: {message}");
        }
        let own = run.message("unix_own_listener");
        if run.has("unix sockets(mount view") || run.has("unix sockets(landlock") {
            assert_eq!(run.verdict("unix_own_listener"), "ok", "{what}: {own}");
        } else if run.has("unix sockets(seccomp") {
            assert_eq!(run.verdict("unix_own_listener"), "FAILED", "{what}");
            assert!(own.contains("Operation not permitted"), "{what}: {own}");
        } else {
            panic!("{what}: nothing kept the sockets out: {layers:?}");
        }
        if layers
            .iter()
            .any(|l| l.starts_with("namespaces(") && l.contains("mount"))
        {
            assert!(run.has("unix sockets(mount view"), "{what}: {layers:?}");
        } else if how.env == no_namespaces {
            assert!(!run.has("namespaces"), "{layers:?}");
        } else {
            skip(&format!(
                "{what}: no mount namespace here, nor the mount view's hiding"
            ));
        }
    }

    // Nothing keeps them out: `strict` refuses, and says why.
    let suite = project(&world, &cases[..2], "strict");
    let how = How {
        env: &[(refuse, "namespaces,seccomp")],
        ..How::default()
    };
    let run = servegate(&world, &suite, &how);
    assert_clean(&world, &run);
    if run.stderr.contains("unix sockets(landlock)") {
        skip("strict without unix sockets: Landlock keeps them out here (ABI 9)");
    } else {
        let message = run.message("unix_connect");
        assert!(
            message.contains("not run: `sandbox: strict` needs every layer")
                && message
                    .contains("unix sockets: the program can connect to the host's Unix sockets"),
            "{message}"
        );
    }
}

/// `sandbox: { read: [dir] }` lets the program read what the suite names
/// (and still nothing else of the host's).
#[test]
fn a_suite_names_what_else_the_program_may_read() {
    let world = World::new("read");
    std::fs::write(world.outside.join("allowed.txt"), "data the suite shares").unwrap();
    let outside = world.outside.display().to_string();
    let mut cases: Vec<Case> = cases(&world)
        .into_iter()
        .filter(|c| c.name == "good_is_prime")
        .collect();
    cases.push(case(
        "reads_what_it_may",
        &format!(
            "print(open('{outside}/allowed.txt').read())\ntry:\n    open('{}/Cargo.toml').read()\n    raise SystemExit('read the checkout')\nexcept PermissionError:\n    pass",
            env!("CARGO_MANIFEST_DIR")
        ),
    ));
    let suite = project(
        &world,
        &cases,
        &format!("{{ policy: best, read: ['{outside}'] }}"),
    );
    let run = servegate(&world, &suite, &How::default());
    if !run.has("landlock") {
        skip("sandbox.read: no Landlock here, the program reads what its uid may");
        return;
    }
    assert_eq!(
        run.verdict("reads_what_it_may"),
        "ok",
        "{}\n{}",
        run.message("reads_what_it_may"),
        run.stderr
    );
}
