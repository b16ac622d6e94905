//! History through the real binary: check records, import resumes after SIGKILL. Each test's
//! history is a SQLite file, or a PostgreSQL database when the test script names a server
//! (`aegis_scratch_db`), so both engines pass them.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::{aegis, aegis_command, stderr, stdout};

/// One short validator, so hundreds of real-model verdicts take seconds, not minutes.
fn tiny_prompts(dir: &std::path::Path) -> std::path::PathBuf {
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    std::fs::write(
        prompts.join("spam.txt"),
        "---\nname: Spam\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\n<start_of_turn>user\n{{message}}\nSpam? Yes or No.<end_of_turn>\n<start_of_turn>model\n",
    )
    .expect("write template");
    prompts
}

fn history_json(db: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["history"];
    all.extend_from_slice(args);
    let out = aegis_command(&all)
        .env("AEGIS_DB", db)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("JSON")
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn check_records_by_default_and_history_finds_it() {
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db = history.arg();
    let db_arg = db.as_str();
    let text = "Beli saham BBCA sekarang, pasti cuan!";
    let out = aegis(&["check", "--db", db_arg, "--user-id", "ana", text]);
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
    let skipped = aegis(&["check", "--db", db_arg, "--no-history", "Selamat pagi"]);
    assert!(skipped.status.code().is_some_and(|c| c < 2));

    let page = history_json(&db, &["list", "--json"]);
    let rows = page["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "--no-history recorded nothing");
    assert_eq!(rows[0]["text"], text);
    assert_eq!(rows[0]["source"], "cli");
    assert_eq!(rows[0]["user_id"], "ana");
    assert_eq!(rows[0]["results"].as_array().map(Vec::len), Some(4));
    let found = history_json(&db, &["list", "--json", "--search", "saham cuan"]);
    assert_eq!(found["rows"].as_array().map(Vec::len), Some(1));
    let id = rows[0]["verdict_id"].as_i64().expect("id").to_string();
    let detail = history_json(&db, &["show", &id, "--json"]);
    assert!(detail["templates"][0]["content"]
        .as_str()
        .is_some_and(|t| t.contains("{{message}}")));

    let review = aegis(&[
        "history",
        "--db",
        db_arg,
        "review",
        &id,
        "--overturn",
        "--validator",
        "spam=overturn",
        "--reviewer",
        "rina",
    ]);
    assert!(review.status.success(), "{}", stderr(&review));
    let reviewed = history_json(&db, &["list", "--json", "--reviewed"]);
    assert_eq!(reviewed["rows"].as_array().map(Vec::len), Some(1));

    // The queue hands a decided message to no one else.
    let second = aegis(&[
        "history",
        "--db",
        db_arg,
        "review",
        &id,
        "--agree",
        "--reviewer",
        "budi",
    ]);
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("already decided by rina"),
        "{}",
        stderr(&second)
    );
    let claimed = history_json(&db, &["claim", "--reviewer", "budi", "--json"]);
    assert_eq!(claimed["items"].as_array().map(Vec::len), Some(0));
    let policy = aegis(&[
        "history",
        "--db",
        db_arg,
        "queue",
        "--overlap",
        "10",
        "--claim-minutes",
        "45",
    ]);
    assert_eq!(
        stdout(&policy).trim(),
        "overlap 10% (decided by two reviewers); claims last 45 minutes"
    );
    let agreement = history_json(&db, &["agreement", "--json"]);
    assert_eq!(agreement["messages"], 0);

    // A team: its first admin names themselves, then the roles decide who may change what.
    let team = |args: &[&str]| {
        let mut all = vec!["team", "--db", db_arg];
        all.extend_from_slice(args);
        aegis(&all)
    };
    let refused = team(&["add", "--as", "budi", "rina", "--role", "admin"]);
    assert!(stderr(&refused).contains("starts with an admin naming themselves"));
    assert!(team(&["add", "--as", "rina", "rina", "--role", "admin"])
        .status
        .success());
    assert!(team(&["add", "--as", "rina", "budi", "--role", "reviewer"])
        .status
        .success());
    let members = team(&["list", "--json"]);
    let members: serde_json::Value = serde_json::from_str(&stdout(&members)).expect("JSON");
    assert_eq!(members[1]["name"], "budi");
    assert_eq!(members[1]["role"], "reviewer");
    let reviewer_changes_queue = aegis(&[
        "history",
        "--db",
        db_arg,
        "queue",
        "--overlap",
        "50",
        "--as",
        "budi",
    ]);
    assert_eq!(reviewer_changes_queue.status.code(), Some(2));
    assert!(
        stderr(&reviewer_changes_queue)
            .contains("budi is a reviewer and may not change the review queue"),
        "{}",
        stderr(&reviewer_changes_queue)
    );
    // A reviewer's example is proposed; only an author or an admin accepts it.
    let examples = |args: &[&str]| {
        let mut all = vec!["examples", "--db", db_arg];
        all.extend_from_slice(args);
        aegis(&all)
    };
    let proposed = examples(&["add", "toxic", "dasar otak udang", "--fail", "--as", "budi"]);
    assert!(proposed.status.success(), "{}", stderr(&proposed));
    assert!(
        stdout(&proposed).contains("proposed, as budi is a reviewer"),
        "{}",
        stdout(&proposed)
    );
    let example_id = stdout(&proposed)
        .split_whitespace()
        .nth(2)
        .expect("added example ID")
        .to_string();
    let refused = examples(&["accept", &example_id, "--as", "budi"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("budi is a reviewer and may not accept examples"),
        "{}",
        stderr(&refused)
    );
    let accepted = examples(&["accept", &example_id, "--as", "rina"]);
    assert!(accepted.status.success(), "{}", stderr(&accepted));

    let log = team(&["log", "--json"]);
    let log: serde_json::Value = serde_json::from_str(&stdout(&log)).expect("JSON");
    let actions: Vec<(&str, &str)> = log
        .as_array()
        .expect("entries")
        .iter()
        .rev()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or(""),
                e["action"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(actions[0], ("rina", "review"));
    assert_eq!(actions[1].1, "queue changed");
    assert_eq!(
        &actions[2..],
        [
            ("rina", "member set"),
            ("rina", "member set"),
            ("budi", "example proposed"),
            ("rina", "example accepted")
        ]
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_killed_import_resumes_with_exactly_one_verdict_per_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompts = tiny_prompts(dir.path());
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db = history.arg();
    let file = dir.path().join("messages.txt");
    let rows = 120;
    let lines: Vec<String> = (0..rows)
        .map(|i| format!("pesan nomor {i} dari pelanggan"))
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let import = || {
        let mut command = aegis_command(&[
            "import",
            file.to_str().expect("path"),
            "--prompts",
            prompts.to_str().expect("path"),
        ]);
        command
            .env("AEGIS_DB", &db)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };

    let mut child = import().spawn().expect("spawn");
    let started = Instant::now();
    let recorded = |db: &str| -> usize {
        // A SQLite file the import has not made yet: reading would make it alongside.
        if let aegis_store::Database::Sqlite(path) = &history.database {
            if !path.exists() {
                return 0;
            }
        }
        let out = aegis_command(&["history", "stats", "--json"])
            .env("AEGIS_DB", db)
            .output()
            .expect("runs");
        serde_json::from_str::<serde_json::Value>(&stdout(&out))
            .ok()
            .and_then(|v| {
                v.as_array().map(|days| {
                    days.iter()
                        .filter_map(|d| d["checked"].as_u64())
                        .sum::<u64>() as usize
                })
            })
            .unwrap_or(0)
    };
    loop {
        let n = recorded(&db);
        if n >= 20 {
            break;
        }
        assert!(
            child.try_wait().expect("poll").is_none(),
            "the import finished before it could be killed"
        );
        assert!(started.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let at_kill = recorded(&db);
    assert!(at_kill < rows, "killed mid-way ({at_kill} of {rows})");

    let out = import().output().expect("rerun");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("resuming batch"), "{}", stderr(&out));

    let mut export = aegis_command(&["history", "export", "--format", "jsonl"])
        .env("AEGIS_DB", &db)
        .output()
        .expect("export");
    assert!(export.status.success());
    let texts: Vec<String> = String::from_utf8(std::mem::take(&mut export.stdout))
        .expect("utf8")
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["text"]
                .as_str()
                .expect("text")
                .to_string()
        })
        .collect();
    assert_eq!(texts.len(), rows, "one verdict per row, no duplicates");
    let unique: std::collections::HashSet<&String> = texts.iter().collect();
    assert_eq!(unique.len(), rows);

    let again = import().output().expect("third run");
    assert!(
        stderr(&again).contains("already imported"),
        "{}",
        stderr(&again)
    );
}
