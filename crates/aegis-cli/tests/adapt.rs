//! `aegis adapt` through the real binary and the real encoder.

use crate::{aegis, aegis_command, repo_root, stderr, stdout};

#[test]
fn adapting_twice_gives_the_same_adapter_and_the_heads_of_the_plain_encoder_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let adapt = |name: &str| -> Vec<u8> {
        let out_path = dir.path().join(format!("{name}.safetensors"));
        let out = aegis_command(&[
            "adapt",
            "--data",
            data.to_str().expect("path"),
            "--out",
            out_path.to_str().expect("path"),
            "--first-layer",
            "22",
            "--rank",
            "2",
            "--epochs",
            "2",
            "--batch-tokens",
            "128",
            "--log",
            dir.path().join("adapt.log").to_str().expect("path"),
        ])
        // Each run reads the lower layers itself: nothing is shared but the code.
        .env(
            "AEGIS_ADAPT_CACHE",
            dir.path().join(format!("cache-{name}")),
        )
        .output()
        .expect("runs");
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
