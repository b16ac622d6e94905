use aegis_guard::{find_reading, ReadingScore, Role, Turn, TurnReport, IN_CONTEXT, QUOTES_ELIDED};
use aegis_store::{NewVerdict, Source};

use crate::common::{record, temp_store, templates, verdict};

#[tokio::test]
async fn a_turn_keeps_its_role_position_and_context_and_a_lone_message_reads_as_turn_zero() {
    let t = temp_store().await;
    let mut checked = verdict(&["harassment"]);
    checked.turn = TurnReport {
        index: 3,
        role: Role::User,
        context: vec![
            Turn::user("kamu tinggal di mana?"),
            Turn::assistant("Maaf, saya tidak bisa membagikan itu."),
        ]
        .into(),
        context_cut: 1,
    };
    let read = |reading: &str, score: f32, turned: bool| ReadingScore {
        reading: reading.into(),
        score,
        decided: true,
        turned,
    };
    checked.results[2].readings[0].decided = false;
    checked.results[2]
        .readings
        .push(read(IN_CONTEXT, 0.91, true));
    checked.results[3].readings[0].decided = false;
    checked.results[3]
        .readings
        .push(read(QUOTES_ELIDED, 0.04, true));
    // A reading the store has never heard of is kept as it came.
    checked.results[0]
        .readings
        .push(read("added_since", 0.2, false));
    let id = t
        .store
        .record(&NewVerdict {
            text: "aku tahu sekolahmu",
            source: Source::Import,
            user_id: None,
            import: None,
            verdict: &checked,
            templates: &templates(),
        })
        .await
        .expect("record");
    let detail = t.store.get(id).await.expect("read").expect("kept");
    assert_eq!(detail.row.role, Role::User);
    assert_eq!(detail.row.turn_index, 3);
    assert_eq!(checked.turn.context, detail.row.context);
    assert_eq!(detail.row.context_cut, 1);
    let kept: Vec<_> = checked.results.iter().map(|r| &r.readings).collect();
    let stored: Vec<_> = detail.row.results.iter().map(|r| &r.readings).collect();
    assert_eq!(
        kept, stored,
        "every reading kept in order, whatever its name"
    );
    let harassment = &detail.row.results[2].readings;
    let in_context = find_reading(harassment, IN_CONTEXT).expect("read in context");
    assert!(in_context.turned && in_context.decided);
    assert_eq!((in_context.score * 100.0).round(), 91.0);
    let quoted = find_reading(&detail.row.results[3].readings, QUOTES_ELIDED).expect("read");
    assert!(quoted.turned && find_reading(harassment, QUOTES_ELIDED).is_none());
    assert_eq!((quoted.score * 100.0).round(), 4.0);

    let lone = record(&t.store, "halo", Source::Typed, None, &[]).await;
    let lone = t.store.get(lone).await.expect("read").expect("kept");
    assert_eq!((lone.row.role, lone.row.turn_index), (Role::User, 0));
    assert!(lone.row.context.is_empty());
    assert!(lone.row.results.iter().all(|r| r.readings.len() == 1));
}

#[tokio::test]
async fn rows_kept_before_readings_were_data_keep_the_readings_they_had() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    let mut older = crate::common::sqlite_at_version(&path, 10).await;
    // A quote read as mentioned (toxic), a threat caught in context (harassment), and a turn read
    // alone (spam), as the columns of migrations 0007 and 0008 kept them.
    sqlx::raw_sql(
        "INSERT INTO messages (id, text, source, created_at) VALUES (1, 'x', 'typed', 0);
         INSERT INTO template_versions (id, validator_key, content_hash, content, created_at)
             VALUES (1, 'toxic', 'h', 'c', 0), (2, 'harassment', 'h', 'c', 0), (3, 'spam', 'h', 'c', 0);
         INSERT INTO verdicts (id, message_id, status, case_label, rejection_message, language, model_id, model_hash, latency_ms, created_at)
             VALUES (1, 1, 'failed', 'harassment', 'Maaf.', 'id', 'm', 'mh', 1, 0);
         INSERT INTO validator_results (verdict_id, validator_key, position, score, learned_score, decided_by, threshold, passed, latency_ms, template_version_id, mention_score, read_as_mention, context_score, caught_in_context)
             VALUES (1, 'toxic', 0, 0.1, 0.1, 'head', 0.5, 1, 1, 1, 0.1, 1, NULL, 0),
                    (1, 'harassment', 1, 0.8, 0.8, 'head', 0.5, 0, 1, 2, NULL, 0, 0.8, 1),
                    (1, 'spam', 2, 0.3, 0.3, 'head', 0.5, 1, 1, 3, NULL, 0, NULL, 0);",
    )
    .execute(&mut older)
    .await
    .expect("older rows");
    older.close().await.expect("close");

    let store = aegis_store::Store::open(&path).await.expect("migrated");
    let detail = store.get(1).await.expect("read").expect("kept");
    let readings = |key: &str| {
        detail
            .row
            .results
            .iter()
            .find(|r| r.key == key)
            .expect("result kept")
            .readings
            .iter()
            .map(|r| {
                (
                    r.reading.clone(),
                    (r.score * 10.0).round(),
                    r.decided,
                    r.turned,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(readings("toxic"), [(QUOTES_ELIDED.into(), 1.0, true, true)]);
    assert_eq!(
        readings("harassment"),
        [(IN_CONTEXT.into(), 8.0, true, true)]
    );
    assert_eq!(readings("spam"), [("turn".into(), 3.0, true, false)]);
}
