//! Decoding correctness probes: what a probe sends (`prompt`, `messages`,
//! `system`, `images`, a conversation's `turns`), its sampling, snapshot,
//! determinism and `contract` checks;
//! its assertions are decoded in `assertion.rs`, a `dataset:` in
//! `dataset.rs`.

use super::schema::probe::{MESSAGE, NUMERICS, PART, PROBE, TURN};
use super::schema::{SAMPLING, SNAPSHOT};
use super::{Decoder, Fields, quoted_list};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::image::{self, Image};
use crate::suite::model::{
    Api, Contract, DatasetTask, Input, Message, Numerics, Part, Probe, Sampling, SnapshotMode, Turn,
};
use crate::suite::names::Named as _;
use crate::suite::node::{Loc, Node, Yaml};

/// `numerics.within` where the suite states none: a tenth of a nat per
/// token, beyond what another kernel or batch size moves a model's mean
/// (hundredths) and far inside what broken numerics do (whole nats).
pub(crate) const NUMERICS_WITHIN: f64 = 0.1;

/// The roles of a chat message.
pub(super) const ROLES: &[&str] = &["system", "user", "assistant"];

impl Decoder<'_> {
    pub(super) fn probe(
        &mut self,
        y: &Yaml,
        defaults: &Sampling,
        snapshot_default: SnapshotMode,
        api: Api,
    ) -> Option<Probe> {
        let f = self.fields(y, "probe", &[PROBE, SNAPSHOT, SAMPLING])?;
        let name = self
            .required(&f, "name", "probe")
            .and_then(|v| self.name(v, "probe name"));
        if let Some(d) = f.get("dataset") {
            let dataset = self.dataset_probe(&f, d);
            let system = f.get("system").and_then(|v| self.text(v, "system"));
            return Some(Probe {
                name: name?,
                loc: y.loc,
                input: Input::prompt(
                    system,
                    match &dataset.as_ref()?.task {
                        DatasetTask::Qa(qa) => qa.template.clone(),
                        DatasetTask::HumanEval(_) => "{prompt}".to_owned(),
                    },
                ),
                sampling: self.sampling(&f, api).or(defaults),
                expect: Vec::new(),
                snapshot: SnapshotMode::Off,
                deterministic: None,
                dataset: Some(dataset?),
                contract: Vec::new(),
                numerics: None,
                turns: Vec::new(),
            });
        }
        if let Some(n) = f.get("numerics") {
            let numerics = self.numerics(n);
            for key in [
                "prompt",
                "messages",
                "images",
                "turns",
                "system",
                "expect",
                "dataset",
                "snapshot",
                "deterministic",
                "contract",
            ] {
                if let Some(k) = f.key(key) {
                    self.error(
                        Diagnostic::new(k.loc, format!("`{key}` on a numerics probe"))
                            .expected("the text it scores in `numerics.text`: a numerics probe asks for nothing else"),
                    );
                }
            }
            let numerics = numerics?;
            return Some(Probe {
                name: name?,
                loc: y.loc,
                input: Input::prompt(None, numerics.text.clone()),
                sampling: self.sampling(&f, api).or(defaults),
                expect: Vec::new(),
                snapshot: SnapshotMode::Off,
                deterministic: None,
                dataset: None,
                contract: Vec::new(),
                numerics: Some(numerics),
                turns: Vec::new(),
            });
        }
        if let Some(k) = f.key("thresholds") {
            self.error(
                Diagnostic::new(k.loc, "`thresholds` on a probe needs a `dataset`")
                    .expected("`expect:` assertions, or a `dataset:` with `accuracy` thresholds"),
            );
        }
        let sampling = self.sampling(&f, api).or(defaults);
        if let Some(t) = f.get("turns") {
            let (input, turns) = self.conversation(&f, t, api, &sampling)?;
            return Some(Probe {
                name: name?,
                loc: y.loc,
                input,
                sampling,
                expect: Vec::new(),
                snapshot: SnapshotMode::Off,
                deterministic: None,
                dataset: None,
                contract: Vec::new(),
                numerics: None,
                turns,
            });
        }
        let input = self.input(&f, api);
        let snapshot = match f.get("snapshot") {
            Some(v) => self.snapshot_mode(v, "snapshot")?,
            None => snapshot_default,
        };
        let deterministic = f
            .get("deterministic")
            .and_then(|v| self.count::<u32>(v, "deterministic", 2));
        let contract = f
            .get("contract")
            .map_or_else(Vec::new, |v| self.contract(v, &sampling));
        // A snapshot, a determinism or a contract check is a check of its own.
        let expect = if snapshot != SnapshotMode::Off
            || f.get("deterministic").is_some()
            || f.get("contract").is_some()
        {
            Some(
                f.get("expect")
                    .map_or_else(Vec::new, |v| self.items(v, "expect", Decoder::assertion)),
            )
        } else {
            self.required(&f, "expect", "probe")
                .map(|v| self.items(v, "expect", Decoder::assertion))
        };
        let mut expect = expect;
        if let Some(list) = expect.as_mut() {
            self.resolve_request_checks(list, &sampling);
        }
        if let (Some(v), Some(list)) = (f.get("expect"), &expect)
            && list.is_empty()
            && matches!(&v.node, Node::Seq(items) if items.is_empty())
        {
            self.error(
                Diagnostic::new(
                    v.loc,
                    "`expect` is empty: a probe without assertions always passes",
                )
                .expected("at least one assertion, e.g. `- contains: \"def is_prime\"`"),
            );
        }
        Some(Probe {
            name: name?,
            loc: y.loc,
            input: input?,
            sampling,
            expect: expect?,
            snapshot,
            deterministic,
            dataset: None,
            contract,
            numerics: None,
            turns: Vec::new(),
        })
    }

    /// A conversation probe: its context (`system`, or `messages` before
    /// the first turn) and its `turns`, each a user message with its own
    /// assertions (chat API only).
    fn conversation(
        &mut self,
        f: &Fields<'_>,
        turns: &Yaml,
        api: Api,
        sampling: &Sampling,
    ) -> Option<(Input, Vec<Turn>)> {
        for key in [
            "prompt",
            "images",
            "expect",
            "snapshot",
            "deterministic",
            "contract",
            "tools",
        ] {
            if let Some(k) = f.key(key) {
                self.error(
                    Diagnostic::new(k.loc, format!("`{key}` does not go with `turns`"))
                        .expected("each turn's own `prompt`, `images` and `expect`: a conversation probe checks every answer, keeps no snapshot, and carries answers, not tool calls"),
                );
            }
        }
        if api != Api::OpenAiChat {
            self.error(
                Diagnostic::new(
                    f.key("turns").map_or(turns.loc, |k| k.loc),
                    format!(
                        "`turns` needs `api: openai-chat`; this suite uses {}",
                        api.name()
                    ),
                )
                .expected("a chat suite: the model's answers go back as `assistant` messages"),
            );
        }
        let before = match (f.get("messages"), f.get("system")) {
            (Some(_), _) => self.input(f, api)?,
            (None, system) => Input::Messages(
                system
                    .and_then(|v| self.text(v, "system"))
                    .map(|s| Message::text("system", &s))
                    .into_iter()
                    .collect(),
            ),
        };
        let list = self.items(turns, "turns", |d, item| {
            let tf = d.fields(item, "turn", &[TURN])?;
            let prompt = d
                .required(&tf, "prompt", "turn")
                .and_then(|v| d.text(v, "prompt"));
            let mut content: Vec<Part> = tf
                .get("images")
                .map(|v| d.image_list(v).into_iter().map(Part::Image).collect())
                .unwrap_or_default();
            let expect_yaml = d.required(&tf, "expect", "turn")?;
            let mut expect = d.items(expect_yaml, "expect", Decoder::assertion);
            d.not_empty(expect_yaml, &expect, "expect");
            d.resolve_request_checks(&mut expect, sampling);
            content.push(Part::Text(prompt?));
            Some(Turn {
                loc: item.loc,
                message: Message {
                    role: "user".to_owned(),
                    content,
                },
                expect,
            })
        });
        if list.is_empty() {
            if matches!(&turns.node, Node::Seq(items) if items.is_empty()) {
                self.error(Diagnostic::new(turns.loc, "`turns` is empty"));
            }
            return None;
        }
        Some((before, list))
    }

    /// A `numerics:` block (any API: the server's own scoring request is
    /// sent, whatever the suite's requests are).
    fn numerics(&mut self, y: &Yaml) -> Option<Numerics> {
        let f = self.fields(y, "numerics", &[NUMERICS])?;
        let text = self
            .required(&f, "text", "numerics")
            .and_then(|v| self.text(v, "numerics.text"));
        let mean_logprob = match f.get("mean_logprob") {
            Some(v) => Some(self.float(v, "numerics.mean_logprob")?),
            None => None,
        };
        if let (Some(v), Some(m)) = (f.get("mean_logprob"), mean_logprob)
            && m > 0.0
        {
            self.error(
                Diagnostic::new(
                    v.loc,
                    format!("`mean_logprob` is {m}: a log-probability is at most 0"),
                )
                .expected("the mean a run of a known-good configuration measured, e.g. `-1.71`"),
            );
        }
        let within = match f.get("within") {
            Some(v) => {
                let w = self.float(v, "numerics.within")?;
                if w <= 0.0 {
                    self.error(Diagnostic::new(v.loc, "`within` must be above 0"));
                }
                w
            }
            None => NUMERICS_WITHIN,
        };
        Some(Numerics {
            text: text?,
            mean_logprob,
            within,
        })
    }

    fn contract(&mut self, y: &Yaml, sampling: &Sampling) -> Vec<Contract> {
        let list = self.items(y, "contract", |d, item| {
            let c: Contract = d.pick(item, "contract check")?;
            let needs = match c {
                Contract::MaxTokens | Contract::IgnoreEos if sampling.max_tokens.is_none() => {
                    Some("`max_tokens` on the probe (or in `defaults`)")
                }
                Contract::Stop if sampling.stop.as_ref().is_none_or(Vec::is_empty) => {
                    Some("`stop` sequences on the probe that its answer would contain")
                }
                _ => None,
            };
            if let Some(needs) = needs {
                d.error(Diagnostic::new(
                    item.loc,
                    format!("contract check `{}` needs {needs}", c.name()),
                ));
                return None;
            }
            Some(c)
        });
        if list.is_empty() && matches!(&y.node, Node::Seq(items) if items.is_empty()) {
            self.error(
                Diagnostic::new(y.loc, "`contract` is empty")
                    .expected(format!("some of {}", quoted_list(&Contract::names()))),
            );
        }
        list
    }

    fn input(&mut self, f: &Fields<'_>, api: Api) -> Option<Input> {
        let system = f.get("system").and_then(|v| self.text(v, "system"));
        let chat_only = |d: &mut Self, key: &str| {
            if api != Api::OpenAiChat
                && let Some(k) = f.key(key)
            {
                d.error(
                    Diagnostic::new(
                        k.loc,
                        format!(
                            "`{key}` needs `api: openai-chat`; this suite uses {}",
                            api.name()
                        ),
                    )
                    .expected("`prompt` alone for completion-style APIs"),
                );
            }
        };
        chat_only(self, "system");
        chat_only(self, "chat_template_kwargs");
        chat_only(self, "separate_reasoning");
        let images = f.get("images").map(|v| {
            self.images_need(api, f.key("images").map_or(v.loc, |k| k.loc));
            self.image_list(v)
        });
        match (f.get("prompt"), f.get("messages")) {
            (Some(p), None) => {
                let prompt = self.text(p, "prompt")?;
                Some(Input::Prompt {
                    system,
                    prompt,
                    images: images.unwrap_or_default(),
                })
            }
            (None, Some(m)) => {
                chat_only(self, "messages");
                if f.get("system").is_some() {
                    self.error(Diagnostic::new(
                        m.loc,
                        "`system` and `messages` both given: put the system message in `messages`",
                    ));
                }
                if let Some(k) = f.key("images") {
                    self.error(
                        Diagnostic::new(k.loc, "`images` and `messages` both given")
                            .expected("the images as parts of a message's `content`: `- image: <file or URL>`"),
                    );
                }
                let messages = self.items(m, "messages", |d, item| {
                    let mf = d.fields(item, "message", &[MESSAGE])?;
                    let role = d
                        .required(&mf, "role", "message")
                        .and_then(|v| d.one_of(v, "role", ROLES));
                    let content = d
                        .required(&mf, "content", "message")
                        .and_then(|v| d.content(v, api));
                    Some(Message {
                        role: role?,
                        content: content?,
                    })
                });
                Some(Input::Messages(messages))
            }
            (Some(p), Some(_)) => {
                self.error(Diagnostic::new(
                    p.loc,
                    "a probe has either `prompt` or `messages`, not both",
                ));
                None
            }
            (None, None) => {
                self.error(
                    Diagnostic::new(f.loc, "missing field `prompt` in probe")
                        .expected("`prompt: \"…\"` or a `messages:` list"),
                );
                None
            }
        }
    }

    /// A message's `content`: a text, or a list of parts (`- text: …`,
    /// `- image: <file or URL>`).
    fn content(&mut self, y: &Yaml, api: Api) -> Option<Vec<Part>> {
        if !matches!(y.node, Node::Seq(_)) {
            return self.text(y, "content").map(|t| vec![Part::Text(t)]);
        }
        let mut images = false;
        let parts = self.items(y, "content", |d, item| {
            let pf = d.fields(item, "content part", &[PART])?;
            match (pf.get("text"), pf.get("image")) {
                (Some(t), None) => d.text(t, "text").map(Part::Text),
                (None, Some(i)) => {
                    images = true;
                    d.image(i).map(Part::Image)
                }
                _ => {
                    d.error(
                        Diagnostic::new(item.loc, "a content part has one of `text` and `image`")
                            .expected("`- text: \"…\"` or `- image: <file or URL>`"),
                    );
                    None
                }
            }
        });
        if images {
            self.images_need(api, y.loc);
        }
        if parts.is_empty() && matches!(&y.node, Node::Seq(items) if items.is_empty()) {
            self.error(Diagnostic::new(y.loc, "`content` is an empty list"));
            return None;
        }
        Some(parts)
    }

    /// An `images:` list, which may not be empty: a probe whose image list
    /// is empty would send none.
    fn image_list(&mut self, y: &Yaml) -> Vec<Image> {
        let images = self.items(y, "images", Decoder::image);
        self.not_empty(y, &images, "images");
        images
    }

    /// An error where a list written empty (`[]`) would make a check that
    /// checks nothing, or send nothing.
    fn not_empty<T>(&mut self, y: &Yaml, list: &[T], key: &str) {
        if list.is_empty() && matches!(&y.node, Node::Seq(items) if items.is_empty()) {
            self.error(
                Diagnostic::new(y.loc, format!("`{key}` is empty"))
                    .expected("at least one item: an empty list checks nothing, or sends nothing"),
            );
        }
    }

    /// One image: a file relative to the suite (read now, sent as a `data:`
    /// URL), a `data:` URL or an http(s) URL.
    fn image(&mut self, y: &Yaml) -> Option<Image> {
        let written = self.interpolated(y, "image")?;
        let read = if written.contains("://") || written.starts_with("data:") {
            image::from_url(&written)
        } else {
            let path = self.file(y, "image")?;
            image::from_file(&path, &written)
        };
        read.map_err(|e| self.error(Diagnostic::new(y.loc, e))).ok()
    }

    /// Images go where the API takes them: chat content parts and SGLang
    /// `/generate`'s `image_data`.
    pub(super) fn images_need(&mut self, api: Api, loc: Loc) {
        if !matches!(api, Api::OpenAiChat | Api::SglangGenerate) {
            self.error(
                Diagnostic::new(
                    loc,
                    format!("images need `api: openai-chat` or `api: sglang-generate`; this suite uses {}", api.name()),
                )
                .expected("a chat suite (images as content parts) or SGLang's `/generate` (`image_data`)"),
            );
        }
    }
}
