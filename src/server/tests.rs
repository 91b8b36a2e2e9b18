use super::ports::{LOWEST_PORT, ephemeral_start};
use super::*;

#[test]
fn secrets_in_argv_are_redacted() {
    let argv: Vec<String> = [
        "sglang",
        "--api-key",
        "s3cret",
        "--hf-token=abc",
        "--tp-size",
        "8",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(
        redact_argv(&argv),
        [
            "sglang",
            "--api-key",
            "<redacted>",
            "--hf-token=<redacted>",
            "--tp-size",
            "8"
        ]
    );
    assert_eq!(
        shell_line(&["a b".to_owned(), "it's".to_owned(), "{port}".to_owned()]),
        r"'a b' 'it'\''s' '{port}'"
    );
}

/// Each `{free_port.NAME}` gets a port of its own, the same wherever the
/// name is written, and every placeholder is replaced where it stands.
#[test]
fn free_ports_and_worker_urls_are_filled_in() {
    let texts: Vec<String> = [
        "--metrics-port={free_port.metrics}",
        "{free_port.nccl}",
        "again {free_port.metrics}",
        "{free_port.unclosed",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut names = free_ports(texts.iter(), "127.0.0.1").unwrap();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_ne!(names[0].1, names[1].1);
    names.push(("{worker.a}".to_owned(), "http://127.0.0.1:9".to_owned()));
    names.push(("{worker.ab}".to_owned(), "http://127.0.0.1:10".to_owned()));
    assert_eq!(
        fill("{worker.ab} {worker.a}", "h", 7, &names),
        "http://127.0.0.1:10 http://127.0.0.1:9"
    );
    let metrics = &names[0].1;
    assert_eq!(
        fill(
            "{host}:{port} {free_port.metrics} {worker.a} {free_port.metrics}",
            "h",
            7,
            &names
        ),
        format!("h:7 {metrics} http://127.0.0.1:9 {metrics}")
    );
    assert_eq!(
        fill("{free_port.unclosed", "h", 7, &names),
        "{free_port.unclosed"
    );
}

/// A launched server's port is one no `bind(0)` of another process is
/// given (where the kernel says its ephemeral range), and never one
/// handed out before in the run.
#[test]
fn free_ports_are_below_the_ephemeral_range_and_never_repeat() {
    let ports: Vec<u16> = (0..50).map(|_| free_port("127.0.0.1").unwrap()).collect();
    let mut unique = ports.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ports.len(), "{ports:?}");
    match ephemeral_start() {
        Some(start) => assert!(
            ports.iter().all(|p| (LOWEST_PORT..start).contains(p)),
            "{ports:?} against {start}"
        ),
        None => eprintln!(
            "note: no /proc/sys/net/ipv4/ip_local_port_range here: the fallback (bind(0)) was what ran"
        ),
    }
}
