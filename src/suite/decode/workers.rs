//! `target.launch.workers:`: the servers a launched router stands in
//! front of, and the `{worker.NAME}` that tell the router of them.

use super::schema::server::{PROCESS, WORKER};
use super::{Decoder, Yaml};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{Api, Launch, Worker};

impl Decoder<'_> {
    /// `launch.workers:`: each a launch of its own with a unique name (those
    /// that decode: the others' errors are said).
    pub(super) fn workers(&mut self, y: &Yaml, api: Api) -> Vec<Worker> {
        let mut seen: Vec<String> = Vec::new();
        self.items(y, "launch.workers", |d, w| {
            let f = d.fields(w, "a worker", &[WORKER, PROCESS])?;
            let name = d
                .required(&f, "name", "a worker")
                .and_then(|v| d.name(v, "worker name"));
            if let (Some(n), Some(v)) = (&name, f.get("name")) {
                if seen.contains(n) {
                    d.error(Diagnostic::new(v.loc, format!("worker `{n}` is named twice"))
                        .expected("a name of its own for each worker: its log, failures and metrics go by it"));
                }
                seen.push(n.clone());
            }
            let launch = d.process(w, &f, api, "worker")?;
            Some(Worker {
                name: name?,
                launch,
            })
        })
    }

    /// Every `{worker.NAME}` in the router's command and env names a
    /// worker, every worker is named there (a worker the router is not
    /// told of would be started and never measured), and no worker names
    /// another.
    pub(super) fn worker_urls(
        &mut self,
        command: crate::suite::node::Loc,
        router: &Launch,
        workers: &[Worker],
    ) {
        let placeholders = |l: &Launch| -> Vec<String> {
            l.command
                .iter()
                .chain(l.env.iter().map(|(_, v)| v))
                .flat_map(|a| a.match_indices("{worker.").map(move |(i, _)| &a[i + 8..]))
                .map(|rest| rest.split_once('}').map_or(rest, |(n, _)| n).to_owned())
                .collect()
        };
        for w in workers {
            if let Some(n) = placeholders(&w.launch).first() {
                self.error(
                    Diagnostic::new(
                        w.launch.loc,
                        format!("worker `{}` names `{{worker.{n}}}`", w.name),
                    )
                    .expected(
                        "`{worker.NAME}` in the router's command or env only (`launch.command`)",
                    ),
                );
            }
        }
        let told = placeholders(router);
        for n in &told {
            if !workers.iter().any(|w| &w.name == n) {
                let mut known: Vec<&str> = workers.iter().map(|w| w.name.as_str()).collect();
                known.dedup();
                self.error(
                    Diagnostic::new(
                        command,
                        format!("launch names `{{worker.{n}}}`, which is no worker"),
                    )
                    .expected(if known.is_empty() {
                        "a worker of that name under `launch.workers`".to_owned()
                    } else {
                        format!("one of the workers: {}", known.join(", "))
                    }),
                );
            }
        }
        for w in workers {
            if !told.contains(&w.name) {
                self.error(
                    Diagnostic::new(w.launch.loc, format!("worker `{}` is named nowhere in launch.command or launch.env: the router would not know it", w.name))
                        .expected(format!("`{{worker.{}}}` in the router's command, e.g. `--worker-urls {{worker.{}}}`", w.name, w.name)),
                );
            }
        }
    }
}
