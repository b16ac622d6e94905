//! `aegis eval` on the real default model: a labelled CSV through the guard, the run kept,
//! re-measured at another threshold without the model, compared with another template set, and
//! reviewed history exported back as labelled data.

use std::path::Path;

use crate::{aegis, repo_root, stderr, stdout};

fn fixture() -> String {
    repo_root()
        .join("crates/aegis-cli/tests/fixtures/eval-small.csv")
        .display()
        .to_string()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        stderr(out)
    );
    serde_json::from_str(&stdout(out)).expect("JSON on stdout")
}

/// The shipped templates without their heads: the prompt's own score decides.
fn prompts_without_heads(dir: &Path) -> String {
    let out = dir.join("prompt-only");
    std::fs::create_dir_all(&out).expect("mkdir");
    for key in ["spam", "toxic", "harassment", "financial_advice"] {
        std::fs::copy(
            repo_root().join(format!("prompt_guard/{key}.txt")),
            out.join(format!("{key}.txt")),
        )
        .expect("copy template");
    }
    out.display().to_string()
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn eval_measures_stores_rethresholds_and_compares() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("runs.db").display().to_string();
    let html = dir.path().join("report.html");
    let baseline = prompts_without_heads(dir.path());
    let data = fixture();
    let out = aegis(&[
        "eval",
        &data,
        "--db",
        &db,
        "--json",
        "--html",
        html.to_str().expect("path"),
        "--compare",
        &baseline,
    ]);
    let run = json(&out);
    let report = &run["report"];
    assert_eq!(report["rows"], 8);
    assert_eq!(report["errors"].as_array().map(Vec::len), Some(0));
    let spam = &report["validators"][0];
    assert_eq!(spam["key"], "spam");
    assert_eq!(spam["scored_by"], "head");
    // 7 labelled (one blank), 3 positives; both languages present.
    assert_eq!(spam["overall"]["labelled"], 7);
    assert_eq!(spam["overall"]["positives"], 3);
    assert_eq!(spam["by_language"]["id"]["labelled"], 4);
    assert_eq!(spam["by_language"]["en"]["labelled"], 3);
    let confusion = &spam["overall"]["confusion"];
    let total: u64 = [
        "true_positives",
        "false_positives",
        "true_negatives",
        "false_negatives",
    ]
    .iter()
    .map(|k| confusion[*k].as_u64().expect("count"))
    .sum();
    assert_eq!(total, 7);
    // Harassment has no labels here: counted as unlabelled, no numbers made up.
    let harassment = &report["validators"][2];
    assert_eq!(harassment["overall"]["labelled"], 0);
    assert!(harassment["overall"]["f1"].is_null());
    let comparison = &run["comparison"];
    assert_eq!(comparison["deltas"].as_array().map(Vec::len), Some(4));
    assert!(comparison["baseline"]
        .as_str()
        .is_some_and(|b| b.ends_with("prompt-only")));
    let page = std::fs::read_to_string(&html).expect("HTML written");
    assert!(page.contains("<svg class=\"roc\"") && page.contains("Flipped verdicts"));

    // The run (and the baseline's) are stored; a new threshold needs no model.
    let runs = json(&aegis(&["eval", "runs", "--db", &db, "--json"]));
    assert_eq!(runs.as_array().map(Vec::len), Some(2));
    let run_id = run["run_id"].as_i64().expect("stored").to_string();
    let strict = json(&aegis(&[
        "eval",
        "show",
        &run_id,
        "--db",
        &db,
        "--json",
        "--threshold",
        "spam=0.999",
    ]));
    let strict_spam = &strict["report"]["validators"][0]["overall"];
    assert_eq!(strict_spam["threshold"], 0.999);
    let flagged_before = confusion["true_positives"].as_u64().unwrap_or(0)
        + confusion["false_positives"].as_u64().unwrap_or(0);
    let strict_confusion = &strict_spam["confusion"];
    let flagged_after = strict_confusion["true_positives"].as_u64().unwrap_or(0)
        + strict_confusion["false_positives"].as_u64().unwrap_or(0);
    assert!(flagged_after <= flagged_before);
    assert_eq!(
        strict_spam["roc_auc"], spam["overall"]["roc_auc"],
        "ranking is threshold-free"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn bad_datasets_and_flags_are_refused_before_the_model_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"text\": \"hi\", \"labels\": {\"spam\": \"yes\"}}\n",
    )
    .expect("write");
    let out = aegis(&["eval", bad.to_str().expect("path"), "--no-store"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
    let missing = aegis(&["eval", "/no/such/file.csv", "--no-store"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read"),
        "{}",
        stderr(&missing)
    );
    let seed = aegis(&["eval", &fixture(), "--seed", "3", "--no-store"]);
    assert_eq!(seed.status.code(), Some(2));
    assert!(stderr(&seed).contains("--limit"));
    let threshold = aegis(&["eval", &fixture(), "--threshold", "spam=2", "--no-store"]);
    assert_eq!(threshold.status.code(), Some(2));
    let no_run = aegis(&[
        "eval",
        "show",
        "99",
        "--db",
        &dir.path().join("x.db").display().to_string(),
    ]);
    assert_eq!(no_run.status.code(), Some(2));
    assert!(stderr(&no_run).contains("no stored evaluation run 99"));
}

/// One reader for labelled files: `aegis train --data` takes the CSV `aegis eval` takes, and a
/// malformed row gets the same words from both, before any model loads.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn train_and_eval_read_labelled_csv_with_one_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "text,spam\nhello,true\nWIN NOW,maybe\n").expect("write");
    let bad = bad.to_str().expect("path");
    let eval = aegis(&["eval", bad, "--no-store"]);
    let train = aegis(&["train", "spam", "--data", bad, "--dry-run"]);
    let said = "record 2, column spam: \"maybe\" is not a label";
    for (command, out) in [("eval", &eval), ("train", &train)] {
        assert!(!out.status.success(), "{command}");
        assert!(stderr(out).contains(said), "{command}: {}", stderr(out));
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn reviewed_history_exports_as_a_labelled_set_the_workbench_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db = history.arg();
    let text = "Promo spesial! Beli 1 gratis 1 hari ini saja, balas YA";
    let check = aegis(&["check", "--db", &db, "--json", text]);
    assert!(
        check.status.code().is_some_and(|c| c < 2),
        "{}",
        stderr(&check)
    );
    let verdict: serde_json::Value = serde_json::from_str(&stdout(&check)).expect("JSON");
    let spam_failed = verdict["execution_per_step"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["step"] == "spam"))
        .map(|s| s["status"] == "failed")
        .expect("a spam step");
    let review = aegis(&[
        "history",
        "--db",
        &db,
        "review",
        "1",
        "--agree",
        "--validator",
        "spam=overturn",
        "--reviewer",
        "rina",
    ]);
    assert!(review.status.success(), "{}", stderr(&review));
    let out_path = dir.path().join("reviewed.jsonl");
    let export = aegis(&[
        "history",
        "--db",
        &db,
        "export",
        "--reviewed",
        "--as-eval",
        "--out",
        out_path.to_str().expect("path"),
    ]);
    assert!(export.status.success(), "{}", stderr(&export));
    let written = std::fs::read_to_string(&out_path).expect("written");
    let row: serde_json::Value = serde_json::from_str(written.trim()).expect("one JSON row");
    assert_eq!(row["text"], text);
    assert_eq!(row["id"], "review:1");
    // The overturn flips the guard's spam result into the label; agreement keeps the rest.
    assert_eq!(row["labels"]["spam"], !spam_failed);
    assert!(row["labels"]["toxic"].is_boolean());

    let without_reviewed = aegis(&["history", "--db", &db, "export", "--as-eval"]);
    assert_eq!(without_reviewed.status.code(), Some(2));
    let evaluated = json(&aegis(&[
        "eval",
        out_path.to_str().expect("path"),
        "--db",
        &db,
        "--json",
    ]));
    assert_eq!(evaluated["report"]["rows"], 1);
}
