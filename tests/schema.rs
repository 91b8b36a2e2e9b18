//! The JSON Schema of suites (`servegate schema`, committed as
//! `schemas/suite.schema.json`): it is what the binary prints, every suite
//! the decoder accepts validates against it, broken ones are rejected, the
//! decoder and the schema agree on the keys of every mapping of the format,
//! and its descriptions are the README's table cells.

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::command;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use servegate::suite::node::{Node, Yaml, parse};
use servegate::suite::{load_file_with_env, load_text};

const COMMITTED: &str = "schemas/suite.schema.json";

fn schema() -> Value {
    servegate::suite::schema()
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft7::new(&schema()).expect("the schema compiles")
}

/// The suite text as the JSON the schema validates.
fn json_of(text: &str) -> Value {
    parse(text).expect("valid YAML").to_json()
}

/// Why `instance` is invalid, one line per error.
fn schema_errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_is_what_servegate_schema_prints() {
    let out = command(&[], &[])
        .arg("schema")
        .output()
        .expect("servegate runs");
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout).unwrap();
    let committed = std::fs::read_to_string(COMMITTED).unwrap();
    assert!(
        printed == committed,
        "{COMMITTED} is stale: regenerate it with `cargo run -- schema > {COMMITTED}`"
    );
    let parsed: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(parsed, schema());
    jsonschema::draft7::meta::validate(&parsed).expect("a valid draft-07 schema");
}

/// The docs' key reference is what `servegate schema --keys` renders from
/// the field tables.
#[test]
fn the_key_reference_is_what_servegate_schema_keys_prints() {
    const KEYS: &str = "docs/src/suite-keys.md";
    let out = command(&[], &[])
        .args(["schema", "--keys"])
        .output()
        .expect("servegate runs");
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed == std::fs::read_to_string(KEYS).unwrap(),
        "{KEYS} is stale: regenerate it with `cargo run -- schema --keys > {KEYS}`"
    );
    // Every key the decoder takes at the top level has its row.
    for key in schema()["properties"].as_object().unwrap().keys() {
        assert!(
            printed.contains(&format!("| `{key}` |")),
            "no row of `{key}`"
        );
    }
}

/// The files under `dir` (its subdirectories too) with one of these
/// extensions.
fn files_under(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, extensions, out);
        } else if p
            .extension()
            .is_some_and(|x| extensions.iter().any(|e| x == *e))
        {
            out.push(p);
        }
    }
}

/// Suite files under `dir`.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_under(dir, &["yaml", "yml"], out);
}

/// Every shipped and test suite that loads validates against the schema:
/// an editor never marks a working suite red.
#[test]
fn every_suite_that_loads_validates_against_the_schema() {
    let v = validator();
    let mut files = Vec::new();
    for dir in ["suites", "tests/suites", "examples/consumer/suites"] {
        yaml_files(Path::new(dir), &mut files);
    }
    let (mut valid, mut rejected_by_both) = (0, 0);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Every variable set (the launch suites name the binary and a port
        // through them): what is checked is the file's shape.
        let loaded = load_file_with_env(file, &|_| Some("30000".to_owned()));
        let Ok(yaml) = parse(&text) else {
            assert!(loaded.is_err(), "{}", file.display());
            continue;
        };
        let errors = schema_errors(&v, &yaml.to_json());
        if loaded.is_ok() {
            assert_eq!(
                errors,
                Vec::<String>::new(),
                "{} loads but the schema rejects it",
                file.display()
            );
            valid += 1;
        } else if !errors.is_empty() {
            rejected_by_both += 1;
        }
    }
    assert!(valid >= 35, "only {valid} suites validated: {files:?}");
    // tests/suites/bad/typos.yaml: its typos are the schema's errors too.
    assert!(rejected_by_both >= 1);
}

/// The shipped suites name the schema in their first line, by a path from
/// their own directory (yaml-language-server reads it there).
#[test]
fn shipped_suites_start_with_the_schema_modeline() {
    let mut files = Vec::new();
    for dir in ["suites", "examples/consumer/suites"] {
        yaml_files(Path::new(dir), &mut files);
    }
    assert!(files.len() >= 4, "{files:?}");
    let committed = std::fs::canonicalize(COMMITTED).unwrap();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let rel = first
            .strip_prefix("# yaml-language-server: $schema=")
            .unwrap_or_else(|| panic!("{}: first line is `{first}`", file.display()));
        let target = file.parent().unwrap().join(rel);
        assert_eq!(
            std::fs::canonicalize(&target).ok().as_ref(),
            Some(&committed),
            "{}: `{rel}` is not {COMMITTED}",
            file.display()
        );
    }
}

/// Broken suites that the decoder rejects, the schema rejects too.
#[test]
fn broken_suites_are_rejected_by_the_schema() {
    let v = validator();
    let good = "suite: s\ncorrectness:\n  - name: a\n    prompt: \"2+2?\"\n    expect: [{number: 4}]\nperformance:\n  - name: g\n    load: {requests: 2, input_tokens: 8, output_tokens: 8}\n    thresholds: {ttft.p99: \"<= 2s\"}\n";
    assert!(load_text(Path::new("s.yaml"), good, &|_| None).is_ok());
    assert_eq!(schema_errors(&v, &json_of(good)), Vec::<String>::new());
    for (what, from, to) in [
        ("an unknown key", "suite: s\n", "suite: s\ntemprature: 0\n"),
        (
            "a wrong type",
            "prompt: \"2+2?\"",
            "prompt: \"2+2?\"\n    max_tokens: many",
        ),
        (
            "an unknown API",
            "suite: s\n",
            "suite: s\ntarget: {api: openai-chatt}\n",
        ),
        (
            "prompt and messages",
            "prompt: \"2+2?\"",
            "prompt: \"2+2?\"\n    messages: [{role: user, content: hi}]",
        ),
        (
            "two checks in one item",
            "{number: 4}",
            "{number: 4, contains: \"4\"}",
        ),
        ("an empty expect", "[{number: 4}]", "[]"),
        ("an unknown metric", "ttft.p99:", "ttft.p100:"),
        ("a threshold that is no comparison", "\"<= 2s\"", "2"),
        (
            "a gate without load",
            "    load: {requests: 2, input_tokens: 8, output_tokens: 8}\n",
            "",
        ),
        ("no window", "requests: 2, ", ""),
        (
            "two workloads",
            "input_tokens: 8,",
            "input_tokens: 8, prompt: hi,",
        ),
        (
            "an unknown role",
            "prompt: \"2+2?\"",
            "messages: [{role: robot, content: hi}]",
        ),
        ("a duration of an unknown unit", "\"<= 2s\"", "\"<= 2sec\""),
        ("a duration without a unit", "\"<= 2s\"", "\"<= 2\""),
        (
            "a threshold in another metric's unit",
            "ttft.p99: \"<= 2s\"",
            "output_tok_s: \">= 2 req/s\"",
        ),
        (
            "a count with a unit",
            "ttft.p99: \"<= 2s\"",
            "errors: \"== 0 tok/s\"",
        ),
        (
            "a timeout of an unknown unit",
            "suite: s\n",
            "suite: s\ntarget: {timeouts: {total: 10 seconds}}\n",
        ),
        (
            "a URL of another scheme",
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"ftp://10.0.0.1:30000\"}\n",
        ),
        (
            "a size of an unknown unit",
            "suite: s\n",
            "suite: s\ntarget: {limits: {answer: 8 gigabytes}}\n",
        ),
        (
            "a size that is no whole number",
            "suite: s\n",
            "suite: s\ntarget: {limits: {answer: 1e3 KiB}}\n",
        ),
        (
            "a URL with a space",
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"http://h b:1\"}\n",
        ),
        (
            "a URL without a scheme",
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"10.0.0.1:30000\"}\n",
        ),
    ] {
        assert_eq!(good.matches(from).count(), 1, "{what}: `{from}`");
        let broken = good.replacen(from, to, 1);
        assert!(
            load_text(Path::new("s.yaml"), &broken, &|_| None).is_err(),
            "{what}: the decoder accepts\n{broken}"
        );
        assert!(
            !v.is_valid(&json_of(&broken)),
            "{what}: the schema accepts\n{broken}"
        );
    }
}

/// What the loader reads in those same fields, the schema takes: every
/// duration unit, terms together, values with the unit the output prints,
/// relative bounds, interpolated values and every URL form.
#[test]
fn what_the_loader_reads_the_schema_takes() {
    let v = validator();
    let good = "suite: s\ncorrectness:\n  - name: a\n    prompt: \"2+2?\"\n    expect: [{number: 4}]\nperformance:\n  - name: g\n    load: {requests: 2, input_tokens: 8, output_tokens: 8}\n    thresholds: {ttft.p99: \"<= 2s\"}\n";
    for (from, to) in [
        ("\"<= 2s\"", "\"<= 1m 30s\""),
        ("\"<= 2s\"", "\"<=1h30m\""),
        ("\"<= 2s\"", "\"< 800us\""),
        ("\"<= 2s\"", "\"<= 800µs\""),
        ("\"<= 2s\"", "\"<= .5s\""),
        ("\"<= 2s\"", "\"<= 2min\""),
        ("\"<= 2s\"", "\"<= baseline * 1.1\""),
        ("\"<= 2s\"", "\"<= baseline + 5ms\""),
        ("\"<= 2s\"", "\"<= no_regression\""),
        ("\"<= 2s\"", "\"<= history.median(10) * 1.05\""),
        ("ttft.p99: \"<= 2s\"", "output_tok_s: \">= 12.5 tok/s\""),
        ("ttft.p99: \"<= 2s\"", "output_tok_s: \">= 1e3\""),
        ("ttft.p99: \"<= 2s\"", "errors: \"== 0\""),
        ("suite: s\n", "suite: s\ntarget: {base_url: sim}\n"),
        (
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"http://10.0.0.1:30000/v1/\"}\n",
        ),
        (
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"https://gpu-7.internal\"}\n",
        ),
        (
            "suite: s\n",
            "suite: s\ntarget: {base_url: \"${SERVER:-sim}\"}\n",
        ),
        (
            "suite: s\n",
            "suite: s\ntarget: {timeouts: {total: \"${TOTAL:-90s}\"}}\n",
        ),
        (
            "suite: s\n",
            "suite: s\ntarget: {limits: {answer: 8 MiB, document: 512kib, buffers: 1048576}}\n",
        ),
    ] {
        let text = good.replacen(from, to, 1);
        assert!(
            load_text(Path::new("s.yaml"), &text, &|_| None).is_ok(),
            "the decoder rejects\n{text}"
        );
        assert_eq!(
            schema_errors(&v, &json_of(&text)),
            Vec::<String>::new(),
            "the schema rejects\n{text}"
        );
    }
}

/// A step from a node to a child: a key or an index.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index,
}

/// Every mapping of the tree: where it starts and the steps to it.
fn mappings(y: &Yaml, path: &mut Vec<Step>, out: &mut Vec<(Yaml, Vec<Step>)>) {
    match &y.node {
        Node::Map(entries) => {
            out.push((y.clone(), path.clone()));
            for (k, v) in entries {
                path.push(Step::Key(k.name.clone()));
                mappings(v, path, out);
                path.pop();
            }
        }
        Node::Seq(items) => {
            for item in items {
                path.push(Step::Index);
                mappings(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The schema and its `anyOf` / `oneOf` alternatives.
fn alternatives(s: &Value) -> Vec<&Value> {
    let mut all = vec![s];
    for k in ["anyOf", "oneOf"] {
        if let Some(a) = s.get(k).and_then(Value::as_array) {
            all.extend(a);
        }
    }
    all
}

/// The schema of the value at `path`.
fn schema_at<'s>(s: &'s Value, path: &[Step]) -> &'s Value {
    path.iter().fold(s, |s, step| {
        alternatives(s)
            .into_iter()
            .find_map(|a| match step {
                Step::Key(k) => a
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .or_else(|| a.get("additionalProperties").filter(|v| v.is_object())),
                Step::Index => a.get("items"),
            })
            .unwrap_or_else(|| panic!("the schema has nothing at {path:?}"))
    })
}

/// The keys the schema allows in the mapping at `path`, when it lists them.
fn schema_keys(s: &Value, path: &[Step]) -> Vec<BTreeSet<String>> {
    alternatives(schema_at(s, path))
        .into_iter()
        .filter_map(|a| a.get("properties").and_then(Value::as_object))
        .map(|p| p.keys().cloned().collect())
        .collect()
}

/// `unknown field ``zz_unknown`` in X` and the keys the decoder says it
/// expected there.
fn decoder_keys(message: &str) -> Option<(String, BTreeSet<String>)> {
    let start = message.find("unknown field `zz_unknown` in ")?;
    let rest = &message[start..];
    let what = rest.lines().next()?["unknown field `zz_unknown` in ".len()..].to_owned();
    let expected = rest
        .lines()
        .find_map(|l| l.trim().strip_prefix("= expected: one of "))?;
    let keys = expected
        .split(", ")
        .map(|k| k.trim_matches('`').to_owned())
        .collect();
    Some((what, keys))
}

/// `text` with `zz_unknown: 1` added to the mapping that starts at `loc`.
fn with_unknown_key(text: &str, y: &Yaml) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let line = &mut lines[y.loc.line as usize - 1];
    let at: usize = line
        .char_indices()
        .nth(y.loc.column as usize - 1)
        .map_or(line.len(), |(i, _)| i);
    let Node::Map(entries) = &y.node else {
        unreachable!()
    };
    if line[at..].starts_with('{') {
        line.insert_str(at + 1, " zz_unknown: 1,");
    } else {
        // A block mapping starts at its first key: the new key goes before
        // it, at its column (after a `- ` when the mapping is a list item).
        let first = &entries[0].0;
        assert_eq!(
            (first.loc.line, first.loc.column),
            (y.loc.line, y.loc.column),
            "a block mapping starts at its first key"
        );
        line.insert_str(
            at,
            &format!("zz_unknown: 1\n{}", " ".repeat(y.loc.column as usize - 1)),
        );
    }
    lines.join("\n") + "\n"
}

/// Each mapping of a suite that holds every mapping of the format gets an
/// unknown key in turn: the decoder and the schema both reject it or both
/// accept it (free-form mappings: `env`, `chat_template_kwargs`, the
/// fields of `expect_server`), and where the decoder lists the keys it
/// allows there, the schema allows exactly those.
#[test]
fn the_decoder_and_the_schema_agree_on_every_key() {
    let file = Path::new("tests/suites/schema/everything.yaml");
    let text = std::fs::read_to_string(file).unwrap();
    let env = |_: &str| None;
    load_text(file, &text, &env).expect("the sample loads");
    let (s, v) = (schema(), validator());
    assert_eq!(schema_errors(&v, &json_of(&text)), Vec::<String>::new());
    let mut all = Vec::new();
    mappings(&parse(&text).unwrap(), &mut Vec::new(), &mut all);
    let mut compared = BTreeSet::new();
    for (y, path) in &all {
        let mutated = with_unknown_key(&text, y);
        let decoded = load_text(file, &mutated, &env);
        let valid = v.is_valid(&json_of(&mutated));
        assert_eq!(
            decoded.is_ok(),
            valid,
            "at {path:?} the decoder says {:?}, the schema {valid}",
            decoded.as_ref().map(|_| ()).map_err(String::as_str)
        );
        if let Err(message) = &decoded
            && let Some((what, keys)) = decoder_keys(message)
        {
            // One of the schema's alternatives there (a dataset probe's
            // thresholds: `accuracy` or `pass_at_1`) has exactly its keys.
            let sets = schema_keys(&s, path);
            assert!(
                sets.contains(&keys),
                "the keys of {what} (at {path:?}): the decoder's {keys:?}, the schema's {sets:?}"
            );
            compared.insert(what);
        }
    }
    // Every mapping whose keys the decoder checks is in the sample.
    let every: BTreeSet<String> = [
        "an expected value",
        "assertion",
        "code",
        "conversation",
        "dataset",
        "dataset.extract",
        "defaults",
        "expect_server",
        "gate",
        "images",
        "json",
        "launch.ready",
        "load",
        "message",
        "not_degenerate",
        "number",
        "probe",
        "sandbox",
        "shared_prefix",
        "sim",
        "slo",
        "target",
        "target.launch",
        "target.limits",
        "target.timeouts",
        "the suite",
        "thresholds",
        "token_accounting",
        "variant",
        "a worker",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(compared, every);
}

/// A table of the README (or of the docs it is split into) by its header
/// row: each row's first cell and second.
fn table(header: &str) -> Vec<(String, String)> {
    let mut docs = vec![PathBuf::from("README.md")];
    if Path::new("docs").is_dir() {
        files_under(Path::new("docs"), &["md"], &mut docs);
    }
    let mut rows = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let mut lines = text.lines().map(str::trim).skip_while(|l| *l != header);
        if lines.next().is_none() {
            continue;
        }
        for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            rows.push((cells[0].to_owned(), cells[1].to_owned()));
        }
    }
    assert!(
        !rows.is_empty(),
        "no table `{header}` in README.md or docs/"
    );
    rows
}

/// The keys a first cell names: `` `contains` / `not_contains` `` names
/// two, `` `number: {value, tolerance}` `` one, `` `server.aborted` `` the
/// name in its namespace.
fn named(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|c| {
            c.chars()
                .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_' || *ch == '.')
                .collect()
        })
        .collect()
}

/// The descriptions of assertion checks, contract checks and metrics are
/// the README's cells for them.
#[test]
fn descriptions_are_the_readmes_table_cells() {
    let s = schema();
    let probe = &s["properties"]["correctness"]["items"]["properties"];
    let checks = &probe["expect"]["items"]["properties"];
    for (cell, passes) in table("| check | passes when |") {
        for key in named(&cell) {
            assert_eq!(
                checks[&key]["description"],
                format!("passes when {passes}"),
                "check `{key}`"
            );
        }
    }
    let contracts = &probe["contract"]["items"];
    let enums = contracts["enum"].as_array().unwrap();
    for (cell, fails) in table("| check | fails when |") {
        for key in named(&cell) {
            let i = enums
                .iter()
                .position(|e| *e == key.as_str())
                .unwrap_or_else(|| panic!("no contract `{key}`"));
            assert_eq!(
                contracts["enumDescriptions"][i],
                format!("fails when {fails}"),
                "contract `{key}`"
            );
        }
    }
    let thresholds =
        &s["properties"]["performance"]["items"]["properties"]["thresholds"]["properties"];
    let mut seen = 0;
    for (cell, what) in table("| metric | what | statistics |") {
        for metric in named(&cell) {
            for (key, t) in thresholds.as_object().unwrap() {
                if key == &metric || key.starts_with(&format!("{metric}.")) {
                    let d = t["description"].as_str().unwrap();
                    assert!(d.ends_with(&what), "`{key}`: {d}");
                    seen += 1;
                }
            }
        }
    }
    assert_eq!(seen, thresholds.as_object().unwrap().len());
}
