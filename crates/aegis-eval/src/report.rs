//! A run's scores and what they add up to: metrics per validator, overall and per language,
//! curves, histograms and the worst mistakes. Built from stored scores alone, so a new threshold
//! costs no model call.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use aegis_guard::Verdict;

use crate::dataset::{DatasetRow, Sample};
use crate::metrics::{Curves, Histogram, Metrics};

/// One evaluated message: its labels and each validator's score (the score the guard decides
/// on: the head's when one is loaded, else the prompt's P(Yes)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ScoredRow {
    /// Line (JSONL) or record (CSV) in the dataset file, 1-based.
    pub row: usize,
    pub id: Option<String>,
    pub text: String,
    pub lang: String,
    pub labels: BTreeMap<String, Option<bool>>,
    pub scores: BTreeMap<String, f64>,
    /// Why the guard gave no verdict (e.g. too long for the model); the row counts nowhere.
    pub error: Option<String>,
}

impl ScoredRow {
    /// A dataset row with the guard's verdict on it, or why there is none.
    pub fn new(row: &DatasetRow, verdict: std::result::Result<&Verdict, String>) -> Self {
        let (scores, error) = match verdict {
            Ok(verdict) => (
                verdict
                    .results
                    .iter()
                    .map(|r| (r.key.clone(), f64::from(r.score)))
                    .collect(),
                None,
            ),
            Err(error) => (BTreeMap::new(), Some(error)),
        };
        Self {
            row: row.row,
            id: row.message.id.clone(),
            text: row.message.text.clone(),
            lang: row.message.language(),
            labels: row.message.labels.clone(),
            scores,
            error,
        }
    }

    /// Benign traffic: scored, with every label false (none unknown).
    fn is_benign(&self) -> bool {
        self.error.is_none()
            && !self.labels.is_empty()
            && self.labels.values().all(|l| *l == Some(false))
    }

    /// Labels this row has for `key` with its score, when both exist.
    fn labelled_score(&self, key: &str) -> Option<(f64, bool)> {
        let label = self.labels.get(key).copied().flatten()?;
        Some((*self.scores.get(key)?, label))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DatasetInfo {
    pub name: String,
    pub sha256: String,
    pub file_rows: usize,
    pub sample: Sample,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelInfo {
    pub id: String,
    pub content_hash: String,
}

/// A validator's template as evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RunTemplate {
    pub key: String,
    pub name: String,
    pub content_hash: String,
    /// The front matter's threshold at the time of the run.
    pub threshold: f64,
    /// `head` or `prompt`: which score decided.
    pub scored_by: String,
    /// The whole template file, kept with the run so any version can be read back.
    #[serde(skip)]
    pub content: String,
}

/// What was evaluated: the data, the model and the templates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RunInfo {
    pub dataset: DatasetInfo,
    pub model: ModelInfo,
    /// Where the templates came from (a folder, or a stored run).
    pub templates_from: String,
    pub templates: Vec<RunTemplate>,
}

impl RunInfo {
    pub fn thresholds(&self) -> BTreeMap<String, f64> {
        self.templates
            .iter()
            .map(|t| (t.key.clone(), t.threshold))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Mistake {
    pub row: usize,
    pub id: Option<String>,
    pub lang: String,
    pub text: String,
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorReport {
    pub key: String,
    pub name: String,
    pub scored_by: String,
    pub overall: Metrics,
    pub by_language: BTreeMap<String, Metrics>,
    /// Rows evaluated whose label for this validator is null.
    pub unlabelled: usize,
    pub curves: Curves,
    pub histogram: Histogram,
    /// Most confident first: highest-scoring negatives, lowest-scoring positives.
    pub worst_false_positives: Vec<Mistake>,
    pub worst_false_negatives: Vec<Mistake>,
    /// Benign rows (every label false) this validator flags.
    pub benign: BenignRate,
}

/// How many benign rows (every label false: ordinary traffic) were flagged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BenignRate {
    pub rows: usize,
    pub flagged: usize,
    /// `flagged / rows`; absent without benign rows.
    pub rate: Option<f64>,
}

impl BenignRate {
    fn of(flags: impl Iterator<Item = bool>) -> Self {
        let (mut rows, mut flagged) = (0, 0);
        for flag in flags {
            rows += 1;
            flagged += usize::from(flag);
        }
        Self {
            rows,
            flagged,
            rate: (rows > 0).then(|| flagged as f64 / rows as f64),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RowError {
    pub row: usize,
    pub id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EvalReport {
    pub info: RunInfo,
    /// Rows evaluated, including those in `errors`.
    pub rows: usize,
    pub errors: Vec<RowError>,
    pub validators: Vec<ValidatorReport>,
    /// Benign rows that any validator flags: ordinary messages the guard would reject.
    pub benign: BenignRate,
}

/// The mistakes listed per validator and kind in a report.
pub const WORST_MISTAKES: usize = 10;
const HISTOGRAM_BINS: usize = 20;

impl EvalReport {
    /// Metrics at `thresholds` (validators left out use the run's own).
    pub fn build(info: &RunInfo, rows: &[ScoredRow], thresholds: &BTreeMap<String, f64>) -> Self {
        let threshold_of = |t: &RunTemplate| thresholds.get(&t.key).copied().unwrap_or(t.threshold);
        let validators = info
            .templates
            .iter()
            .map(|t| validator_report(t, rows, threshold_of(t)))
            .collect();
        let benign = BenignRate::of(rows.iter().filter(|r| r.is_benign()).map(|r| {
            info.templates
                .iter()
                .any(|t| r.scores.get(&t.key).is_some_and(|s| *s >= threshold_of(t)))
        }));
        let mut info = info.clone();
        for t in &mut info.templates {
            if let Some(&threshold) = thresholds.get(&t.key) {
                t.threshold = threshold;
            }
        }
        Self {
            info,
            rows: rows.len(),
            errors: rows
                .iter()
                .filter_map(|r| {
                    Some(RowError {
                        row: r.row,
                        id: r.id.clone(),
                        message: r.error.clone()?,
                    })
                })
                .collect(),
            validators,
            benign,
        }
    }

    pub fn validator(&self, key: &str) -> Option<&ValidatorReport> {
        self.validators.iter().find(|v| v.key == key)
    }

    /// The headline numbers only (what a run keeps to follow metrics across template versions).
    pub fn summary(&self) -> Vec<ValidatorSummary> {
        self.validators
            .iter()
            .map(|v| ValidatorSummary {
                key: v.key.clone(),
                overall: v.overall.clone(),
                by_language: v.by_language.clone(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorSummary {
    pub key: String,
    pub overall: Metrics,
    pub by_language: BTreeMap<String, Metrics>,
}

fn validator_report(template: &RunTemplate, rows: &[ScoredRow], threshold: f64) -> ValidatorReport {
    let key = template.key.as_str();
    let scored: Vec<(&ScoredRow, f64, bool)> = rows
        .iter()
        .filter_map(|r| r.labelled_score(key).map(|(s, l)| (r, s, l)))
        .collect();
    let scores: Vec<f64> = scored.iter().map(|(_, s, _)| *s).collect();
    let labels: Vec<bool> = scored.iter().map(|(_, _, l)| *l).collect();
    let mut languages: BTreeMap<&str, (Vec<f64>, Vec<bool>)> = BTreeMap::new();
    for (row, score, label) in &scored {
        let entry = languages.entry(row.lang.as_str()).or_default();
        entry.0.push(*score);
        entry.1.push(*label);
    }
    let mistake = |(row, score, _): &(&ScoredRow, f64, bool)| Mistake {
        row: row.row,
        id: row.id.clone(),
        lang: row.lang.clone(),
        text: row.text.clone(),
        score: *score,
    };
    let mut false_positives: Vec<&(&ScoredRow, f64, bool)> = scored
        .iter()
        .filter(|(_, s, l)| !l && *s >= threshold)
        .collect();
    false_positives.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.row.cmp(&b.0.row)));
    let mut false_negatives: Vec<&(&ScoredRow, f64, bool)> = scored
        .iter()
        .filter(|(_, s, l)| *l && *s < threshold)
        .collect();
    false_negatives.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.row.cmp(&b.0.row)));
    ValidatorReport {
        key: key.to_string(),
        name: template.name.clone(),
        scored_by: template.scored_by.clone(),
        overall: Metrics::compute(&scores, &labels, threshold),
        by_language: languages
            .into_iter()
            .map(|(lang, (s, l))| (lang.to_string(), Metrics::compute(&s, &l, threshold)))
            .collect(),
        unlabelled: rows
            .iter()
            .filter(|r| r.error.is_none() && r.labels.get(key).copied().flatten().is_none())
            .count(),
        curves: Curves::compute(&scores, &labels),
        histogram: Histogram::compute(&scores, &labels, HISTOGRAM_BINS),
        worst_false_positives: false_positives
            .into_iter()
            .take(WORST_MISTAKES)
            .map(mistake)
            .collect(),
        worst_false_negatives: false_negatives
            .into_iter()
            .take(WORST_MISTAKES)
            .map(mistake)
            .collect(),
        benign: BenignRate::of(
            rows.iter()
                .filter(|r| r.is_benign())
                .filter_map(|r| r.scores.get(key).map(|s| *s >= threshold)),
        ),
    }
}
