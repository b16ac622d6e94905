use aegis_store::{HistoryFilter, ImportRow, NewVerdict, Source};

use crate::common::{temp_store, templates, verdict};

#[tokio::test]
async fn an_import_resumes_after_its_last_committed_row_and_never_duplicates() {
    let t = temp_store().await;
    let s = &t.store;
    let batch = s
        .begin_import("pesan.csv", "sha-of-file", 5)
        .await
        .expect("begin");
    assert_eq!((batch.last_row, batch.rows_done), (0, 0));
    let v = verdict(&[]);
    let templates = templates();
    for row in 1..=3 {
        let text = format!("baris {row}");
        s.record(&NewVerdict {
            text: &text,
            source: Source::Import,
            user_id: None,
            import: Some(ImportRow {
                batch_id: batch.id,
                row,
            }),
            verdict: &v,
            templates: &templates,
        })
        .await
        .expect("record");
    }
    s.skip_import_row(ImportRow {
        batch_id: batch.id,
        row: 4,
    })
    .await
    .expect("skip");

    // Same content again: the same batch, resuming after row 4.
    let resumed = s
        .begin_import("renamed.csv", "sha-of-file", 5)
        .await
        .expect("resume");
    assert_eq!(
        (resumed.id, resumed.last_row, resumed.rows_done),
        (batch.id, 4, 4)
    );
    // A row recorded twice (a race, a bug) is refused by the schema.
    let again = s
        .record(&NewVerdict {
            text: "baris 2",
            source: Source::Import,
            user_id: None,
            import: Some(ImportRow {
                batch_id: batch.id,
                row: 2,
            }),
            verdict: &v,
            templates: &templates,
        })
        .await;
    assert!(again.is_err());
    assert_eq!(
        s.count(&HistoryFilter::default()).await.expect("count"),
        3,
        "the refused row left nothing behind"
    );
    let done = s.finish_import(batch.id).await.expect("finish");
    assert!(done.is_done());
    let other = s
        .begin_import("pesan.csv", "another-sha", 1)
        .await
        .expect("new file");
    assert_ne!(other.id, batch.id);
}

#[tokio::test]
async fn rows_recorded_together_are_kept_all_or_none() {
    let t = temp_store().await;
    let s = &t.store;
    let batch = s.begin_import("g.txt", "sha-g", 3).await.expect("batch");
    let flagged = verdict(&["spam"]);
    let all = templates();
    let row = |n: i64, text: &'static str| NewVerdict {
        text,
        source: Source::Import,
        user_id: None,
        import: Some(ImportRow {
            batch_id: batch.id,
            row: n,
        }),
        verdict: &flagged,
        templates: &all,
    };
    // The second is the first's row again, which an import never records twice: nothing of
    // the group is kept.
    s.record_many(&[row(1, "satu"), row(1, "satu lagi")])
        .await
        .unwrap_err();
    assert_eq!(s.count(&HistoryFilter::default()).await.expect("count"), 0);

    let ids = s
        .record_many(&[row(1, "satu"), row(2, "dua")])
        .await
        .expect("together");
    assert_eq!(ids.len(), 2);
    assert!(ids[0] < ids[1], "recorded in order");
    let resumed = s.begin_import("g.txt", "sha-g", 3).await.expect("resume");
    assert_eq!((resumed.rows_done, resumed.last_row), (2, 2));
}
