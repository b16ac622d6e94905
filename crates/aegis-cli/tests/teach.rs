//! `aegis examples` and `aegis heads` on a real history file, and `aegis train --examples` on the
//! real model writing head versions that `aegis heads revert` restores byte for byte.

use std::path::Path;

use crate::{aegis, aegis_command, repo_root, stderr, stdout};

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
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn examples_merge_show_contradictions_import_and_refuse_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db = history.arg();
    let db = db.as_str();
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
    // A label on a message `aegis examples suggest` chose keeps that origin: the default line is
    // drawn on the author's other examples.
    let suggested_text = "Promo cuma hari ini, klik link di bio";
    add(&["spam", suggested_text, "--fail", "--suggested"]);
    let spam = json(&examples(db, &["list", "spam", "--json"]));
    assert!(
        spam.as_array()
            .expect("list")
            .iter()
            .any(|e| e["text"] == suggested_text && e["origin"] == "suggestion"),
        "{spam:?}"
    );
    let total = json(&examples(db, &["list", "--json"]));
    assert_eq!(total.as_array().map(Vec::len), Some(15));

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
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn taught_examples_train_a_new_version_and_revert_restores_the_old_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db = history.arg();
    let db = db.as_str();
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
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
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

/// The apply of a head is three writes in two places (head file, template threshold, version
/// list). The process is stopped dead at each step in turn (as `kill -9` would stop it: nothing
/// more of ours runs), and the next command that reads the folder finds the old state whole or
/// the new state whole, never a new head beside an old threshold or a head the list lacks.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_kill_at_any_step_of_an_apply_leaves_the_old_state_or_the_new() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped = std::fs::read(repo_root().join("prompt_guard/heads/toxic.json")).expect("head");
    let old_threshold = threshold_in(
        &std::fs::read_to_string(repo_root().join("prompt_guard/toxic.txt")).expect("template"),
    );
    // The new head: the shipped one with another threshold (and so other bytes).
    let mut new_head: serde_json::Value = serde_json::from_slice(&shipped).expect("head JSON");
    new_head["training"]["threshold"] = serde_json::json!(0.5);
    let new_file = dir.path().join("new-toxic.json");
    std::fs::write(
        &new_file,
        serde_json::to_vec_pretty(&new_head).expect("JSON"),
    )
    .expect("write");

    let steps = [
        ("planned", false),
        ("journal-written", true),
        ("head-written", true),
        ("template-written", true),
        ("version-recorded", true),
    ];
    for (step, finishes_new) in steps {
        let case = dir.path().join(step);
        let prompts = prompts_with(&case, "toxic");
        let heads = prompts.join("heads");
        std::fs::create_dir_all(&heads).expect("mkdir");
        let shipped_file = case.join("shipped-toxic.json");
        std::fs::write(&shipped_file, &shipped).expect("write");
        let db = case.join("h.db");
        let (db, prompts_arg) = (db.to_str().expect("path"), prompts.to_str().expect("path"));
        let apply = |file: &Path, fault: Option<&str>| {
            let mut command = aegis_command(&[
                "heads",
                "--db",
                db,
                "apply",
                file.to_str().expect("path"),
                "--prompts",
                prompts_arg,
                "--note",
                "kill test",
            ]);
            if let Some(fault) = fault {
                command.env("AEGIS_FAULT_POINT", fault);
            }
            command.output().expect("aegis runs")
        };
        let first = apply(&shipped_file, None);
        assert!(first.status.success(), "{}", stderr(&first));

        let killed = apply(&new_file, Some(step));
        assert_eq!(
            killed.status.code(),
            Some(aegis_teach::FAULT_POINT_EXIT),
            "{step}: stopped at the fault point: {}",
            stderr(&killed)
        );

        // Any command that reads the folder finishes what the journal promised first.
        let listed = aegis(&[
            "heads",
            "--db",
            db,
            "versions",
            "toxic",
            "--json",
            "--prompts",
            prompts_arg,
        ]);
        assert!(listed.status.success(), "{step}: {}", stderr(&listed));
        let versions = json(&listed);
        let head = std::fs::read(heads.join("toxic.json")).expect("live head");
        let head: serde_json::Value = serde_json::from_slice(&head).expect("whole JSON");
        let threshold =
            threshold_in(&std::fs::read_to_string(prompts.join("toxic.txt")).expect("template"));
        let notes: Vec<&str> = versions
            .as_array()
            .expect("versions")
            .iter()
            .map(|v| v["note"].as_str().expect("note"))
            .collect();
        if finishes_new {
            assert_eq!(head, new_head, "{step}: the new head");
            assert_eq!(threshold, 0.5, "{step}: with its threshold");
            assert_eq!(notes, ["kill test", "kill test"], "{step}: listed");
        } else {
            assert_eq!(
                head["training"]["threshold"],
                serde_json::json!(old_threshold)
            );
            assert_eq!(threshold, old_threshold, "{step}: the old threshold");
            assert_eq!(notes, ["kill test"], "{step}: the old list");
        }
        let left: Vec<String> = std::fs::read_dir(&prompts)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with('.'))
            .collect();
        assert!(
            left.is_empty(),
            "{step}: no journal or temporary left: {left:?}"
        );
    }
}

fn threshold_in(template: &str) -> f64 {
    template
        .lines()
        .find_map(|line| line.strip_prefix("threshold:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("a threshold line")
}

/// A validator taught from positives alone, against data that never mentions its topic
/// (docs/examples/gambling/), is warned that it learned the topic; once its author teaches near
/// misses (messages on the topic that pass), the warning is gone.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_positives_only_validator_is_warned_until_it_is_taught_near_misses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.db");
    let db = db.to_str().expect("path");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    let gambling = repo_root().join("docs/examples/gambling");
    std::fs::copy(
        gambling.join("gambling_promotion.txt"),
        prompts.join("gambling_promotion.txt"),
    )
    .expect("copy template");
    let prompts = prompts.to_str().expect("path");
    // The Teach view's end-to-end sample (benign chat and the shipped validators' positives)
    // less its three stock and forex tips: those are on the topic of easy money, so whether one
    // of them scores near the promotions (and silences the warning) is a question of a few
    // rows' scores, which the CPU's arithmetic moves. Without them, nothing passing is close.
    let sample = std::fs::read_to_string(repo_root().join("ui/e2e/fixtures/teach-data.jsonl"))
        .expect("sample");
    let data = dir.path().join("data.jsonl");
    std::fs::write(
        &data,
        sample
            .lines()
            .filter(|line| !line.contains("\"financial_advice\": true"))
            .map(|line| format!("{line}\n"))
            .collect::<String>(),
    )
    .expect("write");
    let import = |file: &Path| {
        let out = examples(
            db,
            &[
                "import",
                file.to_str().expect("path"),
                "--validator",
                "gambling_promotion",
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let train_with = |flags: &[&str]| {
        let mut args = vec![
            "train",
            "gambling_promotion",
            "--examples",
            "--db",
            db,
            "--prompts",
            prompts,
            "--data",
            data.to_str().expect("path"),
            "--layers",
            "embedding",
        ];
        args.extend_from_slice(flags);
        let out = aegis(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let train = || train_with(&["--tune-thresholds", "--dry-run"]);
    import(&gambling.join("positives.jsonl"));
    let alone = train();
    assert!(
        alone
            .contains("may have learned the topic, not the policy: no passing example scores near"),
        "{alone}"
    );

    // The pool's near misses, as an author would mark them.
    let near_misses: String = std::fs::read_to_string(gambling.join("pool.jsonl"))
        .expect("pool")
        .lines()
        .filter(|line| line.contains("\"gambling_promotion\": false"))
        .map(|line| format!("{line}\n"))
        .collect();
    let file = dir.path().join("near-misses.jsonl");
    std::fs::write(&file, near_misses).expect("write");
    import(&file);
    let taught = train();
    assert!(
        !taught.contains("may have learned the topic"),
        "near misses that score near the promotions silence it: {taught}"
    );

    // Applied, the head says which of the pool to label next: never one labelled already.
    train_with(&[]);
    let pool = gambling.join("pool.jsonl");
    let out = examples(
        db,
        &[
            "suggest",
            "gambling_promotion",
            "--from",
            pool.to_str().expect("path"),
            "-n",
            "6",
            "--json",
            "--prompts",
            prompts,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let suggested: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("suggestions as JSON");
    assert_eq!(suggested.len(), 6, "{suggested:?}");
    let taught_texts = std::fs::read_to_string(&file).expect("near misses");
    for s in &suggested {
        let text = s["text"].as_str().expect("text");
        assert!(!taught_texts.contains(text), "{text} is labelled already");
        assert_eq!(s["from"], "pool.jsonl");
        let score = s["score"].as_f64().expect("score");
        assert!((0.0..=1.0).contains(&score), "{s}");
        assert!(s["fails"].is_boolean(), "{s}");
    }
    assert_eq!(suggested[0]["reason"], "unsure");
    assert_eq!(suggested[1]["reason"], "highest_unlabelled");
}

/// `--threshold` places one validator's line between 0 and 1; anything else is refused before
/// the data or the model is read.
#[test]
fn a_placed_threshold_out_of_range_or_for_several_validators_is_refused() {
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let data = data.to_str().expect("path");
    for (args, expected) in [
        (
            vec!["train", "toxic", "--threshold", "1.5"],
            "--threshold must be between 0 and 1",
        ),
        (
            vec!["train", "toxic", "--threshold", "0"],
            "--threshold must be between 0 and 1",
        ),
        (
            vec!["train", "toxic", "spam", "--threshold", "0.3"],
            "name that one validator",
        ),
        (
            vec!["train", "--threshold", "0.3"],
            "name that one validator",
        ),
    ] {
        let mut args = args;
        args.extend(["--data", data]);
        let out = aegis(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
