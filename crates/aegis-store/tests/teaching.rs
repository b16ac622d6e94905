//! Labelled examples and head versions on a real SQLite file.

use aegis_store::{content_hash, Added, ExampleOrigin, NewExample, NewHeadVersion, Source};

use crate::common::{record, temp_store};

fn example(validator: &str, text: &str, violates: bool) -> NewExample {
    NewExample {
        validator: validator.into(),
        text: text.into(),
        violates,
        language: "id".into(),
        origin: ExampleOrigin::Manual,
        verdict_id: None,
        submitted_by: None,
    }
}

#[tokio::test]
async fn duplicates_merge_and_contradictions_are_shown_not_resolved() {
    let t = temp_store().await;
    let s = &t.store;
    let first = s
        .add_example(
            "ana",
            &example("pii_request", "Kirim kode OTP kamu ke saya", true),
        )
        .await
        .expect("add");
    let again = s
        .add_example(
            "ana",
            &example("pii_request", "  Kirim kode  OTP kamu\nke saya ", true),
        )
        .await
        .expect("add again");
    assert!(matches!(first, Added::New { .. }));
    assert_eq!(again, Added::Merged { id: first.id() });
    // Another validator's example with the same text is its own row.
    s.add_example(
        "ana",
        &example("spam", "Kirim kode OTP kamu ke saya", false),
    )
    .await
    .expect("other validator");
    let examples = s.examples(Some("pii_request")).await.expect("list");
    assert_eq!(examples.len(), 1);
    assert_eq!(examples[0].times_added, 2);
    assert!(!examples[0].contradicted);

    // The same text labelled the other way: both kept, both flagged.
    let other = s
        .add_example(
            "ana",
            &example("pii_request", "Kirim kode OTP kamu ke saya", false),
        )
        .await
        .expect("contradiction");
    assert!(matches!(other, Added::New { .. }));
    let examples = s.examples(Some("pii_request")).await.expect("list");
    assert_eq!(examples.len(), 2);
    assert!(examples.iter().all(|e| e.contradicted));

    // Relabelling one onto the other merges them and ends the contradiction.
    let merged = s
        .relabel_example("ana", other.id(), true)
        .await
        .expect("relabel");
    assert_eq!(merged, Added::Merged { id: first.id() });
    let examples = s.examples(Some("pii_request")).await.expect("list");
    assert_eq!(examples.len(), 1);
    assert_eq!(examples[0].times_added, 3);
    assert!(!examples[0].contradicted);

    assert!(s.remove_example("ana", first.id()).await.expect("remove"));
    assert!(!s.remove_example("ana", first.id()).await.expect("gone"));
    assert!(s.relabel_example("ana", first.id(), false).await.is_err());
    assert_eq!(s.examples(None).await.expect("all").len(), 1);
}

#[tokio::test]
async fn an_example_keeps_its_verdict_until_the_verdict_is_deleted() {
    let t = temp_store().await;
    let s = &t.store;
    let verdict = record(
        s,
        "Beli sekarang diskon 90%",
        Source::Typed,
        None,
        &["spam"],
    )
    .await;
    let added = s
        .add_example(
            "ana",
            &NewExample {
                origin: ExampleOrigin::Mark,
                verdict_id: Some(verdict),
                submitted_by: None,
                ..example("spam", "Beli sekarang diskon 90%", false)
            },
        )
        .await
        .expect("mark");
    assert_eq!(
        s.examples(Some("spam")).await.expect("list")[0].verdict_id,
        Some(verdict)
    );
    assert!(s.delete("ana", verdict).await.expect("delete verdict"));
    let kept = s.examples(Some("spam")).await.expect("list");
    assert_eq!(kept.len(), 1, "deleting history keeps what was taught");
    assert_eq!(kept[0].id, added.id());
    assert_eq!(kept[0].verdict_id, None);
}

#[tokio::test]
async fn head_versions_come_back_byte_for_byte_newest_first() {
    let t = temp_store().await;
    let s = &t.store;
    let version = |bytes: &[u8], note: &str| NewHeadVersion {
        validator: "toxic".into(),
        content: bytes.to_vec(),
        data_sha256: "abc".into(),
        metrics: "{\"roc_auc\":0.9}".into(),
        note: note.into(),
        applied_by: "ana".into(),
    };
    // Bytes that are not valid UTF-8 survive too.
    let first_bytes = b"{\"weights\":[0.1]}\n\xff".to_vec();
    let first = s
        .save_head_version(&version(&first_bytes, "trained"))
        .await
        .expect("save");
    let same = s
        .save_head_version(&version(&first_bytes, "again"))
        .await
        .expect("same");
    assert_eq!(first, same, "the same bytes twice are one version");
    let second = s
        .save_head_version(&version(b"{}", "retrained"))
        .await
        .expect("save");
    let versions = s.head_versions("toxic").await.expect("list");
    assert_eq!(
        versions.iter().map(|v| v.id).collect::<Vec<_>>(),
        vec![second, first]
    );
    assert_eq!(versions[1].content_hash, content_hash(&first_bytes));
    let (stored, bytes) = s.head_version(first).await.expect("read").expect("there");
    assert_eq!(bytes, first_bytes);
    assert_eq!(stored.note, "trained");
    assert!(s.head_version(999).await.expect("read").is_none());
    assert!(s.save_head_version(&version(b"", "empty")).await.is_err());
}

#[tokio::test]
async fn feedback_is_pending_until_a_reviewer_accepts_it_and_its_count_is_capped() {
    use aegis_store::{StoreError, MAX_PENDING_PER_VALIDATOR};
    let t = temp_store().await;
    let s = &t.store;
    let proposal = |text: String| NewExample {
        origin: ExampleOrigin::Feedback,
        submitted_by: Some("127.0.0.1".into()),
        ..example("spam", &text, true)
    };
    let first = s
        .add_example("ana", &proposal("Promo gratis klik link ini".into()))
        .await
        .expect("proposed");
    let listed = s.examples(Some("spam")).await.expect("list");
    assert!(listed[0].pending);
    assert_eq!(listed[0].submitted_by.as_deref(), Some("127.0.0.1"));
    // A reviewer teaching the same text accepts the proposal.
    s.add_example("ana", &example("spam", "Promo gratis  klik link ini", true))
        .await
        .expect("reviewer");
    assert!(!s.examples(Some("spam")).await.expect("list")[0].pending);

    for i in 1..MAX_PENDING_PER_VALIDATOR {
        s.add_example("ana", &proposal(format!("promo nomor {i}")))
            .await
            .expect("room");
    }
    s.add_example("ana", &proposal("promo nomor 0".into()))
        .await
        .expect("the accepted one left room for one more");
    let full = s.add_example("ana", &proposal("satu lagi".into())).await;
    assert!(
        matches!(full, Err(StoreError::TooManyPending { .. })),
        "{full:?}"
    );
    // A duplicate of a pending one only counts again, and other validators have their own room.
    s.add_example("ana", &proposal("promo nomor 3".into()))
        .await
        .expect("merged");
    s.add_example(
        "ana",
        &NewExample {
            validator: "toxic".into(),
            ..proposal("dasar bodoh".into())
        },
    )
    .await
    .expect("another validator");
    assert!(s.accept_example("ana", first.id()).await.expect("accept"));
    assert!(!s.accept_example("ana", 999_999).await.expect("none"));
}

#[tokio::test]
async fn examples_kept_before_suggestions_had_an_origin_survive_migration_0014() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    let mut older = crate::common::sqlite_at_version(&path, 13).await;
    // A reviewer's typed example and a client's pending proposal, as 0013 kept them.
    sqlx::raw_sql(
        "INSERT INTO examples (id, validator_key, text, normalized, label, language, origin,
                               times_added, created_at, updated_at, accepted, submitted_by)
         VALUES (7, 'spam', 'Beli sekarang', 'Beli sekarang', 1, 'id', 'manual', 2, 0, 0, 1, NULL),
                (9, 'spam', 'halo kak', 'halo kak', 0, 'id', 'feedback', 1, 0, 0, 0, '10.0.0.2');",
    )
    .execute(&mut older)
    .await
    .expect("older rows");
    older.close().await.expect("close");

    let store = aegis_store::Store::open(&path).await.expect("migrated");
    let kept = store.examples(Some("spam")).await.expect("listed");
    let summary: Vec<_> = kept
        .iter()
        .map(|e| {
            (
                e.id,
                e.origin,
                e.times_added,
                e.pending,
                e.submitted_by.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (7, ExampleOrigin::Manual, 2, false, None),
            (
                9,
                ExampleOrigin::Feedback,
                1,
                true,
                Some("10.0.0.2".to_string())
            ),
        ]
    );
    // The wider CHECK takes a label on a suggested message; ids go on from the kept ones.
    let added = store
        .add_example(
            "ana",
            &NewExample {
                origin: ExampleOrigin::Suggestion,
                ..example("spam", "promo gacor hari ini", true)
            },
        )
        .await
        .expect("a suggestion's label");
    assert!(added.id() > 9);
    let suggested = store.examples(Some("spam")).await.expect("listed");
    assert!(suggested
        .iter()
        .any(|e| e.id == added.id() && e.origin == ExampleOrigin::Suggestion));
}
