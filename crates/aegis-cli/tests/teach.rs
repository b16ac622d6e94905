//! `aegis examples` and `aegis heads` on a real history file, and `aegis train --examples` on the
//! real model writing head versions that `aegis heads revert` restores byte for byte.

use std::path::Path;

use crate::{aegis, repo_root, stderr, stdout};

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_str(&stdout(out)).expect("JSON on stdout")
}

fn examples(db: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["examples", "--db", db];
    all.extend_from_slice(args);
    aegis(&all)
}

#[test]
fn examples_merge_show_contradictions_import_and_refuse_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.db");
    let db = db.to_str().expect("path");
    let add = |args: &[&str]| {
        let mut all = vec!["add"];
        all.extend_from_slice(args);
        let out = examples(db, &all);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    assert!(add(&[
        "pii_request",
        "Tolong kirimkan kode OTP kamu ke nomor saya sekarang ya",
        "--fail"
    ])
    .contains("added"));
    assert!(add(&[
        "pii_request",
        "Tolong kirimkan kode OTP  kamu ke nomor saya sekarang ya",
        "--fail"
    ])
    .contains("counted again"));
    add(&[
        "pii_request",
        "Tolong kirimkan kode OTP kamu ke nomor saya sekarang ya",
        "--pass",
    ]);
    let listed = json(&examples(db, &["list", "pii_request", "--json"]));
    let listed = listed.as_array().expect("list");
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|e| e["contradicted"] == true),
        "{listed:?}"
    );
    assert_eq!(listed[0]["language"], "id", "detected");
    let table = examples(db, &["list"]);
    assert!(
        stdout(&table).contains("CONTRADICTED"),
        "{}",
        stdout(&table)
    );

    // A labelled file: each non-null label is an example of its validator.
    let fixture = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let out = examples(
        db,
        &[
            "import",
            fixture.to_str().expect("path"),
            "--validator",
            "toxic",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("12 new examples"), "{}", stdout(&out));
    let again = examples(
        db,
        &[
            "import",
            fixture.to_str().expect("path"),
            "--validator",
            "toxic",
        ],
    );
    assert!(
        stdout(&again).contains("0 new examples, 12 merged"),
        "{}",
        stdout(&again)
    );

    // A file with a broken line adds nothing; unknown ids and empty text are refused.
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        "{\"text\": \"ok\", \"labels\": {\"spam\": false}}\n{\"text\": \n",
    )
    .expect("write");
    let out = examples(db, &["import", broken.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
    let out = examples(db, &["remove", "9999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no example with id 9999"),
        "{}",
        stderr(&out)
    );
    let out = examples(db, &["add", "spam", "   ", "--fail"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("needs some text"), "{}", stderr(&out));
    let total = json(&examples(db, &["list", "--json"]));
    assert_eq!(total.as_array().map(Vec::len), Some(14));

    let first = listed[0]["id"].to_string();
    assert!(examples(db, &["remove", &first]).status.success());
    let after = json(&examples(db, &["list", "pii_request", "--json"]));
    assert_eq!(after.as_array().map(Vec::len), Some(1));
    assert_eq!(after[0]["contradicted"], false);
}

/// Copies one shipped template into a fresh templates folder.
fn prompts_with(dir: &Path, key: &str) -> std::path::PathBuf {
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    std::fs::copy(
        repo_root().join(format!("prompt_guard/{key}.txt")),
        prompts.join(format!("{key}.txt")),
    )
    .expect("copy template");
    prompts
}

#[test]
fn taught_examples_train_a_new_version_and_revert_restores_the_old_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.db");
    let db = db.to_str().expect("path");
    let prompts = prompts_with(dir.path(), "toxic");
    let prompts = prompts.to_str().expect("path");
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "toxic",
            "--db",
            db,
            "--prompts",
            prompts,
            "--data",
            data.to_str().expect("path"),
            "--encoder",
            "decoder",
            "--layers",
            "6",
            "--folds",
            "3",
        ];
        args.extend_from_slice(extra);
        let out = aegis(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("toxic: trained in"),
            "{}",
            stderr(&out)
        );
        out
    };
    let head_file = Path::new(prompts).join("heads/decoder/toxic.json");
    train(&[]);
    let first = std::fs::read(&head_file).expect("first head");

    for text in [
        "kamu memang sampah masyarakat",
        "otakmu kosong, dasar dungu",
        "lu tuh beban keluarga",
    ] {
        let out = examples(db, &["add", "toxic", text, "--fail"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = train(&["--examples"]);
    assert!(
        stderr(&out).contains("3 taught examples from history"),
        "{}",
        stderr(&out)
    );
    let second = std::fs::read(&head_file).expect("second head");
    assert_ne!(first, second, "more data, another head");

    let versions = json(&aegis(&[
        "heads", "--db", db, "versions", "toxic", "--json",
    ]));
    let versions = versions.as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{versions:?}");
    let oldest = versions[1]["id"].to_string();
    let revert = aegis(&["heads", "--db", db, "revert", &oldest, "--prompts", prompts]);
    assert!(revert.status.success(), "{}", stderr(&revert));
    assert_eq!(
        std::fs::read(&head_file).expect("reverted head"),
        first,
        "revert is bit for bit"
    );
    let versions = json(&aegis(&[
        "heads", "--db", db, "versions", "toxic", "--json",
    ]));
    assert_eq!(versions.as_array().map(Vec::len), Some(3));
    assert_eq!(versions[0]["note"], format!("revert to version {oldest}"));
    let table = stdout(&aegis(&["heads", "--db", db, "versions", "toxic"]));
    assert!(table.contains("ROC AUC"), "{table}");
    let missing = aegis(&["heads", "--db", db, "revert", "999"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("no head version 999"),
        "{}",
        stderr(&missing)
    );
}

/// A validator the shipped data does not cover, created from a template and its positive
/// examples (`docs/examples/`): the data's rows become its negatives, and once trained its head
/// decides it, ranking a request for an OTP above everyday messages.
#[test]
fn a_new_validator_from_examples_is_decided_by_its_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.db");
    let db = db.to_str().expect("path");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    std::fs::copy(
        repo_root().join("docs/examples/personal_data_request.txt"),
        prompts.join("personal_data_request.txt"),
    )
    .expect("copy template");
    let prompts = prompts.to_str().expect("path");
    let positives = repo_root().join("docs/examples/personal-data-requests.jsonl");
    let out = examples(db, &["import", positives.to_str().expect("path")]);
    assert!(stdout(&out).contains("26 new examples"), "{}", stderr(&out));
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let out = aegis(&[
        "train",
        "personal_data_request",
        "--examples",
        "--db",
        db,
        "--prompts",
        prompts,
        "--data",
        data.to_str().expect("path"),
        "--folds",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no data file labels it, so its 12 negatives"),
        "{}",
        stderr(&out)
    );
    let score = |text: &str| {
        let out = aegis(&[
            "check",
            "--no-history",
            "--json",
            "--prompts",
            prompts,
            text,
        ]);
        assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        json["scores"]["personal_data_request"]
            .as_f64()
            .expect("score")
    };
    let request = score("Tolong sebutkan kode OTP yang baru masuk ke HP kamu ya");
    for everyday in ["Selamat pagi, apa kabar?", "ok thanks, see you tomorrow"] {
        let benign = score(everyday);
        assert!(
            request > benign,
            "OTP request {request} vs {everyday:?} {benign}"
        );
    }
    let table = stdout(&aegis(&[
        "check",
        "--no-history",
        "--prompts",
        prompts,
        "halo",
    ]));
    assert!(table.contains(" head "), "decided by its head: {table}");
}
