//! Images in probes: files read when the suite loads and sent as `data:`
//! URLs, images as parts of a message, SGLang `/generate`'s `image_data`,
//! a text-only server's refusal named, and suites that ask for images
//! where they cannot go refused at load.

use crate::common::run::{run_expecting, run_recorded, trial_of};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// A vision model names each image by its colour: the right image passes,
/// two images in one message arrive in the order written, and the wrong
/// image fails with the image named in what was sent (not its base64).
/// The record keeps the server's image tokens and no image bytes.
#[test]
fn a_vision_model_is_asked_about_the_images_the_suite_names() {
    let (o, record) = run_recorded("tests/suites/images.yaml");
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_eq!(
        verdict(&o.out, "images::correctness::red"),
        "ok",
        "{}",
        o.out
    );
    assert_eq!(
        verdict(&o.out, "images::correctness::parts"),
        "ok",
        "{}",
        o.out
    );
    assert_eq!(
        verdict(&o.out, "images::config::model_info.has_image_understanding"),
        "ok",
        "{}",
        o.out
    );
    let wrong = failure_of(&o.out, "images::correctness::wrong_image");
    assert_has(
        &wrong,
        &[
            "error: assertion failed: expected content matches regex",
            "tests/suites/images.yaml:30:9",
            "\"Blue.\"",
            r#"{"image_url":{"url":"<image fixtures/images/blue.png (image/png, 32×32, 99 B)>"},"type":"image_url"}"#,
        ],
    );
    assert!(!wrong.contains("base64"), "{wrong}");
    assert!(
        !record.to_string().contains("base64"),
        "the record keeps image bytes:\n{record}"
    );
    // 64×48 pixels: 3×2 patches of 28; 32×32: 2×2; both in `parts`.
    let image_tokens = |name: &str| trial_of(&record, name)["exchange"]["image_tokens"].clone();
    assert_eq!(image_tokens("images::correctness::red"), 6);
    assert_eq!(image_tokens("images::correctness::parts"), 10);
}

/// SGLang's `/generate` takes the images as `image_data`.
#[test]
fn sglang_generate_sends_images_as_image_data() {
    let out = run_expecting(&["run", "tests/suites/images-generate.yaml"], 0);
    assert_eq!(verdict(&out, "generate::correctness::red"), "ok", "{out}");
}

/// A text-only model's server refuses an image: the failure says which
/// image, the server's words and why it is the likeliest reason.
#[test]
fn a_text_only_server_refusing_an_image_is_named() {
    let out = run_expecting(&["run", "tests/suites/images-text-only.yaml"], 1);
    assert_has(
        &failure_of(&out, "text-only::correctness::image"),
        &[
            "error: request failed: HTTP 400",
            "Model only supports text input; received unsupported content type 'image_url'.",
            "note:     the server refused a request with 1 image: fixtures/images/red.png (image/png, 64×48, 132 B); a model without vision (or a server started without its vision encoder) refuses every image",
        ],
    );
}

/// Images where they cannot go, and files that are not images, are
/// errors at their line and column when the suite loads.
#[test]
fn images_that_cannot_be_sent_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let suite = dir.path().join("bad.yaml");
    std::fs::write(
        &suite,
        "suite: bad\ntarget: { base_url: sim, api: openai-completions }\ncorrectness:\n  - name: a\n    prompt: hi\n    images: [notes.txt]\n    expect: [{ contains: x }]\n  - name: b\n    prompt: hi\n    images: [gone.png]\n    expect: [{ contains: x }]\n  - name: d\n    prompt: hi\n    images: []\n    expect: [{ contains: x }]\n  - name: c\n    messages:\n      - role: user\n        content:\n          - { text: hi, image: notes.txt }\n    expect: [{ contains: x }]\n",
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":6:5\n",
            "images need `api: openai-chat` or `api: sglang-generate`; this suite uses openai-completions",
            ":6:14\n",
            "`notes.txt` is not a PNG, JPEG, GIF or WebP image",
            ":10:14\n",
            "image `gone.png` not found",
            ":14:13\n",
            "`images` is empty",
            ":20:13\n",
            "a content part has one of `text` and `image`",
        ],
    );
}

/// A load's requests carry images: generated one-colour PNGs of a size
/// (each request's another colour) and a directory's files in turn. The
/// simulated vision model counts each image's tokens as SGLang reports
/// them (a token a 28×28 patch: 100 for a 280×280 image, 6 for a 64×48
/// one), so the prompt tokens the server counted per request carry them;
/// a text-only server refuses each request, and the gate fails saying so.
#[test]
fn a_load_sends_its_images_with_every_request() {
    let (o, record) = run_recorded("tests/suites/image-load.yaml");
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "image_load::performance::generated [closed loop, concurrency 2, 6 requests, 4 output tokens, ~8 input tokens (synthetic, ~1 token per word, no tokenizer), 2 generated 280×280 PNG images each (one colour, another each request)]",
            "image_load::performance::files [closed loop, concurrency 1, 4 requests, 8 output tokens, fixed prompt of 26 chars, 1 image each from tests/suites/../../fixtures/images (2 files, in turn)]",
        ],
    );
    let per_request = |gate: &str| {
        let f = crate::gate_figures(&record, gate);
        f["input_tok_s"].as_f64().unwrap() / f["requests_per_s"].as_f64().unwrap()
    };
    let (generated, files) = (per_request("generated"), per_request("files"));
    assert!(
        (200.0..240.0).contains(&generated),
        "{generated} prompt tokens a request"
    );
    assert!(
        (6.0..40.0).contains(&files),
        "{files} prompt tokens a request"
    );
    let dir = tempfile::tempdir().unwrap();
    let o = crate::common::run::servegate_with(
        &[
            "run",
            "tests/suites/image-load.yaml",
            "--out-dir",
            dir.path().to_str().unwrap(),
            "--",
            "--exact",
            "image_load::performance::generated",
        ],
        &[(
            "SERVEGATE_TEST_IMAGE_PROFILE",
            std::path::Path::new("fixtures/sim/steady.yaml"),
        )],
    );
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_has(
        &failure_of(&o.out, "image_load::performance::generated"),
        &["Model only supports text input"],
    );
}

/// SGLang's `/generate` serves a text-only model its images ignored,
/// without a word, and counts no image tokens: a load whose images no
/// request's answer counted fails, its figures being a text load's; the
/// same load against a vision model passes.
#[test]
fn images_a_server_ignored_fail_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("generate.yaml");
    let profile = |name: &str| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::write(
        &suite,
        "suite: generate\ntarget: { base_url: sim, api: sglang-generate }\nsim: { profile: \"${PROFILE}\" }\nperformance:\n  - name: g\n    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { size: 56x56 } }\n    thresholds: { errors: \"== 0\" }\n",
    )
    .unwrap();
    let run = |p: &std::path::Path| {
        let out = dir.path().join("out");
        crate::common::run::servegate_with(
            &[
                "run",
                suite.to_str().unwrap(),
                "--out-dir",
                out.to_str().unwrap(),
            ],
            &[("PROFILE", p)],
        )
    };
    let text_only = run(&profile("fixtures/sim/sglang.yaml"));
    assert_eq!(text_only.code, Some(1), "{}", text_only.out);
    assert_has(
        &failure_of(&text_only.out, "generate::performance::g"),
        &["the server counted 0 image tokens for the 1 image(s) sent: it ignored them"],
    );
    let vision = run(&profile("fixtures/sim/vision.yaml"));
    assert_eq!(vision.code, Some(0), "{}", vision.out);
}

/// An image load that cannot be sent is an error where it is written.
#[test]
fn image_loads_that_cannot_be_sent_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    std::fs::create_dir(dir.path().join("one")).unwrap();
    std::fs::copy("fixtures/images/red.png", dir.path().join("one/red.png")).unwrap();
    let suite = dir.path().join("bad.yaml");
    std::fs::write(
        &suite,
        r#"suite: bad
target: { base_url: sim, api: openai-completions }
performance:
  - name: a
    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { size: 512 } }
    thresholds: { errors: "== 0" }
  - name: b
    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { count: 17, size: 8x8 } }
    thresholds: { errors: "== 0" }
  - name: c
    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { size: 8x8, dir: empty } }
    thresholds: { errors: "== 0" }
  - name: d
    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { dir: empty } }
    thresholds: { errors: "== 0" }
  - name: e
    load: { requests: 2, input_tokens: 8, output_tokens: 4, images: { count: 2, dir: one } }
    thresholds: { errors: "== 0" }
"#,
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":5:61\n",
            "images need `api: openai-chat` or `api: sglang-generate`; this suite uses openai-completions",
            ":5:77\n",
            "images.size \"512\" is not a size",
            ":8:78\n",
            "images.count is out of range: 17",
            ":11:69\n",
            "give `images` one of `size` or `dir`",
            ":14:76\n",
            "no image files",
            "images.count 2 is more than the directory's 1 images",
        ],
    );
}
