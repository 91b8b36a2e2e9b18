//! A gate's load, in words.

use crate::load::workload::PROMPT_APPROXIMATION;
use crate::suite::{
    Arrival, Gate, ImageSource, LoadPrompt, Pace, RecordPrompt, TRACE_BLOCK_TOKENS,
};
use crate::units::format_duration;

/// The load of a gate, in words, for output and failure messages.
pub fn describe_load(gate: &Gate) -> String {
    let l = &gate.load;
    let mut parts = Vec::new();
    parts.push(match l.pace {
        Pace::Closed { concurrency } => format!("closed loop, concurrency {concurrency}"),
        Pace::Open {
            rate,
            arrival,
            seed,
            max_in_flight,
        } => {
            let cap =
                max_in_flight.map_or_else(String::new, |n| format!(", at most {n} in flight"));
            match arrival {
                Arrival::Constant => format!("open loop, {rate} req/s (constant){cap}"),
                Arrival::Poisson => format!("open loop, {rate} req/s (poisson, seed {seed}){cap}"),
                Arrival::Gamma { burstiness } => format!(
                    "open loop, {rate} req/s (gamma, burstiness {burstiness}, seed {seed}){cap}"
                ),
                Arrival::Trace { slowdown } => format!(
                    "open loop, replaying the trace's times{} (mean {rate:.2} req/s){cap}",
                    if (slowdown - 1.0).abs() > f64::EPSILON {
                        if slowdown > 1.0 {
                            format!(" {slowdown}× slower")
                        } else {
                            format!(" {}× faster", 1.0 / slowdown)
                        }
                    } else {
                        String::new()
                    }
                ),
            }
        }
    });
    parts.push(match (l.requests, l.duration) {
        (Some(n), None) => format!("{n} requests"),
        (None, Some(d)) => format!("for {}", format_duration(d)),
        (Some(n), Some(d)) => format!(
            "{n} requests or {}, whichever ends first",
            format_duration(d)
        ),
        (None, None) => "no bound".to_owned(),
    });
    if l.warmup > 0 {
        parts.push(format!("after {} warm-up", l.warmup));
    }
    let own = matches!(
        l.prompt,
        LoadPrompt::Dataset {
            outputs: Some(_),
            ..
        }
    );
    parts.push(format!(
        "{}{} output tokens{}",
        if own { "up to " } else { "" },
        l.output_tokens,
        if l.ignore_eos { " (ignore_eos)" } else { "" }
    ));
    parts.push(match &l.prompt {
        LoadPrompt::Text(t) => format!("fixed prompt of {} chars", t.chars().count()),
        LoadPrompt::Tokens(n) => match &l.tokenizer {
            Some(t) => format!("{n} input tokens (synthetic, cut to length by {})", t.path().display()),
            None => format!("~{n} input tokens ({PROMPT_APPROXIMATION})"),
        },
        LoadPrompt::Dataset {
            path,
            prompts,
            outputs,
            ..
        } => {
            let what = if l.conversation.is_some() {
                "conversations".to_owned()
            } else if prompts
                .iter()
                .any(|p| matches!(p, RecordPrompt::Blocks { .. }))
            {
                format!(
                    "trace records (prompts of {TRACE_BLOCK_TOKENS}-token blocks named by their `hash_ids`)"
                )
            } else {
                "prompts".to_owned()
            };
            let lengths = outputs.as_ref().map_or_else(String::new, |o| {
                let sum: u64 = o.iter().map(|&n| u64::from(n)).sum();
                let mean = sum / u64::try_from(o.len().max(1)).unwrap_or(1);
                format!(", each asking for its answer's length (mean {mean} tokens)")
            });
            format!("{} {what} from {}{lengths}", prompts.len(), path.display())
        }
        LoadPrompt::SharedPrefix {
            prefix_tokens,
            groups,
            suffix_tokens,
        } => format!(
            "{groups} shared prefix(es) of {prefix_tokens} tokens + {suffix_tokens} unique tokens ({})",
            l.tokenizer.as_ref().map_or_else(
                || PROMPT_APPROXIMATION.to_owned(),
                |t| format!("cut to length by {}", t.path().display())
            )
        ),
    });
    if let Some(li) = &l.images {
        let n = li.count;
        let s = if n == 1 { "" } else { "s" };
        parts.push(match &li.source {
            ImageSource::Generated { width, height, .. } => {
                format!("{n} generated {width}×{height} PNG image{s} each (one colour, another each request)")
            }
            ImageSource::Files { path, images } => format!(
                "{n} image{s} each from {} ({} files, in turn)",
                path.display(),
                images.len()
            ),
        });
    }
    if let Some(c) = l.conversation {
        parts.push(format!(
            "sessions of {} turns, each turn those new words sent after the conversation so far{}",
            c.turns,
            if c.think.is_zero() {
                String::new()
            } else {
                format!(", {} think time", format_duration(c.think))
            }
        ));
    }
    if let Some(a) = &gate.sampling.adapter {
        parts.push(format!("through LoRA adapter `{a}`"));
    }
    if l.flush_cache {
        parts.push("cache flushed before measuring".to_owned());
    }
    let slo: Vec<String> = [
        ("ttft", gate.slo.ttft),
        ("tpot", gate.slo.tpot),
        ("e2e", gate.slo.e2e),
    ]
    .into_iter()
    .filter_map(|(n, d)| d.map(|d| format!("{n} <= {}", format_duration(d))))
    .collect();
    if !slo.is_empty() {
        parts.push(format!("SLO {}", slo.join(" and ")));
    }
    parts.join(", ")
}
