//! The import loop on a real SQLite history, with a stand-in for the guard (the CLI's and the
//! app's tests run the real model through it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aegis_guard::{Language, ModelRef, ScoreSource, Status, ValidatorResult, Verdict};
use aegis_import::{import_file, CheckFailure, ImportError, MessageFile, RowChecked};
use aegis_store::{HistoryFilter, Store, TemplateContent};

fn checked(text: &str) -> Result<RowChecked, CheckFailure> {
    if text.contains("too long") {
        return Err(CheckFailure::BadRow("the text is too long".into()));
    }
    let flagged = text.contains("promo");
    let score = if flagged { 0.95 } else { 0.05 };
    let verdict = Verdict {
        status: if flagged {
            Status::Failed
        } else {
            Status::Passed
        },
        case: if flagged {
            "spam".into()
        } else {
            "aman".into()
        },
        results: vec![ValidatorResult {
            key: "spam".into(),
            name: "Spam".into(),
            score,
            prompt_score: Some(score),
            learned_score: None,
            readings: Vec::new(),
            decided_by: ScoreSource::Prompt,
            head_hash: None,
            threshold: 0.5,
            passed: !flagged,
            latency_ms: 1.0,
        }],
        skipped: Vec::new(),
        turn: Default::default(),
        rejection_message: String::new(),
        language: Language::Indonesian,
        model: ModelRef {
            id: "stand-in".into(),
            content_hash: "0".into(),
        },
        encoder: None,
        templates: vec![aegis_guard::TemplateVersion {
            key: "spam".into(),
            content_hash: "t1".into(),
        }],
        latency_ms: 1.0,
    };
    let templates: Arc<[TemplateContent]> = Arc::new([TemplateContent {
        key: "spam".into(),
        content_hash: "t1".into(),
        content: "template".into(),
    }]);
    Ok((verdict, templates))
}

/// A fresh history and a text file of `lines` to import into it.
async fn lines_to_import(lines: &str) -> (tempfile::TempDir, Store, MessageFile) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("history.db"))
        .await
        .expect("store");
    let path = dir.path().join("pesan.txt");
    std::fs::write(&path, lines).expect("write");
    let file = MessageFile::read(&path, None).expect("read");
    (dir, store, file)
}

#[tokio::test]
async fn cancel_then_resume_records_every_row_once_and_tallies_the_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("history.db"))
        .await
        .expect("store");
    let path = dir.path().join("pesan.csv");
    std::fs::write(
        &path,
        "id,text\n1,halo\n2,promo gratis\n3,\n4,too long\n5,promo lagi\n",
    )
    .expect("write");
    let file = MessageFile::read(&path, Some("text")).expect("read");

    // Cancel after the second row has been handled.
    let cancel = AtomicBool::new(false);
    let mut seen = Vec::new();
    let first = import_file(
        &store,
        &file,
        None,
        |text| std::future::ready(checked(text.text())),
        |p| {
            seen.push(p.rows_done);
            if p.rows_done == 2 {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .await
    .expect("first run");
    assert!(first.cancelled && !first.complete);
    assert_eq!(seen, vec![0, 1, 2]);

    let second = import_file(
        &store,
        &file,
        Some("u1"),
        |text| std::future::ready(checked(text.text())),
        |_| {},
        &AtomicBool::new(false),
    )
    .await
    .expect("resume");
    assert!(second.complete);
    assert_eq!(second.progress.rows_done, 5);
    assert_eq!(
        second.progress.bad_rows, 2,
        "the empty row and the long one"
    );
    assert_eq!(
        second.progress.last_problem,
        Some((5, "the text is too long".into()))
    );
    assert_eq!(
        store.count(&HistoryFilter::default()).await.expect("count"),
        3
    );
    assert_eq!(second.tallies.len(), 1);
    assert_eq!(second.tallies[0].failed, 2);

    let third = import_file(
        &store,
        &file,
        None,
        |text| std::future::ready(checked(text.text())),
        |_| {},
        &AtomicBool::new(false),
    )
    .await
    .expect("again");
    assert!(third.already_done);
    assert_eq!(
        store.count(&HistoryFilter::default()).await.expect("count"),
        3
    );
}

#[tokio::test]
async fn a_fatal_guard_error_stops_the_import_and_keeps_what_was_done() {
    let (_dir, store, file) = lines_to_import("halo\nstop\nlagi\n").await;
    let stopped = import_file(
        &store,
        &file,
        None,
        |text| {
            std::future::ready(if text.text() == "stop" {
                Err(CheckFailure::Fatal("the model worker has stopped".into()))
            } else {
                checked(text.text())
            })
        },
        |_| {},
        &AtomicBool::new(false),
    )
    .await;
    assert!(
        matches!(stopped, Err(ImportError::Stopped { line: 2, .. })),
        "{stopped:?}"
    );
    assert_eq!(
        store.count(&HistoryFilter::default()).await.expect("count"),
        1
    );
}

#[tokio::test]
async fn an_unreachable_model_server_pauses_the_import_which_resumes_when_it_answers() {
    let (_dir, store, file) = lines_to_import("halo\npromo murah\nlagi\nterima kasih\n").await;
    // The server goes away after the first row and answers again after three refused tries.
    let tries = std::sync::atomic::AtomicUsize::new(0);
    let mut pauses = Vec::new();
    let summary = import_file(
        &store,
        &file,
        None,
        |text| {
            let attempt = tries.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if text.text() != "halo" && attempt < 4 {
                Err(CheckFailure::Unavailable(
                    "the model server at http://127.0.0.1:9 is unavailable".into(),
                ))
            } else {
                checked(text.text())
            })
        },
        |progress| pauses.push(progress.paused.clone()),
        &AtomicBool::new(false),
    )
    .await
    .expect("import");
    assert!(summary.complete, "{summary:?}");
    assert_eq!(
        summary.progress.recorded, 4,
        "every row once, none as a failure"
    );
    assert_eq!(summary.progress.bad_rows, 0);
    assert!(pauses
        .iter()
        .any(|p| p.as_deref().is_some_and(|m| m.contains("unavailable"))));
    assert_eq!(pauses.last(), Some(&None), "running again at the end");
    assert_eq!(
        store.count(&HistoryFilter::default()).await.expect("count"),
        4
    );
}

#[tokio::test]
async fn a_paused_import_can_be_cancelled_promptly() {
    let (_dir, store, file) = lines_to_import("halo\nlagi\n").await;
    let cancel = AtomicBool::new(false);
    let started = std::time::Instant::now();
    let summary = import_file(
        &store,
        &file,
        None,
        |_| std::future::ready(Err(CheckFailure::Unavailable("down".into()))),
        |progress| {
            if progress.paused.is_some() {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .await
    .expect("import");
    assert!(summary.cancelled && !summary.complete, "{summary:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

/// A conversation line gives a verdict per checked turn, each recorded with its context; a
/// cancelled import resumes after the last turn recorded, within a line too.
#[tokio::test]
async fn conversation_lines_record_each_turn_with_its_context_and_resume_by_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("history.db"))
        .await
        .expect("store");
    let path = dir.path().join("chats.jsonl");
    std::fs::write(
        &path,
        concat!(
            "{\"messages\": [{\"role\": \"user\", \"content\": \"halo\"}, {\"role\": \"assistant\", \"content\": \"promo gratis hari ini\"}, {\"role\": \"user\", \"content\": \"ok\"}]}\n",
            "{\"text\": \"selamat pagi\"}\n",
        ),
    )
    .expect("write");
    let file = MessageFile::read(&path, None).expect("read");
    assert_eq!(file.rows.len(), 4);
    // The stand-in reports the turn it was given, as the guard does.
    let check = |input: aegis_guard::GuardInput| {
        std::future::ready(checked(input.text()).map(|(mut verdict, templates)| {
            verdict.turn = aegis_guard::TurnReport {
                index: input.index,
                role: input.turn.role,
                context: input.context.clone(),
                context_cut: 0,
            };
            (verdict, templates)
        }))
    };
    let cancel = AtomicBool::new(false);
    let first = import_file(
        &store,
        &file,
        None,
        check,
        |p| {
            if p.rows_done == 2 {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .await
    .expect("first run");
    assert!(first.cancelled);
    let second = import_file(&store, &file, None, check, |_| {}, &AtomicBool::new(false))
        .await
        .expect("resume");
    assert!(second.complete);
    assert_eq!(second.progress.rows_done, 4);
    let page = store
        .list(&HistoryFilter::default(), None, 10)
        .await
        .expect("history");
    let mut turns: Vec<(String, i64, usize)> = page
        .rows
        .iter()
        .map(|r| (r.text.clone(), r.turn_index, r.context.len()))
        .collect();
    turns.sort();
    assert_eq!(
        turns,
        [
            ("halo".to_string(), 0, 0),
            ("ok".to_string(), 2, 2),
            ("promo gratis hari ini".to_string(), 1, 1),
            ("selamat pagi".to_string(), 0, 0),
        ]
    );
    let promo = page
        .rows
        .iter()
        .find(|r| r.turn_index == 1)
        .expect("the assistant's turn");
    assert_eq!(promo.role, aegis_guard::Role::Assistant);
    assert_eq!(promo.status, "failed");
}
