//! The real `aegis` binary on the real default model (scripts/setup-model.sh fetches it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[cfg(feature = "lab")]
mod adapt;
mod conversations;
mod encoder_server;
mod eval;
mod gpu;
mod guarded_chat;
mod heads;
mod history;
mod remote;
mod serve;
mod teach;
#[cfg(feature = "lab")]
mod token_states;

fn aegis(args: &[&str]) -> Output {
    aegis_command(args).output().expect("aegis runs")
}

/// The binary with a clean environment; history goes to a database of its own (tests that read
/// history pass --db; concurrent writers are the store's own tests).
fn aegis_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aegis"));
    command
        .args(args)
        .current_dir(repo_root())
        .env_remove("AEGIS_PROMPTS")
        .env_remove("AEGIS_MODEL")
        .env_remove("AEGIS_BACKEND")
        .env_remove("AEGIS_ENCODER_SERVER")
        .env_remove("AEGIS_ENCODER_WEIGHTS")
        .env_remove("AEGIS_DATABASE_URL")
        .env_remove("AEGIS_MEMBER")
        .env("AEGIS_DB", fresh_db());
    command
}

fn fresh_db() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
        .join(format!("history-{n}.db"))
}

/// A test tool a setup script installs outside the clone: the path `variable` names (as
/// `scripts/test.sh` sets it), else what `script` prints on its last line.
fn set_up_tool(variable: &str, script: &str) -> String {
    if let Some(path) = std::env::var_os(variable) {
        return path.to_string_lossy().into_owned();
    }
    let output = Command::new("bash")
        .arg(repo_root().join(script))
        .output()
        .expect("the setup script runs");
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    printed
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn check_json_prints_the_validate_shape_in_validator_order() {
    let out = aegis(&["check", "--json", "HAIIII BODOH"]);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "exit {code:?}: {}",
        stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON on stdout");
    assert_eq!(json["user_id"], "cli");
    assert_eq!(json["question"], "HAIIII BODOH");
    let steps: Vec<&str> = json["execution_per_step"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_str().expect("step name"))
        .collect();
    assert_eq!(steps, ["spam", "toxic", "harassment", "financial_advice"]);
    let failed = json["status_guard"] == "failed";
    assert_eq!(
        code,
        Some(if failed { 1 } else { 0 }),
        "exit code follows the verdict"
    );
    assert_eq!(json["case"] == "aman", !failed);
    assert_eq!(
        json["ai_response"].as_str().is_some_and(|m| !m.is_empty()),
        failed
    );
    for key in steps {
        let score = json["scores"][key].as_f64().expect("score");
        assert!(score > 0.0 && score < 1.0, "{key}: {score}");
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_table_shows_every_validator() {
    let out = aegis(&["check", "Bagaimana cara top up saldo?"]);
    let text = stdout(&out);
    for key in [
        "spam",
        "toxic",
        "harassment",
        "financial_advice",
        "status:",
        "model: gemma-3-270m",
    ] {
        assert!(text.contains(key), "{key} missing from:\n{text}");
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn empty_text_is_a_usage_error() {
    let out = aegis(&["check", "   "]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the text is empty"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn text_over_the_context_is_refused_with_both_lengths() {
    let long = vec!["kata"; 300].join(" ");
    let out = aegis(&["check", "--max-context", "256", &long]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("the text is too long: it is 300 tokens"),
        "{err}"
    );
    assert!(
        err.contains("over the model's context of 256 tokens"),
        "{err}"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_file_streams_jsonl_and_reports_bad_rows_by_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("messages.jsonl");
    std::fs::write(
        &file,
        "{\"text\": \"Selamat pagi, apa kabar?\"}\n{broken\n{\"id\": 7}\n{\"question\": \"Beli saham BBCA sekarang, pasti cuan!\"}\n",
    )
    .expect("write");
    let out = aegis(&["check", "--file", file.to_str().expect("path")]);
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each stdout line is JSON"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&out));
    assert_eq!(lines[0]["line"], 1);
    assert_eq!(lines[1]["line"], 4);
    assert_eq!(
        lines[1]["question"],
        "Beli saham BBCA sekarang, pasti cuan!"
    );
    let err = stderr(&out);
    assert!(err.contains("line 2: not valid JSON"), "{err}");
    assert!(
        err.contains("line 3: no \"text\", \"question\" or \"messages\" field"),
        "{err}"
    );
    assert!(err.contains("2 checked"), "{err}");
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn an_unusable_file_is_an_input_error_before_the_model_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("m.csv");
    std::fs::write(&csv, "id,body\n1,halo\n").expect("write");
    let out = aegis(&["check", "--file", csv.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no column \"text\" or \"question\"; the header has: id, body"),
        "{}",
        stderr(&out)
    );
    let missing = aegis(&["check", "--file", "/no/such/file.txt"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read /no/such/file.txt"),
        "{}",
        stderr(&missing)
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_broken_template_is_named_and_the_others_keep_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped = repo_root().join("prompt_guard");
    for key in ["spam", "toxic"] {
        std::fs::copy(
            shipped.join(format!("{key}.txt")),
            dir.path().join(format!("{key}.txt")),
        )
        .expect("copy");
    }
    let broken = std::fs::read_to_string(shipped.join("harassment.txt"))
        .expect("read")
        .replace("{{message}}", "");
    std::fs::write(dir.path().join("harassment.txt"), broken).expect("write");
    let out = aegis(&[
        "check",
        "--json",
        "--prompts",
        dir.path().to_str().expect("path"),
        "halo",
    ]);
    let err = stderr(&out);
    assert!(
        err.contains("harassment.txt: the prompt has no {{message}} placeholder"),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["execution_per_step"].as_array().map(Vec::len), Some(2));
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_missing_templates_folder_is_named_before_the_model_loads() {
    let out = aegis(&["check", "--prompts", "/no/such/templates", "halo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("looked in /no/such/templates"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_missing_model_says_how_to_get_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_aegis"))
        .args(["check", "halo"])
        .current_dir(repo_root())
        .env("AEGIS_MODEL_DIR", dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("run scripts/setup-model.sh"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn serving_beyond_loopback_needs_a_token() {
    let out = aegis(&["serve", "--host", "0.0.0.0", "--port", "0", "--no-history"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("give --token"), "{}", stderr(&out));
}
