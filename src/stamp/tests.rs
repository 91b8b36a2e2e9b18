use std::time::{Duration, SystemTime};

use super::*;

/// With the kernel's schedstat, a wake is dated less the time the
/// thread waited and ran since it fell asleep; on a kernel without it
/// (simulated: `None`), at the moment it fell asleep; never earlier.
#[test]
fn a_wake_is_dated_by_schedstat_or_by_the_sleep() {
    let parked = Instant::now();
    let now = parked + Duration::from_millis(30);
    // Slept 20 ms, then waited 8 ms for a CPU and ran 1 ms.
    let sched = Some(((5_000_000, 9_000_000), (4_000_000, 1_000_000)));
    assert_eq!(
        dated_wake(now, parked, sched, WAKE_SLACK),
        now.checked_sub(Duration::from_millis(9) + WAKE_SLACK)
            .unwrap()
    );
    assert_eq!(dated_wake(now, parked, None, WAKE_SLACK), parked);
    // More time accounted than passed: no earlier than the sleep.
    let huge = Some(((u64::MAX / 2, 0), (0, 0)));
    assert_eq!(dated_wake(now, parked, huge, WAKE_SLACK), parked);
}

/// A read that found bytes stamped before its wake teaches the thread
/// a longer path from stamp to wake: its next wake is dated earlier by
/// twice that, and the excess is forgotten by halves after a second.
#[test]
fn a_late_wake_widens_the_next_ones() {
    let seen = Instant::now();
    let w = Wake {
        late: Duration::from_millis(1),
        late_seen: Some(seen),
        ..Wake::default()
    };
    let at = |ms: u64| w.late_now(seen + Duration::from_millis(ms));
    assert_eq!(at(0), Duration::from_millis(1));
    assert_eq!(at(1_500), Duration::from_millis(1));
    assert_eq!(at(2_500), Duration::from_micros(500));
    assert_eq!(at(40_000), Duration::ZERO);
    assert_eq!(Wake::default().late_now(seen), Duration::ZERO);
    // On a thread of its own: a sleep of 30 ms, then a wake dated at
    // least 10 ms before the resume (slack + 2 × 5 ms), and never
    // before the sleep. Without the excess it would be dated within
    // microseconds of the resume on an idle machine.
    std::thread::spawn(|| {
        woke_late(Duration::from_millis(5));
        parking();
        let parked = Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let resumed = Instant::now();
        unparked();
        let woke = woke().expect("a sleep was seen");
        assert!(woke >= parked.checked_sub(Duration::from_millis(1)).unwrap());
        assert!(
            woke <= resumed.checked_sub(Duration::from_millis(10)).unwrap(),
            "dated {:?} before the resume",
            resumed.saturating_duration_since(woke)
        );
    })
    .join()
    .unwrap();
}

#[test]
fn a_stamp_becomes_a_monotonic_instant_in_the_window() {
    let floor = Instant::now();
    std::thread::sleep(Duration::from_millis(30));
    let ten_ms_ago = SystemTime::now() - Duration::from_millis(10);
    let at = arrival(Some(ten_ms_ago), floor);
    let ago = at.elapsed();
    assert!(ago >= Duration::from_millis(10), "{ago:?}");
    assert!(ago < Duration::from_millis(25), "{ago:?}");
    // A stamp from before the window (a wall-clock step) is the floor.
    let stepped = SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(arrival(Some(stepped), floor), floor);
    // A stamp from the future is now.
    let future = SystemTime::now() + Duration::from_secs(3600);
    assert!(arrival(Some(future), floor) >= at);
}

/// A request's going is dated by the kernel's transmit stamp: a
/// thread that was kept 100 ms between its write and its clock read
/// (simulated: the clock is read after a sleep) still dates the write
/// when its bytes left; every stamp is taken, so the next call has
/// none and says when its own write returned.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test]
async fn transmit_stamps_date_a_write_by_its_bytes_going() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    enable_sends(&client);
    let (mut server, _) = listener.accept().await.unwrap();
    let began = Instant::now();
    client.write_all(b"POST / HTTP/1.1\r\n\r\n").await.unwrap();
    let wrote = Instant::now();
    let mut buf = [0u8; 64];
    let _ = server.read(&mut buf).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let returned = Instant::now();
    let at = sent(&client, began, returned);
    assert!(at >= began, "dated before the write began");
    assert!(
        at <= wrote + Duration::from_millis(20),
        "dated {:?} after the write returned, the clock read 100ms after it",
        at.saturating_duration_since(wrote)
    );
    let later = Instant::now();
    assert_eq!(sent(&client, began, later), later, "a stamp left behind");
}

/// Bytes that wait in the kernel are dated when they arrived, not when
/// they were read.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test]
async fn kernel_stamps_date_bytes_by_their_arrival() {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect(addr).await.unwrap();
    enable(&client);
    let (mut server, _) = listener.accept().await.unwrap();
    // The kernel turns stamping on from a work queue when the first
    // socket asks for it: packets in the next moments may go unstamped
    // (and are dated by the clock at the read instead).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let floor = Instant::now();
    server.write_all(b"token").await.unwrap();
    let written = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut buf = [0u8; 64];
    let (n, at, _) = recv(&client, &mut buf, floor).await.unwrap();
    assert_eq!(&buf[..n], b"token");
    let late = at.saturating_duration_since(written);
    assert!(
        late < Duration::from_millis(50),
        "dated {late:?} after the write, read 200ms after it"
    );
}
