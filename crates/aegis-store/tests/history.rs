use std::collections::{BTreeMap, HashSet};

use aegis_guard::Status;
use aegis_store::{Database, Decision, HistoryFilter, NewReview, ScoreRange, Source, Store};

use crate::common::{record, temp_store};

#[tokio::test]
async fn migrating_from_empty_creates_the_schema_and_reopens() {
    use sqlx::Connection;
    let t = temp_store().await;
    // Read with a separate connection, as another program would see the database.
    let mut conn = sqlx::AnyConnection::connect(&t.url())
        .await
        .expect("connect");
    let tables_sql = match t.scratch.database {
        Database::Sqlite(_) => "SELECT name FROM sqlite_master WHERE type = 'table'",
        Database::Postgres(_) => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables WHERE table_schema = 'public'"
        }
    };
    let tables: Vec<String> = sqlx::query_scalar(tables_sql)
        .fetch_all(&mut conn)
        .await
        .expect("names");
    for table in [
        "messages",
        "verdicts",
        "validator_results",
        "validator_readings",
        "template_versions",
        "reviews",
        "import_batches",
        "examples",
        "head_versions",
    ] {
        assert!(
            tables.iter().any(|n| n == table),
            "{table} missing from {tables:?}"
        );
    }
    if let Database::Sqlite(_) = t.scratch.database {
        assert!(tables.iter().any(|n| n == "messages_fts"), "{tables:?}");
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await
            .expect("journal mode");
        assert_eq!(journal, "wal");
    }
    conn.close().await.expect("close");
    t.store.close().await;
    let again = Store::connect(&t.scratch.database)
        .await
        .expect("reopen applies nothing twice");
    assert_eq!(
        again.count(&HistoryFilter::default()).await.expect("count"),
        0
    );
}

#[tokio::test]
async fn every_filter_narrows_history() {
    let t = temp_store().await;
    let s = &t.store;
    let a = record(
        s,
        "Selamat pagi, apa kabar?",
        Source::Typed,
        Some("ana"),
        &[],
    )
    .await;
    let b = record(
        s,
        "dasar goblok kamu",
        Source::Http,
        Some("budi"),
        &["toxic", "harassment"],
    )
    .await;
    let c = record(s, "WIN a FREE prize now!!!", Source::Cli, None, &["spam"]).await;
    let d = record(
        s,
        "Beli saham BBCA sekarang, pasti cuan!",
        Source::Import,
        Some("budi"),
        &["financial_advice"],
    )
    .await;
    let ids = |page: aegis_store::HistoryPage| -> Vec<i64> {
        page.rows.iter().map(|r| r.verdict_id).collect()
    };
    let list = |f: HistoryFilter| async move { ids(s.list(&f, None, 100).await.expect("list")) };

    assert_eq!(
        list(HistoryFilter::default()).await,
        vec![d, c, b, a],
        "newest first"
    );
    assert_eq!(
        list(HistoryFilter {
            status: Some(Status::Passed),
            ..Default::default()
        })
        .await,
        vec![a]
    );
    assert_eq!(
        list(HistoryFilter {
            status: Some(Status::Failed),
            ..Default::default()
        })
        .await,
        vec![d, c, b]
    );
    assert_eq!(
        list(HistoryFilter {
            failed_validator: Some("toxic".into()),
            ..Default::default()
        })
        .await,
        vec![b]
    );
    assert_eq!(
        list(HistoryFilter {
            score: Some(ScoreRange {
                validator: Some("spam".into()),
                min: Some(0.5),
                max: None
            }),
            ..Default::default()
        })
        .await,
        vec![c]
    );
    assert_eq!(
        list(HistoryFilter {
            score: Some(ScoreRange {
                validator: None,
                min: None,
                max: Some(0.05)
            }),
            ..Default::default()
        })
        .await,
        Vec::<i64>::new()
    );
    assert_eq!(
        list(HistoryFilter {
            source: Some(Source::Http),
            ..Default::default()
        })
        .await,
        vec![b]
    );
    assert_eq!(
        list(HistoryFilter {
            user_id: Some("budi".into()),
            ..Default::default()
        })
        .await,
        vec![d, b]
    );
    let now = aegis_store::now_millis();
    assert_eq!(
        list(HistoryFilter {
            since: Some(now + 60_000),
            ..Default::default()
        })
        .await
        .len(),
        0
    );
    assert_eq!(
        list(HistoryFilter {
            until: Some(now + 60_000),
            ..Default::default()
        })
        .await
        .len(),
        4
    );

    s.add_review(&NewReview {
        verdict_id: b,
        reviewer: "rina".into(),
        decision: Decision::Overturn,
        validators: BTreeMap::from([("harassment".to_string(), Decision::Overturn)]),
        note: "banter between friends".into(),
    })
    .await
    .expect("review");
    assert_eq!(
        list(HistoryFilter {
            reviewed: Some(true),
            ..Default::default()
        })
        .await,
        vec![b]
    );
    assert_eq!(
        list(HistoryFilter {
            reviewed: Some(false),
            ..Default::default()
        })
        .await,
        vec![d, c, a]
    );
    assert_eq!(
        list(HistoryFilter {
            text: Some("budi".into()),
            ..Default::default()
        })
        .await,
        Vec::<i64>::new(),
        "search looks at the text, not the user"
    );
    // Combined filters intersect.
    assert_eq!(
        list(HistoryFilter {
            user_id: Some("budi".into()),
            status: Some(Status::Failed),
            failed_validator: Some("financial_advice".into()),
            ..Default::default()
        })
        .await,
        vec![d]
    );
    assert_eq!(
        s.count(&HistoryFilter {
            status: Some(Status::Failed),
            ..Default::default()
        })
        .await
        .expect("count"),
        3
    );

    let counts = s
        .daily_counts(&HistoryFilter::default())
        .await
        .expect("counts");
    assert_eq!(counts.len(), 4, "one day, four validators: {counts:?}");
    let toxic = counts
        .iter()
        .find(|c| c.validator == "toxic")
        .expect("toxic");
    assert_eq!((toxic.checked, toxic.failed), (4, 1));
}

#[tokio::test]
async fn full_text_search_handles_indonesian_punctuation_and_accents() {
    let t = temp_store().await;
    let s = &t.store;
    let saham = record(
        s,
        "Beli saham BBCA sekarang, pasti cuan 50%!!!",
        Source::Cli,
        None,
        &[],
    )
    .await;
    let kafe = record(
        s,
        "Kopi di kafé itu enak; harganya Rp25.000.",
        Source::Cli,
        None,
        &[],
    )
    .await;
    let _other = record(s, "Bagaimana cara top up saldo?", Source::Cli, None, &[]).await;
    let search = |text: &str| {
        let filter = HistoryFilter {
            text: Some(text.into()),
            ..Default::default()
        };
        async move {
            s.list(&filter, None, 10)
                .await
                .expect("search")
                .rows
                .iter()
                .map(|r| r.verdict_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(search("cuan").await, vec![saham]);
    assert_eq!(
        search("SAHAM bbca").await,
        vec![saham],
        "case-insensitive, all words"
    );
    assert_eq!(
        search("pasti, cuan!").await,
        vec![saham],
        "punctuation in the query is ignored"
    );
    assert_eq!(search("kafe").await, vec![kafe], "accents folded");
    assert_eq!(
        search("harga").await,
        vec![kafe],
        "the last word matches as a prefix"
    );
    assert_eq!(search("saham kafe").await, Vec::<i64>::new());
    for hostile in [
        "\"",
        "AND",
        "cuan OR",
        "NEAR(a b)",
        "*",
        "saham\"",
        "-cuan",
        "^x",
    ] {
        search(hostile).await; // must not error
    }
}

#[tokio::test]
async fn keyset_pages_cover_everything_once() {
    let t = temp_store().await;
    for i in 0..23 {
        record(
            &t.store,
            &format!("pesan nomor {i}"),
            Source::Cli,
            None,
            if i % 3 == 0 { &["spam"] } else { &[] },
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = t
            .store
            .list(&HistoryFilter::default(), after, 5)
            .await
            .expect("page");
        seen.extend(page.rows.iter().map(|r| r.verdict_id));
        assert!(page.rows.len() <= 5);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 23);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 23);
    let cursor: aegis_store::Cursor = "1700000000000.5".parse().expect("cursor");
    assert_eq!(cursor.to_string(), "1700000000000.5");
    assert!("nonsense".parse::<aegis_store::Cursor>().is_err());
}

#[tokio::test]
async fn concurrent_writers_lose_nothing() {
    let t = temp_store().await;
    // A second store on the same database stands for a second program (the app beside an
    // import).
    let other = Store::connect(&t.scratch.database)
        .await
        .expect("second handle");
    tokio::join!(
        async {
            for i in 0..60 {
                record(
                    &t.store,
                    &format!("dari tugas satu {i}"),
                    Source::Cli,
                    None,
                    &[],
                )
                .await;
            }
        },
        async {
            for i in 0..60 {
                record(
                    &other,
                    &format!("from task two {i}"),
                    Source::Http,
                    Some("u"),
                    &["spam"],
                )
                .await;
            }
        }
    );
    // And tasks sharing one store.
    let store = std::sync::Arc::new(other);
    let handles: Vec<_> = (0..4)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    record(
                        &store,
                        &format!("shared {task} {i}"),
                        Source::Typed,
                        None,
                        &[],
                    )
                    .await;
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    assert_eq!(
        t.store
            .count(&HistoryFilter::default())
            .await
            .expect("count"),
        200
    );
}

#[tokio::test]
async fn one_verdict_in_full_with_templates_and_reviews() {
    let t = temp_store().await;
    let id = record(
        &t.store,
        "dasar goblok",
        Source::Typed,
        Some("ana"),
        &["toxic"],
    )
    .await;
    let detail = t.store.get(id).await.expect("get").expect("exists");
    assert_eq!(detail.row.text, "dasar goblok");
    assert_eq!(detail.row.results.len(), 4);
    let toxic = &detail.row.results[1];
    assert_eq!(
        (toxic.key.as_str(), toxic.passed, toxic.decided_by.as_str()),
        ("toxic", false, "head")
    );
    assert_eq!(toxic.learned_score, Some(0.8999999761581421));
    assert_eq!(detail.templates.len(), 4);
    assert!(detail.templates[1].content.contains("Is this toxic?"));
    assert!(t.store.get(id + 100).await.expect("get").is_none());

    let bad = t
        .store
        .add_review(&NewReview {
            verdict_id: id,
            reviewer: "rina".into(),
            decision: Decision::Agree,
            validators: BTreeMap::from([("weather".to_string(), Decision::Agree)]),
            note: String::new(),
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(bad.contains("has no weather result"), "{bad}");
    let missing = t
        .store
        .add_review(&NewReview {
            verdict_id: 9999,
            reviewer: "rina".into(),
            decision: Decision::Agree,
            validators: BTreeMap::new(),
            note: String::new(),
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("no verdict 9999"), "{missing}");
    t.store
        .add_review(&NewReview {
            verdict_id: id,
            reviewer: "rina".into(),
            decision: Decision::Agree,
            validators: BTreeMap::from([("toxic".to_string(), Decision::Agree)]),
            note: "clear insult".into(),
        })
        .await
        .expect("review");
    let detail = t.store.get(id).await.expect("get").expect("exists");
    assert_eq!(detail.reviews.len(), 1);
    assert_eq!(detail.reviews[0].validators["toxic"], Decision::Agree);
    assert_eq!(detail.row.review_count, 1);
}

#[tokio::test]
async fn reviews_become_labels() {
    let t = temp_store().await;
    let s = &t.store;
    let review = |verdict_id, decision, validators: &[(&str, Decision)]| NewReview {
        verdict_id,
        reviewer: "rina".into(),
        decision,
        validators: validators
            .iter()
            .map(|(k, d)| (k.to_string(), *d))
            .collect(),
        note: String::new(),
    };
    // Failed on toxic and harassment; the reviewer says harassment was wrong.
    let banter = record(
        s,
        "dasar kamu ya",
        Source::Typed,
        None,
        &["toxic", "harassment"],
    )
    .await;
    s.add_review(&review(
        banter,
        Decision::Overturn,
        &[("harassment", Decision::Overturn)],
    ))
    .await
    .expect("review");
    // Failed on spam; overturned overall: nothing was violated.
    let fine = record(s, "promo keluarga", Source::Typed, None, &["spam"]).await;
    s.add_review(&review(fine, Decision::Overturn, &[]))
        .await
        .expect("review");
    // Passed; overturned overall: something was missed, but not which.
    let missed = record(s, "pesan aneh", Source::Typed, None, &[]).await;
    s.add_review(&review(missed, Decision::Overturn, &[]))
        .await
        .expect("review");
    // Not reviewed: not data.
    record(s, "tidak direview", Source::Typed, None, &[]).await;

    let examples = s
        .reviewed_examples(&Default::default())
        .await
        .expect("examples");
    assert_eq!(examples.len(), 3);
    let labels = |id: i64| {
        examples
            .iter()
            .find(|e| e.verdict_id == id)
            .expect("example")
            .labels
            .clone()
    };
    let banter = labels(banter);
    // Overall overturn with a per-validator decision: only the named validator is judged
    // directly; the others fall back to the overall decision on a failed verdict (clean).
    assert_eq!(banter["harassment"], Some(false));
    assert_eq!(banter["toxic"], Some(false));
    assert!(labels(fine).values().all(|l| *l == Some(false)));
    assert!(labels(missed).values().all(Option::is_none));
}

#[tokio::test]
async fn a_verdict_names_the_encoder_its_heads_read_and_older_rows_name_none() {
    let t = temp_store().await;
    let s = &t.store;
    let without = record(s, "halo", Source::Typed, None, &[]).await;
    let mut verdict = crate::common::verdict(&["toxic"]);
    verdict.encoder = Some(aegis_guard::ModelRef {
        id: "embeddinggemma-300m".into(),
        content_hash: "http://gpu-box:8081".into(),
    });
    let templates = crate::common::templates();
    let with = s
        .record(&aegis_store::NewVerdict {
            text: "dasar bodoh",
            source: Source::Typed,
            user_id: None,
            import: None,
            verdict: &verdict,
            templates: &templates,
        })
        .await
        .expect("record");
    let rows = s
        .list(&HistoryFilter::default(), None, 10)
        .await
        .expect("list")
        .rows;
    let named = |id: i64| {
        let row = rows.iter().find(|r| r.verdict_id == id).expect("listed");
        (row.encoder_id.clone(), row.encoder_hash.clone())
    };
    assert_eq!(named(without), (None, None));
    assert_eq!(
        named(with),
        (
            Some("embeddinggemma-300m".to_string()),
            Some("http://gpu-box:8081".to_string())
        )
    );
}
