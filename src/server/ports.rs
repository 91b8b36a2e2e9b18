//! The ports and URLs a launch's command is filled in with: its own port,
//! its second ports (`{free_port.NAME}`) and its workers' URLs.

use std::sync::Mutex;

/// The lowest port handed out below the kernel's ephemeral range.
pub(super) const LOWEST_PORT: u16 = 10_000;

/// The first port of the kernel's ephemeral range, from which it gives
/// `bind(0)` a port (`/proc/sys/net/ipv4/ip_local_port_range`).
pub(super) fn ephemeral_start() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A free TCP port on `host`, below the kernel's ephemeral range where
/// there is one: a port `bind(0)` found free would be free for the next
/// `bind(0)` of any process too — an engine starting beside this one
/// picks its own internal ports that way, and two SGLang workers started
/// together collided so (one's port taken by the other's before it
/// bound it). Random ports from [`LOWEST_PORT`] up are tried, none twice
/// in one run; else the kernel picks one.
pub(super) fn free_port(host: &str) -> Result<u16, String> {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(end) = ephemeral_start().filter(|e| *e > LOWEST_PORT + 1000) {
        let span = u64::from(end - LOWEST_PORT);
        for _ in 0..256 {
            let offset = u16::try_from(crate::random::unpredictable() % span).unwrap_or(0);
            let p = LOWEST_PORT + offset;
            if !given.contains(&p) && std::net::TcpListener::bind((host, p)).is_ok() {
                given.push(p);
                return Ok(p);
            }
        }
    }
    std::net::TcpListener::bind((host, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("could not find a free port on {host}: {e}"))
}

/// `text` with `{port}`, `{host}`, each worker's `{worker.NAME}` (its
/// `http://host:port`) and each `{free_port.NAME}` replaced.
pub(super) fn fill(text: &str, host: &str, port: u16, names: &[(String, String)]) -> String {
    let filled = text
        .replace("{port}", &port.to_string())
        .replace("{host}", host);
    names
        .iter()
        .fold(filled, |t, (name, value)| t.replace(name, value))
}

/// `{free_port.NAME}` in `texts`, each given a free port of `host` (the
/// same NAME, the same port): a second port a server listens on (a
/// router's metrics, a distributed init address), as `{port}` is its
/// first.
pub(crate) fn free_ports<'t>(
    texts: impl Iterator<Item = &'t String>,
    host: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut ports: Vec<(String, String)> = Vec::new();
    for text in texts {
        for (at, _) in text.match_indices("{free_port.") {
            let Some(end) = text[at..].find('}') else {
                continue;
            };
            let name = &text[at..=at + end];
            if !ports.iter().any(|(n, _)| n == name) {
                ports.push((name.to_owned(), free_port(host)?.to_string()));
            }
        }
    }
    Ok(ports)
}
