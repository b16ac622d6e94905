//! Evaluation runs on a real SQLite file: kept whole, read back, re-thresholded, deleted.

use std::collections::BTreeMap;

use aegis_eval::{DatasetInfo, EvalReport, ModelInfo, RunInfo, RunTemplate, Sample, ScoredRow};

use crate::common::temp_store;

fn run(template_hash: &str) -> (EvalReport, Vec<ScoredRow>) {
    let info = RunInfo {
        dataset: DatasetInfo {
            name: "set.jsonl".into(),
            sha256: "d".repeat(64),
            file_rows: 3,
            sample: Sample {
                limit: Some(3),
                seed: Some(u64::MAX),
            },
        },
        model: ModelInfo {
            id: "gemma".into(),
            content_hash: "m".repeat(64),
        },
        templates_from: "prompt_guard".into(),
        templates: vec![RunTemplate {
            key: "spam".into(),
            name: "Spam".into(),
            content_hash: template_hash.into(),
            threshold: 0.5,
            scored_by: "head".into(),
            content: format!("---\nname: Spam\n---\n{template_hash} {{{{message}}}}\n"),
        }],
    };
    let row = |row: usize, score: Option<f64>, label: Option<bool>| ScoredRow {
        row,
        id: Some(format!("r{row}")),
        text: format!("message {row} 'quoted' \"and\" ünïcode"),
        lang: "en".into(),
        labels: BTreeMap::from([("spam".into(), label)]),
        scores: score
            .map(|s| BTreeMap::from([("spam".into(), s)]))
            .unwrap_or_default(),
        error: score.is_none().then(|| "too long".into()),
    };
    let rows = vec![
        row(1, Some(0.9), Some(true)),
        row(2, Some(0.45), Some(false)),
        row(3, None, Some(true)),
    ];
    (EvalReport::build(&info, &rows, &BTreeMap::new()), rows)
}

#[tokio::test]
async fn a_run_comes_back_whole_and_re_thresholds_without_the_model() {
    let store = temp_store().await;
    let (report, rows) = run("v1");
    let id = store
        .store
        .save_eval_run(&report, &rows)
        .await
        .expect("saved");
    let stored = store
        .store
        .eval_run(id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(stored.rows, rows);
    assert_eq!(stored.info.dataset, report.info.dataset);
    assert_eq!(
        stored.info.templates[0].content,
        report.info.templates[0].content
    );
    assert_eq!(
        EvalReport::build(&stored.info, &stored.rows, &BTreeMap::new()),
        report
    );

    let lower = EvalReport::build(
        &stored.info,
        &stored.rows,
        &BTreeMap::from([("spam".into(), 0.4)]),
    );
    let spam = lower.validator("spam").expect("spam");
    assert_eq!(spam.overall.confusion.false_positives, 1);
    assert_eq!(lower.errors.len(), 1);
    assert_eq!(store.store.eval_run(id + 1).await.expect("read"), None);
}

#[tokio::test]
async fn runs_list_newest_first_with_their_template_versions_and_metrics() {
    let store = temp_store().await;
    let (first, first_rows) = run("v1");
    let (second, second_rows) = run("v2");
    let a = store
        .store
        .save_eval_run(&first, &first_rows)
        .await
        .expect("saved");
    let b = store
        .store
        .save_eval_run(&second, &second_rows)
        .await
        .expect("saved");
    let runs = store.store.eval_runs(10).await.expect("listed");
    assert_eq!(runs.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b, a]);
    assert_eq!(runs[0].info.templates[0].content_hash, "v2");
    assert_eq!(runs[1].info.templates[0].content_hash, "v1");
    assert_eq!(runs[0].rows, 3);
    assert_eq!(runs[0].metrics, second.summary());

    assert!(store.store.delete_eval_run(a).await.expect("deleted"));
    assert!(!store.store.delete_eval_run(a).await.expect("already gone"));
    assert_eq!(store.store.eval_runs(10).await.expect("listed").len(), 1);
}
