//! `servegate init`: a first suite for a server in one command. It asks the
//! server what it serves (the same discovery as a run), runs the starter
//! probes and a short calibration (a single stream, then concurrent
//! streams, with the gates' own load code), and writes a commented suite
//! whose thresholds come from what it measured: probes the server failed
//! are written commented out with the reason, contract checks it broke are
//! left out and named.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::harness::events::TargetLines;
use crate::harness::{Execution, FigureBook, Listener, Listeners, Plan, SuiteRun};
use crate::suite::{Api, Contract, load_text};

mod bounds;
mod render;
use render::render;

/// What `servegate init` is asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// `sim` or the server's URL.
    pub target: String,
    /// The API the server speaks.
    pub api: Api,
    /// Where the suite goes.
    pub out: PathBuf,
    /// Overwrite `out` if it exists.
    pub force: bool,
    /// Streams of the concurrency gate.
    pub concurrency: u32,
    /// `--client-limited`: what a calibration whose client was the
    /// bottleneck does (by default it fails against a server: its figures
    /// would be the client's).
    pub client_limited: Option<crate::suite::OnClientLimited>,
}

/// Why no suite was written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The suite file exists and `--force` was not given.
    #[error("{} exists; `--force` overwrites it", .0.display())]
    Exists(PathBuf),
    /// The target is not `sim` or an http(s) URL.
    #[error(
        "invalid --target `{0}`: expected `sim` or an http(s) URL such as `http://127.0.0.1:30000`"
    )]
    Target(String),
    /// The server could not be reached.
    #[error("{0}")]
    Unreachable(String),
    /// A calibration load failed: no threshold can come from it.
    #[error("the calibration failed, so no threshold can come from it:\n{0}")]
    Calibration(String),
    /// The suite could not be written.
    #[error("failed to write {path}: {err}", path = .0.display(), err = .1)]
    Write(PathBuf, std::io::Error),
}

impl Error {
    /// How `servegate init` ends: what was asked cannot be done, the server
    /// is unreachable, or the calibration or the writing failed.
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            Error::Exists(_) | Error::Target(_) => Exit::Usage,
            Error::Unreachable(_) => Exit::Unreachable,
            Error::Calibration(_) | Error::Write(..) => Exit::Failed,
        }
    }
}

/// The starter probes, as they are written (each item of `correctness:`).
const ARITHMETIC: &str = r#"  - name: arithmetic
    prompt: "What is 2+2?"
    expect:
      - regex: '\b4\b'
      - number: 4
"#;

const IS_PRIME: &str = r#"  - name: is_prime
    prompt: "Write a Python function is_prime(n) that returns True if n is prime."
    max_tokens: 1024
    expect:
      - finish_reason: stop
      - code:                       # the answer's ```python block, run in a sandbox with these appended
          tests:
            - assert is_prime(2) and is_prime(3) and is_prime(97)
            - assert not is_prime(0) and not is_prime(1) and not is_prime(91)
            - assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
"#;

/// The contract probe without its `contract:` line.
const CONTRACT: &str = r#"  - name: server_contract          # the serving API keeps its promises
    prompt: "Count from 1 to 40, separated by spaces. Reply with the numbers only."
    max_tokens: 64
    stop: [" 12"]
"#;

/// A gate's load and the thresholds derived from what it measured.
struct GateSpec {
    name: String,
    load: String,
    what: String,
    /// The figures its thresholds bound, each with its floor above what
    /// was measured (ms) for a latency, `None` for a rate.
    keys: &'static [(&'static str, Option<f64>)],
}

/// The figure one stream and many are compared by: output tokens per
/// second, all streams together.
const THROUGHPUT: &str = "output_tok_s";

fn gates(concurrency: u32) -> [GateSpec; 2] {
    [
        GateSpec {
            name: "single_stream".into(),
            load: "{ concurrency: 1, requests: 3, warmup: 1, input_tokens: 128, output_tokens: 128, ignore_eos: true }".into(),
            what: "a single stream".into(),
            keys: &[("decode_tok_s.mean", None), ("ttft.p99", Some(100.0))],
        },
        GateSpec {
            name: format!("concurrency_{concurrency}"),
            load: format!(
                "{{ concurrency: {concurrency}, requests: {}, warmup: {concurrency}, input_tokens: 256, output_tokens: 64, ignore_eos: true }}",
                2 * concurrency
            ),
            what: format!("{concurrency} concurrent streams"),
            keys: &[
                ("output_tok_s", None),
                ("ttft.p99", Some(100.0)),
                ("itl.p99", Some(50.0)),
            ],
        },
    ]
}

/// Runs of each calibration gate: a bound from one run is a bound on one
/// moment of a busy machine, which the suite's own next run may not meet;
/// five give a median and a spread that one slow run does not move.
const CALIBRATION_RUNS: u32 = 5;

/// How many times `init` asks each starter probe before the calibration,
/// and again after it; it is written live only when every answer passed.
const PROBE_TRIES: usize = 2;

/// Starter probe `text` as its try `t`: the first keeps its name, the
/// others are `<name>_try<t>`.
fn tried(text: &str, t: usize) -> String {
    if t == 1 {
        return text.to_owned();
    }
    match text.split_once('\n') {
        Some((head, rest)) => format!("{head}_try{t}\n{rest}"),
        None => text.to_owned(),
    }
}

/// `text` as a YAML double-quoted scalar that interpolation leaves alone.
fn quoted(text: &str) -> String {
    serde_json::to_string(&text.replace('$', "$$")).unwrap_or_default()
}

/// The `target:` of the suite.
fn target(base_url: &str, api: Api, model: Option<&str>) -> String {
    let mut out = format!(
        "target:\n  base_url: {}\n  api: {}\n",
        quoted(base_url),
        api.name()
    );
    if let Some(m) = model {
        let _ = writeln!(out, "  model: {}", quoted(m));
    }
    out.push_str("  timeouts: { connect: 5s, first_token: 120s, idle: 60s, total: 10m }\n");
    out
}

/// A suite of its own for each part of the calibration: gates in a suite
/// without probes are measured whatever the probes say.
fn calibration_suite(name: &str, target: &str, body: &str) -> String {
    format!("suite: {name}\n{target}defaults: {{ temperature: 0, max_tokens: 256 }}\n{body}")
}

/// Where a calibration suite is written before it runs, so that what its
/// failures point at (`--> <file>:<line>:<col>`) is a file that holds it:
/// `<out>/init/<name>.yaml` in the output directory of the suite's project
/// (not the suite being written, which does not exist yet).
fn calibration_file(o: &Options, name: &str, text: &str) -> PathBuf {
    let project = crate::suite::project_root(&o.out);
    let out = crate::record::out_dir(None, Some(&project));
    crate::record::prepare(&out);
    let file = out.join("init").join(format!("{name}.yaml"));
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&file, text));
    match written {
        Ok(()) => file,
        Err(e) => {
            say(&format!(
                "could not keep the calibration suite at {} ({e}); its failures point at lines of a file that is not there",
                file.display()
            ));
            file
        }
    }
}

/// Runs `text` (a suite claiming to be `path`) as a suite run of its own.
fn suite_run(
    path: &Path,
    text: &str,
    runtime: &Arc<tokio::runtime::Runtime>,
    client_limited: Option<crate::suite::OnClientLimited>,
) -> Execution {
    let suite = load_text(path, text, &|name| std::env::var(name).ok())
        .unwrap_or_else(|e| panic!("a calibration suite does not load:\n{e}\n{text}"));
    let figures = Arc::new(FigureBook::default());
    let plan = Plan {
        label: suite.name.clone(),
        target_override: None,
        variant: None,
        run_dir: std::env::temp_dir(),
        recording_baselines: false,
        client_threads: None,
        client_limited,
        snapshots: crate::check::snapshot::Update::Pending,
        // Its gates' figures, kept as a run keeps them; its server said.
        listeners: Listeners::default().and([
            Arc::clone(&figures) as Arc<dyn Listener>,
            Arc::new(TargetLines),
        ]),
        figures,
        trials: Arc::default(),
        // A calibration is no run of the suite: nothing to compare with.
        history: crate::history::Location::Off,
        skipped_probes: Vec::new(),
    };
    Execution::new(Arc::new(SuiteRun::new(suite, plan, Arc::clone(runtime))))
}

/// What the calibration found out about the server.
struct Measured {
    /// Who answered: the target line of a run.
    description: String,
    /// The served model and the server's version, for the comments.
    server: String,
    model: Option<String>,
    /// Each starter probe's text as written, and why it failed.
    probes: Vec<(String, Option<String>)>,
    /// The contract checks that held, and those that broke with why.
    held: Vec<Contract>,
    broke: Vec<(Contract, String)>,
    /// Each gate's figures, every run's value.
    figures: Vec<crate::suite::figures::ByKey<Vec<f64>>>,
}

fn say(line: &str) {
    eprintln!("servegate init: {line}");
}

/// Asks the server, calibrates, and writes the suite; returns its path.
pub fn init(o: &Options) -> Result<PathBuf, Error> {
    let base_url = match o.target.trim() {
        "" | "sim" => "sim".to_owned(),
        url if url.starts_with("http://") || url.starts_with("https://") => url.to_owned(),
        other => return Err(Error::Target(other.to_owned())),
    };
    if o.out.exists() && !o.force {
        return Err(Error::Exists(o.out.clone()));
    }
    let name = suite_name(&o.out);
    let measured = calibrate(o, &base_url, &name)?;
    let text = render(o, &base_url, &name, &measured);
    // What is written loads: a bug here is never a user's broken suite.
    if let Err(e) = load_text(&o.out, &text, &|_| None) {
        panic!("servegate init wrote a suite that does not load:\n{e}\n{text}");
    }
    let dir = o.out.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| Error::Write(d.to_path_buf(), e))?;
    }
    std::fs::write(&o.out, &text).map_err(|e| Error::Write(o.out.clone(), e))?;
    let schema = dir.unwrap_or(Path::new(".")).join(SCHEMA_FILE);
    if !schema.exists() {
        let json = serde_json::to_string_pretty(&crate::suite::schema()).unwrap_or_default();
        std::fs::write(&schema, json + "\n").map_err(|e| Error::Write(schema.clone(), e))?;
        say(&format!(
            "wrote {} (the suite format's JSON Schema, for editors)",
            schema.display()
        ));
    }
    Ok(o.out.clone())
}

/// The schema file the suite's modeline names, beside it.
const SCHEMA_FILE: &str = "servegate.schema.json";

/// The suite's name: the file stem, with what a name cannot hold replaced.
fn suite_name(out: &Path) -> String {
    let stem = out.file_stem().map_or_else(
        || "my-server".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    let name: String = stem
        .chars()
        .map(|c| {
            if crate::files::is_name_char(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_start_matches('.');
    if name.is_empty() {
        "my-server".to_owned()
    } else {
        name.to_owned()
    }
}

fn calibrate(o: &Options, base_url: &str, name: &str) -> Result<Measured, Error> {
    let runtime = crate::harness::runtime(base_url == "sim")
        .map(Arc::new)
        .map_err(|e| Error::Calibration(format!("failed to start the async runtime: {e}")))?;
    let plain = target(base_url, o.api, None);
    let starters = [ARITHMETIC, IS_PRIME];
    let mut tries = String::from("correctness:\n");
    // Each starter PROBE_TRIES times (`is_prime`, `is_prime_try2`, …).
    for p in starters {
        for t in 1..=PROBE_TRIES {
            tries.push_str(&tried(p, t));
        }
    }
    let mut body = tries.clone();
    for c in Contract::ALL.iter().map(|(_, c)| *c) {
        let _ = writeln!(
            body,
            "{}    contract: [{}]",
            CONTRACT.replacen(
                "name: server_contract",
                &format!("name: contract_{}", c.name()),
                1
            ),
            c.name()
        );
    }
    say(&format!("asking {base_url} what it serves"));
    if base_url == "sim" {
        say(
            "note: the embedded simulator's default profile answers filler: the starter probes fail on it by design and are written commented out; `--target URL` calibrates your server",
        );
    }
    // A calibration suite `<name>-<part>` of `body`, written and run.
    let probe_run = |part: &str, body: &str| {
        let suite = format!("{name}-{part}");
        let text = calibration_suite(&suite, &plain, body);
        suite_run(
            &calibration_file(o, &suite, &text),
            &text,
            &runtime,
            o.client_limited,
        )
    };
    let probes = probe_run("probes", &body);
    let connected = match probes.connect() {
        Ok(c) => c,
        Err(e) => return Err(Error::Unreachable(e.to_string())),
    };
    let model = (connected.model_id != "default").then(|| connected.model_id.clone());
    let server = format!(
        "{}, {}",
        model.as_deref().map_or("model unknown", |m| m),
        connected.server_version.as_deref().map_or_else(
            || "server of unknown version".to_owned(),
            |v| format!("server {v}")
        )
    );
    // Server strings go into comments: one line each, whatever they hold.
    let server = crate::text::printable(&server).into_owned();
    let description = crate::text::printable(&connected.description).into_owned();
    let failed_tries = |run: &Execution, i: usize| -> Vec<String> {
        (0..PROBE_TRIES)
            .filter_map(|t| run.probe(i * PROBE_TRIES + t).err())
            .map(|stop| stop.headline())
            .collect()
    };
    let before: Vec<Vec<String>> = (0..starters.len())
        .map(|i| failed_tries(&probes, i))
        .collect();
    let (mut held, mut broke) = (Vec::new(), Vec::new());
    for (j, c) in Contract::ALL.iter().map(|(_, c)| *c).enumerate() {
        match probes.probe(starters.len() * PROBE_TRIES + j) {
            Ok(()) => held.push(c),
            Err(stop) => broke.push((c, stop.headline())),
        }
    }
    say(&format!(
        "contract checks held: {}{}",
        names(&held),
        if broke.is_empty() {
            String::new()
        } else {
            format!(
                "; broke: {}",
                names(&broke.iter().map(|(c, _)| *c).collect::<Vec<_>>())
            )
        }
    ));
    let mut gate_body = String::from("performance:\n");
    let specs = gates(o.concurrency);
    for g in &specs {
        // Each figure a threshold will bound is named by one here, which
        // any value meets, so that every run's value is kept.
        let mut measured: String = g
            .keys
            .iter()
            .map(|(k, floor)| match floor {
                None => format!(", {k}: \">= 0\""),
                Some(_) => format!(", {k}: \"<= 1h\""),
            })
            .collect();
        // Every gate's throughput in all, to compare one stream with many.
        if !g.keys.iter().any(|(k, _)| *k == THROUGHPUT) {
            let _ = write!(measured, ", {THROUGHPUT}: \">= 0\"");
        }
        let _ = write!(
            gate_body,
            "  - name: {}\n    repeats: {CALIBRATION_RUNS}\n    load: {}\n    thresholds: {{ errors: \"== 0\"{measured} }}\n",
            g.name, g.load
        );
    }
    let text = calibration_suite(&format!("{name}-calibration"), &plain, &gate_body);
    let file = calibration_file(o, &format!("{name}-calibration"), &text);
    let load = suite_run(&file, &text, &runtime, o.client_limited);
    let mut figures = Vec::new();
    for (i, g) in specs.iter().enumerate() {
        say(&format!("measuring {} ({CALIBRATION_RUNS} runs)", g.what));
        load.gate(i).map_err(|stop| {
            Error::Calibration(format!(
                "{stop}\n  = the calibration suite servegate init ran is {}; {} was not written",
                file.display(),
                o.out.display()
            ))
        })?;
        let measured = load
            .figures()
            .into_iter()
            .find(|f| f.gate == g.name)
            .map(|f| f.repeat_values)
            .unwrap_or_default();
        figures.push(measured);
    }
    // The starters again, after the load: a server whose answers change
    // once it has served others (a prompt cache holding their prefixes,
    // llama.cpp's slots) fails the suite's reruns, which come after gates.
    let after = probe_run("probes-after", &tries);
    let mut results = Vec::new();
    for (i, (text, mut failed)) in starters.iter().zip(before).enumerate() {
        failed.extend(failed_tries(&after, i));
        let why = probe_verdict(&failed);
        say(&format!(
            "probe {}: {}",
            probes.suite.probes[i * PROBE_TRIES].name,
            why.as_deref().unwrap_or("ok")
        ));
        results.push(((*text).to_owned(), why));
    }
    Ok(Measured {
        description,
        server,
        model,
        probes: results,
        held,
        broke,
        figures,
    })
}

/// Why a starter probe is written commented out, from the failures of
/// its tries before and after the calibration (`None`: every try passed).
/// A probe is written live only when every try passed: a server whose
/// answer varies (batching, a prompt cache) would fail the suite's own
/// reruns now and then.
fn probe_verdict(failed: &[String]) -> Option<String> {
    let all = 2 * PROBE_TRIES;
    let first = failed.first()?;
    if failed.len() == all {
        return Some(first.clone());
    }
    // A request that failed (a timeout, a dropped connection) says
    // nothing of the answer.
    let varies = if first.starts_with("assertion failed") {
        ", the answer varies"
    } else {
        ""
    };
    Some(format!(
        "{} of {all} tries (before and after the calibration's load) failed{varies}: {first}",
        failed.len()
    ))
}

fn names(contracts: &[Contract]) -> String {
    if contracts.is_empty() {
        return "none".to_owned();
    }
    contracts
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_strings_are_written_as_yaml_reads_them() {
        assert_eq!(suite_name(Path::new("suites/my server.yaml")), "my-server");
        assert_eq!(quoted("a${B}"), "\"a$${B}\"");
    }
}
