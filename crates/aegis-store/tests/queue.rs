use std::collections::BTreeMap;

use aegis_store::{Decision, ImportRow, NewReview, NewVerdict, Source};

use crate::common::{record, temp_store, templates, verdict};

#[tokio::test]
async fn the_queue_holds_failed_and_near_threshold_verdicts_most_uncertain_first() {
    let t = temp_store().await;
    let s = &t.store;
    let failed = record(s, "kamu bodoh", Source::Typed, None, &["toxic"]).await;
    let clear = record(s, "halo", Source::Typed, None, &[]).await;
    // Passed, but spam scored 0.45 against 0.5: closer than anything else.
    let mut close = verdict(&[]);
    close.results[0].score = 0.45;
    let close = s
        .record(&NewVerdict {
            text: "promo murah",
            source: Source::Typed,
            user_id: None,
            import: None,
            verdict: &close,
            templates: &templates(),
        })
        .await
        .expect("record");

    let queue = s.claim_reviews("rina", 0.15, 10).await.expect("queue");
    let ids: Vec<i64> = queue.items.iter().map(|r| r.verdict_id).collect();
    assert_eq!(ids, vec![close, failed], "clear verdict {clear} stays out");
    assert_eq!(queue.remaining, 2);

    let review = s
        .add_review(&NewReview {
            verdict_id: close,
            reviewer: "rina".into(),
            decision: Decision::Agree,
            validators: BTreeMap::new(),
            note: String::new(),
        })
        .await
        .expect("review");
    let after = s.claim_reviews("rina", 0.15, 10).await.expect("queue");
    assert_eq!(after.remaining, 1);
    assert_eq!(after.items[0].verdict_id, failed);

    assert!(s.delete_review("ana", review).await.expect("undo"));
    assert!(!s.delete_review("ana", review).await.expect("undo twice"));
    assert_eq!(
        s.claim_reviews("rina", 0.15, 10)
            .await
            .expect("queue")
            .remaining,
        2
    );
}

#[tokio::test]
async fn template_saves_keep_every_version_newest_first_even_a_revert() {
    let t = temp_store().await;
    let s = &t.store;
    s.save_template_version("ana", "spam", "h1", "one")
        .await
        .expect("save");
    s.save_template_version("ana", "spam", "h2", "two")
        .await
        .expect("save");
    s.save_template_version("ana", "spam", "h1", "one")
        .await
        .expect("revert");
    s.save_template_version("ana", "toxic", "h9", "other")
        .await
        .expect("save");
    let saves = s.template_saves("spam", 10).await.expect("saves");
    let hashes: Vec<&str> = saves.iter().map(|v| v.content_hash.as_str()).collect();
    assert_eq!(hashes, vec!["h1", "h2", "h1"]);
    assert_eq!(saves[1].content, "two");
}

#[tokio::test]
async fn an_import_tally_counts_failures_and_bins_scores_per_validator() {
    let t = temp_store().await;
    let s = &t.store;
    let batch = s.begin_import("m.txt", "sha", 3).await.expect("batch");
    for (row, failing) in [(1, vec!["spam"]), (2, vec!["spam", "toxic"]), (3, vec![])] {
        s.record(&NewVerdict {
            text: "pesan",
            source: Source::Import,
            user_id: None,
            import: Some(ImportRow {
                batch_id: batch.id,
                row,
            }),
            verdict: &verdict(&failing),
            templates: &templates(),
        })
        .await
        .expect("record");
    }
    // A message outside the batch does not count.
    record(s, "lain", Source::Typed, None, &["spam"]).await;
    let tally = s.import_tally(batch.id).await.expect("tally");
    let keys: Vec<&str> = tally.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(
        keys,
        vec!["spam", "toxic", "harassment", "financial_advice"]
    );
    assert_eq!(tally[0].failed, 2);
    // 0.9 as f32 is just under 0.9, so it lands in [0.8, 0.9).
    assert_eq!(tally[0].histogram[8], 2);
    assert_eq!(tally[0].histogram[1], 1);
    assert_eq!(tally[1].failed, 1);
    assert_eq!(tally[3].failed, 0);
}
