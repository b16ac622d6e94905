//! Exporting history: JSONL keeps every field, CSV a row a spreadsheet can read, with the columns
//! that say why each validator decided as it did.

use aegis_guard::{ReadingScore, Status, QUOTES_ELIDED, TURN_READING};
use aegis_store::{ExportFormat, HistoryFilter, NewVerdict, Source};

use crate::common::{record, temp_store, templates, verdict, KEYS};

#[tokio::test]
async fn export_round_trips_as_jsonl_and_csv() {
    let t = temp_store().await;
    let s = &t.store;
    for (i, text) in [
        "Halo, \"apa\" kabar?\nBaris dua",
        "WIN, a prize",
        "biasa saja",
    ]
    .iter()
    .enumerate()
    {
        record(
            s,
            text,
            Source::Cli,
            Some("u"),
            if i == 1 { &["spam"] } else { &[] },
        )
        .await;
    }
    let listed = s
        .list(&HistoryFilter::default(), None, 100)
        .await
        .expect("list")
        .rows;

    let mut jsonl = Vec::new();
    assert_eq!(
        s.export(&HistoryFilter::default(), ExportFormat::Jsonl, &mut jsonl)
            .await
            .expect("export"),
        3
    );
    let parsed: Vec<serde_json::Value> = String::from_utf8(jsonl)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(parsed.len(), 3);
    for (row, json) in listed.iter().zip(&parsed) {
        assert_eq!(json["verdict_id"], row.verdict_id);
        assert_eq!(json["text"], row.text.as_str());
        assert_eq!(json["results"].as_array().expect("results").len(), 4);
        assert_eq!(json["results"][0]["score"], row.results[0].score);
        assert!(json["created_at"].as_str().expect("time").ends_with('Z'));
    }

    let mut csv_bytes = Vec::new();
    s.export(
        &HistoryFilter {
            status: Some(Status::Passed),
            ..Default::default()
        },
        ExportFormat::Csv,
        &mut csv_bytes,
    )
    .await
    .expect("export");
    let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
    let headers = reader.headers().expect("headers").clone();
    for key in KEYS {
        assert!(
            headers.iter().any(|h| h == format!("score_{key}")),
            "{headers:?}"
        );
    }
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    assert_eq!(records.len(), 2, "the filter applies to exports");
    let text_col = headers
        .iter()
        .position(|h| h == "text")
        .expect("text column");
    assert_eq!(
        &records[1][text_col], "Halo, \"apa\" kabar?\nBaris dua",
        "quotes, commas and newlines survive"
    );
}

#[tokio::test]
async fn a_csv_row_says_how_each_validator_decided() {
    let t = temp_store().await;
    // Toxic passed because the turn read with its quote elided scored under the threshold.
    let mut mentioned = verdict(&[]);
    let toxic = &mut mentioned.results[1];
    toxic.readings = vec![
        ReadingScore {
            reading: TURN_READING.into(),
            score: 0.8,
            decided: false,
            turned: false,
        },
        ReadingScore {
            reading: QUOTES_ELIDED.into(),
            score: 0.1,
            decided: true,
            turned: true,
        },
    ];
    t.store
        .record(&NewVerdict {
            text: "Someone called me a \"stupid cow\", how do I report it?",
            source: Source::Typed,
            user_id: None,
            import: None,
            verdict: &mentioned,
            templates: &templates(),
        })
        .await
        .expect("record");

    let mut bytes = Vec::new();
    t.store
        .export(&HistoryFilter::default(), ExportFormat::Csv, &mut bytes)
        .await
        .expect("export");
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let headers = reader.headers().expect("headers").clone();
    let record = reader.records().next().expect("a row").expect("record");
    let cell = |name: &str| {
        let at = headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name} column in {headers:?}"));
        record[at].to_string()
    };
    assert_eq!(cell("model_hash"), "a5fd");
    assert_eq!(cell("role"), "user");
    assert_eq!(cell("turn_index"), "0");
    assert_eq!(cell("decided_by_toxic"), "head");
    assert_eq!(cell("threshold_toxic"), "0.500000");
    assert_eq!(cell("read_as_toxic"), QUOTES_ELIDED);
    assert_eq!(cell("turned_by_toxic"), QUOTES_ELIDED);
    assert_eq!(cell("head_hash_toxic"), "ab".repeat(32));
    assert_eq!(cell("read_as_spam"), TURN_READING);
    assert_eq!(cell("turned_by_spam"), "");
}
