//! A progress bar on stderr for long gates, drawn only when stderr is a
//! terminal: silent in CI logs and under test capture.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar following a counter of finished requests.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts a bar for a window of `requests` (or `duration`), following
    /// `finished`; nothing when stderr is not a terminal.
    pub fn start(
        gate: &str,
        requests: Option<u32>,
        duration: Option<Duration>,
        finished: &Arc<AtomicU64>,
    ) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self {
                bar: None,
                ticker: None,
            };
        }
        let bar = match requests {
            Some(n) => {
                ProgressBar::with_draw_target(Some(u64::from(n)), ProgressDrawTarget::stderr())
            }
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = if requests.is_some() {
            "  {prefix} [{bar:30}] {pos}/{len} requests, {elapsed}"
        } else {
            "  {prefix} {spinner} {pos} requests, {elapsed}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let limit = duration.map_or_else(String::new, |d| format!(" (for {}s)", d.as_secs()));
        bar.set_prefix(format!("{gate}{limit}"));
        let (b, counter) = (bar.clone(), Arc::clone(finished));
        let ticker = tokio::spawn(async move {
            loop {
                b.set_position(counter.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// Stops and clears the bar.
    pub fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
