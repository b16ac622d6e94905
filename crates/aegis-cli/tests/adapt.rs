//! `aegis adapt` through the real binary and the real encoder.

use std::path::Path;
use std::process::Output;

use crate::{aegis, aegis_command, repo_root, stderr, stdout};

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn adapting_twice_gives_the_same_adapter_and_the_heads_of_the_plain_encoder_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let adapt = |name: &str| -> Vec<u8> {
        let out_path = dir.path().join(format!("{name}.safetensors"));
        // Each run reads the lower layers itself: nothing is shared but the code.
        let out = small_adapt(
            dir.path(),
            &format!("cache-{name}"),
            &data,
            "2",
            &["--out", out_path.to_str().expect("path")],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        std::fs::read(&out_path).expect("an adapter")
    };
    let first = adapt("first");
    assert_eq!(
        first,
        adapt("second"),
        "the same data and seed give the same bytes"
    );
    let log = std::fs::read_to_string(dir.path().join("adapt.log")).expect("log");
    assert!(log.contains("epoch 2 step"), "{log}");

    // Beside the shipped heads, the adapted encoder has another content hash: every head trained
    // on the plain one is refused and says why.
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(prompts.join("heads")).expect("mkdir");
    let shipped = repo_root().join("prompt_guard");
    std::fs::copy(shipped.join("toxic.txt"), prompts.join("toxic.txt")).expect("template");
    std::fs::copy(
        shipped.join("heads/toxic.json"),
        prompts.join("heads/toxic.json"),
    )
    .expect("head");
    let check = || {
        aegis(&[
            "check",
            "--no-history",
            "--prompts",
            prompts.to_str().expect("path"),
            "dasar goblok",
        ])
    };
    let plain = check();
    assert!(
        !stderr(&plain).contains("head not used"),
        "{}",
        stderr(&plain)
    );
    std::fs::write(prompts.join("heads/encoder-adapter.safetensors"), &first).expect("write");
    let adapted = check();
    let err = stderr(&adapted);
    assert!(err.contains("toxic.json: head not used"), "{err}");
    assert!(err.contains("trained for encoder"), "{err}");
    assert!(stdout(&adapted).contains("prompt"), "{}", stdout(&adapted));
}

/// `aegis adapt` on `data` at the small settings these tests train with (rank 2, short batches),
/// its lower-layer states cached in `dir`/`cache` and its log in `dir`; `more` adds flags.
fn small_adapt(dir: &Path, cache: &str, data: &Path, epochs: &str, more: &[&str]) -> Output {
    let log = dir.join("adapt.log");
    let mut args = vec![
        "adapt",
        "--data",
        data.to_str().expect("path"),
        "--rank",
        "2",
        "--epochs",
        epochs,
        "--batch-tokens",
        "128",
        "--log",
        log.to_str().expect("path"),
    ];
    args.extend(more);
    aegis_command(&args)
        .env("AEGIS_ADAPT_CACHE", dir.join(cache))
        .output()
        .expect("runs")
}

/// Rows of `sources` sources, each with three insults and three everyday messages of its own.
fn labelled_rows(sources: usize) -> String {
    let insults = [
        "you useless idiot",
        "shut up, you pathetic clown",
        "nobody wants you here, loser",
    ];
    let everyday = [
        "the train leaves at nine",
        "thanks for the slides",
        "see you at lunch",
    ];
    let mut rows = String::new();
    for source in 0..sources {
        for (texts, toxic) in [(insults, true), (everyday, false)] {
            for text in texts {
                let row = serde_json::json!({
                    "text": format!("{text}, message {source}"),
                    "lang": "en",
                    "labels": {"toxic": toxic},
                    "source": format!("source-{source}"),
                });
                rows.push_str(&format!("{row}\n"));
            }
        }
    }
    rows
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn cross_fitting_reports_the_plain_and_the_adapted_encoder_on_held_out_sources_and_its_out_of_fold_embeddings_train_the_heads(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("rows.jsonl");
    std::fs::write(&data, labelled_rows(6)).expect("data");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(prompts.join("heads")).expect("mkdir");
    let scored = repo_root().join("docs/held-back/kinds-holdout.jsonl");
    let out_of_fold = dir.path().join("out-of-fold.safetensors");
    let out = small_adapt(
        dir.path(),
        "cache",
        &data,
        "1",
        &[
            "--validators",
            "toxic",
            "--prompts",
            prompts.to_str().expect("path"),
            "--cross-fit",
            "2",
            "--score",
            scored.to_str().expect("path"),
            "--out-of-fold",
            out_of_fold.to_str().expect("path"),
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("wrote 36 training rows' out-of-fold embeddings"),
        "{err}"
    );
    assert!(
        err.contains(
            "cross-fitting 2 adapters on 36 training rows from 6 sources; 70 rows scored only"
        ),
        "{err}"
    );
    for line in [
        "== plain encoder ==",
        "== adapted, heads trained on the other folds ==",
        "== adapted, each fold's own steering heads (stacking on scores) ==",
    ] {
        let section = err
            .split(line)
            .nth(1)
            .unwrap_or_else(|| panic!("{line} missing: {err}"));
        assert!(
            section.contains("toxic             held-out-source ROC AUC en "),
            "{section}"
        );
        assert!(
            section.contains("kinds-holdout.jsonl: benign rows flagged by any validator "),
            "{section}"
        );
        assert!(
            section.contains("polite-contempt              en     10 rows: toxic caught "),
            "{section}"
        );
        assert!(
            section.contains("report-quoted                id     10 rows: flagged by any "),
            "{section}"
        );
    }
    // A measurement only: no adapter is written or applied.
    assert_eq!(
        std::fs::read_dir(prompts.join("heads"))
            .expect("heads")
            .count(),
        0
    );

    // Heads train on the out-of-fold embeddings only beside an adapter (trained, as shipped, on
    // every row with the same settings).
    std::fs::copy(
        repo_root().join("prompt_guard/toxic.txt"),
        prompts.join("toxic.txt"),
    )
    .expect("template");
    let heads_out = dir.path().join("heads-out");
    std::fs::create_dir_all(&heads_out).expect("mkdir");
    let train = |out: &Path, more: &[&str]| {
        let mut args = vec![
            "train",
            "toxic",
            "--prompts",
            prompts.to_str().expect("path"),
            "--data",
            data.to_str().expect("path"),
            "--layers",
            "embedding",
            "--folds",
            "3",
            "--out",
            out.to_str().expect("path"),
        ];
        args.extend(more);
        aegis(&args)
    };
    let from_file = ["--out-of-fold", out_of_fold.to_str().expect("path")];
    let refused = train(&heads_out, &from_file);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("--out-of-fold embeddings are an adapter's"),
        "{}",
        stderr(&refused)
    );
    let adapter_path = prompts.join("heads/encoder-adapter.safetensors");
    let adapter = small_adapt(
        dir.path(),
        "cache",
        &data,
        "1",
        &[
            "--validators",
            "toxic",
            "--out",
            adapter_path.to_str().expect("path"),
        ],
    );
    assert!(adapter.status.success(), "{}", stderr(&adapter));
    let trained = train(&heads_out, &from_file);
    let err = stderr(&trained);
    assert!(trained.status.success(), "{err}");
    assert!(err.contains("36 of 36 rows read out of fold"), "{err}");
    // The head names the cross-fit run it was trained on.
    let head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(heads_out.join("toxic.json")).expect("a head"),
    )
    .expect("JSON");
    let run = head["training"]["out_of_fold"].as_str().unwrap_or_default();
    assert!(run.contains("\"rank\":2"), "{head}");
    // The file's embeddings are what it learned from: on the adapter's own reading of the same
    // rows the weights differ.
    let own_out = dir.path().join("heads-own-reading");
    std::fs::create_dir_all(&own_out).expect("mkdir");
    let own_reading = train(&own_out, &[]);
    assert!(own_reading.status.success(), "{}", stderr(&own_reading));
    let own: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(own_out.join("toxic.json")).expect("a head"))
            .expect("JSON");
    assert!(
        own["weights"] != head["weights"],
        "the head has the weights of one trained on the adapter's own reading"
    );
}
