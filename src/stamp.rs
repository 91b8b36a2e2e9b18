//! Reading a socket together with the time its bytes reached this host
//! (the client's transport, and the stamped simulator's requests).
//!
//! A token's arrival is the moment its bytes arrived, not the moment the
//! client got round to reading them: with hundreds of streams on one core,
//! tokens that arrive together are read one after another, and a clock read
//! in user space would charge the last of them with the time spent on the
//! others. On Linux the kernel stamps every received packet
//! (`SO_TIMESTAMPNS`) and `recvmsg` hands the stamp of the newest packet
//! read back; elsewhere the stamp is the clock read after `read` returns.
//! A client's request is dated the same way at its other end: when the
//! kernel sent its last byte (a transmit stamp, [`sent`]).

use std::io;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

/// Asks the kernel to stamp what this connection receives. Where that is
/// refused, reads fall back to the user-space clock — as do the packets of
/// the first moments after the first socket of the machine asks (the kernel
/// switches stamping on from a work queue).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn enable(conn: &TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
    let _ = setsockopt(conn, ReceiveTimestampns, &true);
}

/// Asks the kernel to stamp what this connection receives (not here).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn enable(_conn: &TcpStream) {}

/// Asks the kernel also to stamp when what this connection sends leaves
/// for the wire (`SO_TIMESTAMPING`, software transmit stamps: one per
/// write, for its last byte, queued on the socket's error queue and read
/// by [`sent`]). A client's request is then dated by the kernel at both
/// ends: a thread preempted as its write returned wrote the request all
/// the same. For the client's connections only: a server's every token
/// would queue one.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn enable_sends(conn: &TcpStream) {
    use nix::sys::socket::{TimestampingFlag as F, setsockopt, sockopt::Timestamping};
    let flags = F::SOF_TIMESTAMPING_TX_SOFTWARE
        | F::SOF_TIMESTAMPING_SOFTWARE
        | F::SOF_TIMESTAMPING_OPT_ID
        | F::SOF_TIMESTAMPING_OPT_TSONLY;
    let _ = setsockopt(conn, Timestamping, &flags);
}

/// Asks the kernel to stamp what this connection sends (not here).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn enable_sends(_conn: &TcpStream) {}

/// When the last bytes of the writes since the previous call left this
/// host: the newest transmit stamp on `conn`'s error queue (every stamp
/// there is taken, so none is left for the next request), kept within
/// `[began, returned]` — the write began and returned then, and a stamp
/// outside (a wall-clock step, an earlier write's) can say nothing more.
/// `returned` where the kernel has no stamp to give.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn sent(conn: &TcpStream, began: Instant, returned: Instant) -> Instant {
    use std::os::fd::AsRawFd as _;

    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

    let mut newest = None;
    // A stamp, its `sock_extended_err` and room to spare, per message.
    let mut control = [0u8; 256];
    for _ in 0..MAX_SENT_STAMPS {
        let Ok(msg) = recvmsg::<()>(
            conn.as_raw_fd(),
            &mut [],
            Some(&mut control),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) else {
            break;
        };
        let stamp = msg.cmsgs().ok().and_then(|mut messages| {
            messages.find_map(|m| match m {
                ControlMessageOwned::ScmTimestampsns(ts) => Some(ts.system),
                _ => None,
            })
        });
        if let Some(at) = stamp.and_then(|ts| wall(&ts)) {
            newest = newest.max(Some(at));
        }
    }
    newest.map_or(returned, |stamp| within(stamp, began, Some(returned)))
}

/// The most transmit stamps [`sent`] reads at once: a request is one write
/// or a few; a connection that queued more gives up the rest.
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_SENT_STAMPS: usize = 16;

/// When the writes' last bytes left (no transmit stamps here: when the
/// write returned).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn sent(_conn: &TcpStream, _began: Instant, returned: Instant) -> Instant {
    returned
}

/// A kernel `timespec` as a wall-clock time.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn wall(ts: &nix::sys::time::TimeSpec) -> Option<std::time::SystemTime> {
    let secs = u64::try_from(ts.tv_sec()).ok()?;
    let nanos = u32::try_from(ts.tv_nsec()).ok()?;
    Some(std::time::UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Reads what is there into `buf`: the byte count (0 at the end of the
/// stream), when those bytes arrived, and when the read that took them
/// began. The arrival is kept within
/// `[floor, now]`, `floor` being when the previous read returned (anything
/// that was there then was read then), so a step of the wall clock between
/// the kernel's stamp and this read cannot produce a time outside the
/// window in which the bytes can have come.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub async fn recv(
    conn: &TcpStream,
    buf: &mut [u8],
    floor: Instant,
) -> io::Result<(usize, Instant, Instant)> {
    use std::os::fd::AsRawFd as _;

    use tokio::io::Interest;

    let fd = conn.as_raw_fd();
    let room = buf.len();
    loop {
        conn.readable().await?;
        let mut drained = None;
        let read = conn.try_io(Interest::READABLE, || {
            let got = read_stamped(fd, buf, floor)?;
            // A read that took less than it had room for emptied the
            // socket: its readiness goes with it (as tokio's own reads
            // do), so the next read waits for the next packet instead of
            // asking the kernel once more only to hear `EAGAIN` — one
            // system call of every paced token. A packet that lands in
            // between is reported by the next `epoll_wait` all the same.
            if got.0 > 0 && got.0 < room {
                drained = Some(got);
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(got)
        });
        match read {
            Ok(got) => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if let Some(got) = drained {
                    return Ok(got);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// One `recvmsg` of `fd` into `buf` with the kernel's stamp of the newest
/// packet read: the byte count, its arrival and when the read began.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_stamped(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
    floor: Instant,
) -> io::Result<(usize, Instant, Instant)> {
    use std::io::IoSliceMut;

    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

    // Taken before the call that empties the socket: whatever arrives
    // after it is left for the next read, stamped later than this.
    let began = Instant::now();
    // Room for a `struct timespec` control message and, on a connection
    // that also asks for transmit stamps ([`enable_sends`]), the
    // `SO_TIMESTAMPING` one the kernel then adds to every read.
    let mut control = [0u8; 128];
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(&mut control), MsgFlags::empty())?;
    let stamp = msg.cmsgs().ok().and_then(|mut messages| {
        messages.find_map(|m| match m {
            ControlMessageOwned::ScmTimestampns(ts) => Some(ts),
            _ => None,
        })
    });
    let at = stamp.and_then(|ts| wall(&ts));
    Ok((msg.bytes, arrival(at, floor), began))
}

/// Reads what is there into `buf`: the byte count (0 at the end of the
/// stream) and when the read returned (no kernel stamps here).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub async fn recv(
    conn: &TcpStream,
    buf: &mut [u8],
    floor: Instant,
) -> io::Result<(usize, Instant, Instant)> {
    loop {
        conn.readable().await?;
        let began = Instant::now();
        match conn.try_read(buf) {
            Ok(n) => return Ok((n, arrival(None, floor), began)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// A monotonic instant as microseconds since the epoch (the wall clock
/// read now, less the time since `at`).
pub(crate) fn epoch_micros(at: Instant) -> u128 {
    let (now, wall) = clocks();
    let wall = wall - now.saturating_duration_since(at);
    wall.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// The monotonic clock and the wall clock at one moment: the wall clock
/// read on both sides of the monotonic one, the tightest of three tries. A
/// thread preempted between two plain reads would shift by that pause
/// every stamp converted with them (a response head dated before the
/// request it answers was written).
fn clocks() -> (Instant, std::time::SystemTime) {
    let mut best: Option<(Duration, Instant, std::time::SystemTime)> = None;
    for _ in 0..3 {
        let before = std::time::SystemTime::now();
        let mono = Instant::now();
        let after = std::time::SystemTime::now();
        // A wall clock stepped back between the reads: the widest gap.
        let gap = after.duration_since(before).unwrap_or(Duration::MAX);
        let wall = before + gap.min(Duration::from_secs(1)) / 2;
        if best.as_ref().is_none_or(|(g, ..)| gap < *g) {
            best = Some((gap, mono, wall));
        }
        if gap < Duration::from_micros(5) {
            break;
        }
    }
    best.map_or_else(
        || (Instant::now(), std::time::SystemTime::now()),
        |(_, mono, wall)| (mono, wall),
    )
}

/// The monotonic instant of a wall-clock stamp, within `[floor, now]`;
/// now when there is no stamp.
fn arrival(stamp: Option<std::time::SystemTime>, floor: Instant) -> Instant {
    match stamp {
        Some(stamp) => within(stamp, floor, None),
        None => Instant::now(),
    }
}

/// The monotonic instant of a wall-clock stamp, kept within `[lo, hi]`
/// (`hi`: now when `None`).
fn within(stamp: std::time::SystemTime, lo: Instant, hi: Option<Instant>) -> Instant {
    let (now, wall) = clocks();
    let hi = hi.unwrap_or(now);
    let ago = wall.duration_since(stamp).unwrap_or_default();
    now.checked_sub(ago).unwrap_or(lo).clamp(lo.min(hi), hi)
}

/// When the bytes of one read arrived, and since when the others read with
/// them can have been waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The newest packet's arrival (its kernel stamp): the time every byte
    /// of the read is dated with.
    pub at: Instant,
    /// The earliest any older byte of the read can have arrived: the
    /// connection's previous read that emptied it, or the thread's last
    /// wake (`woke`), whichever is later. Bytes dated `at` that were
    /// really earlier were early by at most `at − since`.
    pub since: Instant,
}

/// When this thread last woke from sleep: the earliest any bytes it reads
/// before it sleeps again can have arrived. A thread asleep in
/// `epoll_wait` had nothing to read when it fell asleep and is woken by the
/// first packet for it; until it sleeps again, every packet it reads came
/// at or after that wake. Two tokens read together (one stamp for both,
/// the newer) were therefore apart by at most their stamp less this — the
/// bound on what a late read moved. A park that did not sleep (something
/// was ready already) continues the same stretch, and keeps its wake.
///
/// The wake is the resume less the time the thread then waited for a CPU
/// (the kernel's run-queue delay, `/proc/thread-self/schedstat`): a thread
/// woken by a packet and kept off its core by other work still woke when
/// the packet came. Where the delay cannot be read the wake is taken as the
/// moment it fell asleep — earlier, so the bound only grows. `None` on a
/// thread whose runtime does not call [`parking`] and [`unparked`], or
/// where a thread cannot tell whether it slept.
pub(crate) fn woke() -> Option<Instant> {
    WAKE.with(|w| w.get().woke)
}

/// Call as the thread goes idle (tokio's `on_thread_park`).
pub(crate) fn parking() {
    let began = Instant::now();
    let (sleeps, sched) = (sleeps(), schedstat());
    let parked = Instant::now();
    WAKE.with(|w| {
        let mut s = w.get();
        s.parked = Some(parked);
        s.sleeps = sleeps;
        s.sched = sched;
        s.hooks += parked.saturating_duration_since(began);
        w.set(s);
    });
}

/// The time this thread has spent in [`parking`] and [`unparked`] (their
/// system calls): what the self-check's dating of wakes costs it, for
/// bench-client to show.
pub(crate) fn hook_time() -> Duration {
    WAKE.with(|w| w.get().hooks)
}

/// What a wake is dated less, beyond the time the thread is known to have
/// waited and run: the kernel's own path from a packet's stamp to the
/// thread made runnable (protocol processing, a deferred softirq). On an
/// idle host it is a few microseconds; where a read finds bytes stamped
/// before the wake it was dated (that path took longer: softirqs deferred
/// on a busy host, measured up to 106 µs under CI's stress-ng load), the
/// thread's later wakes are dated less twice the excess too ([`woke_late`]).
const WAKE_SLACK: Duration = Duration::from_micros(50);

/// Call when a read after a wake found bytes stamped `excess` before the
/// wake as dated ([`woke`]): the kernel's path from stamp to wake was that
/// much longer than the slack allowed, and the thread's next wakes are
/// dated earlier by twice the largest such excess of the last second (half
/// of it forgotten each second after). A read that found this has no wake
/// to bound its older bytes by; the next ones have.
pub(crate) fn woke_late(excess: Duration) {
    let now = Instant::now();
    WAKE.with(|w| {
        let mut s = w.get();
        s.late = s.late_now(now).max(excess);
        s.late_seen = Some(now);
        w.set(s);
    });
}

/// Call as the thread resumes (tokio's `on_thread_unpark`).
pub(crate) fn unparked() {
    let began = Instant::now();
    let sleeps = sleeps();
    WAKE.with(|w| {
        let mut s = w.get();
        let slept = matches!((sleeps, s.sleeps), (Some(a), Some(b)) if a > b);
        // Only a sleep has a wake to date: a park that found work at once
        // reads no schedstat.
        let sched = if slept { schedstat() } else { None };
        let now = Instant::now();
        if slept && let Some(parked) = s.parked {
            let slack = WAKE_SLACK + 2 * s.late_now(now);
            s.woke = Some(dated_wake(now, parked, sched.zip(s.sched), slack));
        }
        s.hooks += now.saturating_duration_since(began);
        w.set(s);
    });
}

/// When a thread that fell asleep at `parked` and resumed at `now` was
/// woken: `now` less the time it ran and waited for a CPU since it fell
/// asleep (schedstat `(ran, waited)` now and then) and `slack` (the
/// kernel's path from a packet's stamp to the wake); never before it fell
/// asleep. Where the kernel does not say (no schedstat), the moment it fell
/// asleep: earlier, so a bound only grows.
fn dated_wake(
    now: Instant,
    parked: Instant,
    sched: Option<((u64, u64), (u64, u64))>,
    slack: Duration,
) -> Instant {
    let since_woken = match sched {
        Some(((ran, waited), (ran0, waited0))) => {
            Duration::from_nanos(ran.saturating_sub(ran0) + waited.saturating_sub(waited0)) + slack
        }
        None => now.saturating_duration_since(parked),
    };
    now.checked_sub(since_woken)
        .map_or(parked, |w| w.max(parked))
}

/// A thread's sleep and wake.
#[derive(Debug, Clone, Copy, Default)]
struct Wake {
    parked: Option<Instant>,
    woke: Option<Instant>,
    /// Its voluntary context switches as it went idle.
    sleeps: Option<u64>,
    /// Its CPU time and run-queue delay as it went idle, ns.
    sched: Option<(u64, u64)>,
    /// The largest excess of the kernel's stamp-to-wake path over the
    /// slack seen ([`woke_late`]), and when.
    late: Duration,
    late_seen: Option<Instant>,
    /// See [`hook_time`].
    hooks: Duration,
}

impl Wake {
    /// [`Self::late`] at `now`: halved for each whole second since it was
    /// seen, after the first.
    fn late_now(&self, now: Instant) -> Duration {
        let Some(seen) = self.late_seen else {
            return Duration::ZERO;
        };
        let secs = now.saturating_duration_since(seen).as_secs();
        if secs >= 32 {
            return Duration::ZERO;
        }
        #[expect(clippy::cast_possible_truncation, reason = "under 32")]
        let halvings = secs.saturating_sub(1) as u32;
        self.late / 2u32.pow(halvings)
    }
}

thread_local! {
    static WAKE: std::cell::Cell<Wake> = std::cell::Cell::new(Wake::default());
    #[cfg(target_os = "linux")]
    static SCHEDSTAT: Option<std::fs::File> = std::fs::File::open("/proc/thread-self/schedstat").ok();
}

/// How often this thread has blocked (voluntary context switches).
#[cfg(target_os = "linux")]
fn sleeps() -> Option<u64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let n = getrusage(UsageWho::RUSAGE_THREAD)
        .ok()?
        .voluntary_context_switches();
    u64::try_from(n).ok()
}

/// How often this thread has blocked (not known here).
#[cfg(not(target_os = "linux"))]
fn sleeps() -> Option<u64> {
    None
}

/// The time this thread has run on a CPU and spent runnable but waiting
/// for one, ns: the first two fields of `/proc/thread-self/schedstat`.
#[cfg(target_os = "linux")]
fn schedstat() -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt as _;
    SCHEDSTAT.with(|f| {
        let mut buf = [0u8; 96];
        let n = f.as_ref()?.read_at(&mut buf, 0).ok()?;
        let mut fields = std::str::from_utf8(&buf[..n])
            .ok()?
            .split_ascii_whitespace();
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    })
}

/// This thread's CPU and run-queue times (not known here).
#[cfg(not(target_os = "linux"))]
fn schedstat() -> Option<(u64, u64)> {
    None
}

/// The time this thread has spent runnable but waiting for a CPU, ns.
pub(crate) fn run_delay() -> Option<u64> {
    schedstat().map(|(_, waited)| waited)
}

#[cfg(test)]
mod tests;
