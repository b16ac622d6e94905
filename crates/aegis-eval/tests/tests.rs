//! The workbench's reports from a hand-worked fixture (tests/fixtures/metrics.md): every metric
//! against the values worked out there, and the HTML report parsed back.

use std::collections::BTreeMap;
use std::path::Path;

use aegis_eval::{
    compare, render_html, Dataset, DatasetInfo, EvalReport, Metrics, ModelInfo, RunInfo,
    RunTemplate, Sample, ScoredRow,
};

fn fixture() -> Dataset {
    Dataset::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labelled.jsonl"))
        .expect("the fixture loads")
}

/// Scores per row: (spam, financial_advice); row 9 failed.
const SCORES: [(f64, f64); 8] = [
    (0.9, 0.6),
    (0.8, 0.3),
    (0.7, 0.2),
    (0.7, 0.1),
    (0.4, 0.9),
    (0.2, 0.1),
    (0.1, 0.2),
    (0.6, 0.7),
];

fn scored(dataset: &Dataset, scores: &[(f64, f64)]) -> Vec<ScoredRow> {
    dataset
        .rows
        .iter()
        .map(|r| {
            let s = scores.get(r.row - 1);
            ScoredRow {
                row: r.row,
                id: r.message.id.clone(),
                text: r.message.text.clone(),
                lang: r.message.language(),
                labels: r.message.labels.clone(),
                scores: s
                    .map(|&(spam, money)| {
                        BTreeMap::from([("spam".into(), spam), ("financial_advice".into(), money)])
                    })
                    .unwrap_or_default(),
                error: s.is_none().then(|| "message too long".to_string()),
            }
        })
        .collect()
}

fn info(dataset: &Dataset, from: &str) -> RunInfo {
    let template = |key: &str, name: &str| RunTemplate {
        key: key.into(),
        name: name.into(),
        content_hash: format!("{key}-hash"),
        threshold: 0.5,
        scored_by: "head".into(),
        content: String::new(),
    };
    RunInfo {
        dataset: DatasetInfo {
            name: dataset.name(),
            sha256: dataset.sha256.clone(),
            file_rows: dataset.file_rows,
            sample: Sample::default(),
        },
        model: ModelInfo {
            id: "test-model".into(),
            content_hash: "0123456789abcdef".into(),
        },
        templates_from: from.into(),
        templates: vec![
            template("spam", "Spam"),
            template("financial_advice", "Financial advice"),
        ],
    }
}

fn report() -> (EvalReport, Vec<ScoredRow>) {
    let dataset = fixture();
    let rows = scored(&dataset, &SCORES);
    (
        EvalReport::build(&info(&dataset, "prompt_guard"), &rows, &BTreeMap::new()),
        rows,
    )
}

fn assert_close(actual: Option<f64>, expected: Option<f64>, what: &str) {
    match (actual, expected) {
        (Some(a), Some(e)) => assert!((a - e).abs() < 1e-12, "{what}: {a} != {e}"),
        (a, e) => assert_eq!(a, e, "{what}"),
    }
}

struct Expected {
    confusion: [usize; 4],
    precision: Option<f64>,
    recall: Option<f64>,
    f1: Option<f64>,
    accuracy: Option<f64>,
    roc_auc: Option<f64>,
    pr_auc: Option<f64>,
    best: Option<(f64, f64)>,
}

fn check(m: &Metrics, e: Expected, what: &str) {
    let c = m.confusion;
    assert_eq!(
        [
            c.true_positives,
            c.false_positives,
            c.true_negatives,
            c.false_negatives
        ],
        e.confusion,
        "{what}: TP FP TN FN"
    );
    assert_eq!(
        m.positives,
        e.confusion[0] + e.confusion[3],
        "{what}: positives"
    );
    assert_eq!(
        m.labelled,
        e.confusion.iter().sum::<usize>(),
        "{what}: labelled"
    );
    assert_close(m.precision, e.precision, &format!("{what} precision"));
    assert_close(m.recall, e.recall, &format!("{what} recall"));
    assert_close(m.f1, e.f1, &format!("{what} F1"));
    assert_close(m.accuracy, e.accuracy, &format!("{what} accuracy"));
    assert_close(m.roc_auc, e.roc_auc, &format!("{what} ROC AUC"));
    assert_close(m.pr_auc, e.pr_auc, &format!("{what} PR AUC"));
    assert_close(
        m.best_f1.map(|b| b.threshold),
        e.best.map(|b| b.0),
        &format!("{what} best threshold"),
    );
    assert_close(
        m.best_f1.map(|b| b.f1),
        e.best.map(|b| b.1),
        &format!("{what} best F1"),
    );
}

#[test]
fn every_metric_matches_the_hand_worked_fixture() {
    let (report, _) = report();
    assert_eq!(report.rows, 9);
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].row, 9);

    let spam = report.validator("spam").expect("spam");
    check(
        &spam.overall,
        Expected {
            confusion: [2, 2, 2, 1],
            precision: Some(0.5),
            recall: Some(2.0 / 3.0),
            f1: Some(4.0 / 7.0),
            accuracy: Some(4.0 / 7.0),
            roc_auc: Some(8.5 / 12.0),
            pr_auc: Some(0.7),
            best: Some((0.4, 0.75)),
        },
        "spam",
    );
    check(
        &spam.by_language["en"],
        Expected {
            confusion: [2, 2, 0, 0],
            precision: Some(0.5),
            recall: Some(1.0),
            f1: Some(4.0 / 6.0),
            accuracy: Some(0.5),
            roc_auc: Some(0.625),
            pr_auc: Some(0.75),
            best: Some((0.9, 2.0 / 3.0)),
        },
        "spam en",
    );
    check(
        &spam.by_language["id"],
        Expected {
            confusion: [0, 0, 2, 1],
            precision: None,
            recall: Some(0.0),
            f1: Some(0.0),
            accuracy: Some(2.0 / 3.0),
            roc_auc: Some(1.0),
            pr_auc: Some(1.0),
            best: Some((0.4, 1.0)),
        },
        "spam id",
    );
    assert_eq!(spam.unlabelled, 1);
    let rows = |m: &[aegis_eval::Mistake]| m.iter().map(|m| m.row).collect::<Vec<_>>();
    assert_eq!(rows(&spam.worst_false_positives), vec![2, 4]);
    assert_eq!(rows(&spam.worst_false_negatives), vec![5]);

    let money = report
        .validator("financial_advice")
        .expect("financial_advice");
    check(
        &money.overall,
        Expected {
            confusion: [0, 1, 2, 0],
            precision: Some(0.0),
            recall: None,
            f1: Some(0.0),
            accuracy: Some(2.0 / 3.0),
            roc_auc: None,
            pr_auc: None,
            best: None,
        },
        "financial_advice",
    );
    assert_eq!(money.unlabelled, 5);
    assert!(money.curves.roc.is_empty() && money.curves.pr.is_empty());
}

#[test]
fn a_new_threshold_is_applied_to_stored_scores() {
    let (report, rows) = report();
    let moved = EvalReport::build(&report.info, &rows, &BTreeMap::from([("spam".into(), 0.4)]));
    let spam = moved.validator("spam").expect("spam");
    assert_eq!(spam.overall.threshold, 0.4);
    assert_close(spam.overall.f1, Some(0.75), "F1 at the best threshold");
    assert_eq!(moved.info.templates[0].threshold, 0.4);
    // Untouched validators keep the run's threshold.
    assert_eq!(
        moved
            .validator("financial_advice")
            .expect("fa")
            .overall
            .threshold,
        0.5
    );
}

#[test]
fn a_comparison_lists_flips_and_metric_changes() {
    let dataset = fixture();
    let (baseline, baseline_rows) = report();
    let mut candidate_scores = SCORES;
    candidate_scores[4].0 = 0.55; // row 5, a positive: fixed
    candidate_scores[5].0 = 0.65; // row 6, a negative: broken
    let candidate_rows = scored(&dataset, &candidate_scores);
    let candidate = EvalReport::build(&info(&dataset, "edited"), &candidate_rows, &BTreeMap::new());
    let c =
        compare((&baseline, &baseline_rows), (&candidate, &candidate_rows)).expect("comparable");
    let flips: Vec<(usize, &str, Option<bool>)> = c
        .flips
        .iter()
        .map(|f| (f.row, f.validator.as_str(), f.fixed))
        .collect();
    assert_eq!(
        flips,
        vec![(5, "spam", Some(true)), (6, "spam", Some(false))]
    );
    let spam = c
        .deltas
        .iter()
        .find(|d| d.key == "spam")
        .expect("spam delta");
    assert_eq!((spam.fixed, spam.broken), (1, 1));
    // Recall 2/3 -> 1.
    assert_close(spam.recall, Some(1.0 / 3.0), "recall change");

    let mut other = candidate.clone();
    other.info.dataset.sha256 = "different".into();
    assert!(compare((&baseline, &baseline_rows), (&other, &candidate_rows)).is_err());
}

#[test]
fn the_html_report_is_one_parseable_file_with_every_section() {
    let dataset = fixture();
    let (report, baseline_rows) = report();
    let mut candidate_scores = SCORES;
    candidate_scores[4].0 = 0.55;
    let candidate_rows = scored(&dataset, &candidate_scores);
    let candidate = EvalReport::build(&info(&dataset, "edited"), &candidate_rows, &BTreeMap::new());
    let comparison =
        compare((&report, &baseline_rows), (&candidate, &candidate_rows)).expect("comparable");
    let html = render_html(&candidate, Some(&comparison));

    let document = scraper::Html::parse_document(&html);
    assert!(
        document.errors.is_empty(),
        "HTML parse errors: {:?}",
        document.errors
    );
    let select = |css: &str| scraper::Selector::parse(css).expect("selector");
    let count = |css: &str| document.select(&select(css)).count();
    assert_eq!(count("table.summary tbody tr"), 2);
    for key in ["spam", "financial_advice"] {
        for chart in ["svg.roc", "svg.pr", "svg.histogram"] {
            assert_eq!(
                count(&format!("#validator-{key} {chart}")),
                1,
                "{key} {chart}"
            );
        }
    }
    // all + en + id for spam; all + en for financial advice.
    assert_eq!(count("#validator-spam table.metrics tbody tr"), 3);
    assert_eq!(count("#validator-spam polyline"), 2);
    let text_of = |css: &str| -> Vec<String> {
        document
            .select(&select(css))
            .map(|e| e.text().collect::<String>())
            .collect()
    };
    // Text with markup in it arrives as text, not as elements.
    assert!(text_of("#validator-spam table.false-positives td.text")
        .iter()
        .any(|t| t.contains("Meeting moved")));
    assert_eq!(count("td.text b"), 0);
    assert!(text_of("table.flips td.text")
        .iter()
        .any(|t| t.contains("Pulsa gratis")));
    assert_eq!(count("#errors + table tbody tr"), 1);
    assert!(count("script:not([type='application/json'])") == 0 && count("link") == 0);

    let data = document
        .select(&select("script#report-data"))
        .next()
        .expect("embedded data")
        .text()
        .collect::<String>();
    let value: serde_json::Value = serde_json::from_str(&data).expect("embedded JSON");
    let embedded: EvalReport =
        serde_json::from_value(value["report"].clone()).expect("the report round-trips");
    assert_eq!(embedded, candidate);
    assert_eq!(
        value["comparison"]["flips"].as_array().map(Vec::len),
        Some(1)
    );
}
