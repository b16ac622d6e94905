//! Two runs on the same rows, side by side: which verdicts flipped and how each metric moved.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{EvalError, Result};
use crate::report::{EvalReport, ScoredRow};

/// One validator's verdict on one message that differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Flip {
    pub row: usize,
    pub id: Option<String>,
    pub lang: String,
    pub text: String,
    pub validator: String,
    pub label: Option<bool>,
    pub baseline_score: f64,
    pub candidate_score: f64,
    pub baseline_flagged: bool,
    pub candidate_flagged: bool,
    /// Whether the candidate now agrees with the label (`None` without a label).
    pub fixed: Option<bool>,
}

/// Candidate minus baseline; `None` where either side is undefined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MetricDelta {
    pub key: String,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    pub roc_auc: Option<f64>,
    pub pr_auc: Option<f64>,
    pub fixed: usize,
    pub broken: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    pub deltas: Vec<MetricDelta>,
    pub flips: Vec<Flip>,
}

/// Compares two runs of the same dataset and sample, validator by validator (validators only
/// one side has are left out), each at its own run's thresholds.
pub fn compare(
    baseline: (&EvalReport, &[ScoredRow]),
    candidate: (&EvalReport, &[ScoredRow]),
) -> Result<Comparison> {
    let (a, a_rows) = baseline;
    let (b, b_rows) = candidate;
    if a.info.dataset.sha256 != b.info.dataset.sha256
        || a.info.dataset.sample != b.info.dataset.sample
    {
        return Err(EvalError::Incomparable(format!(
            "the runs evaluated different data ({} {:?} vs {} {:?})",
            a.info.dataset.name, a.info.dataset.sample, b.info.dataset.name, b.info.dataset.sample
        )));
    }
    let candidate_rows: HashMap<usize, &ScoredRow> = b_rows.iter().map(|r| (r.row, r)).collect();
    let mut deltas = Vec::new();
    let mut flips = Vec::new();
    for va in &a.validators {
        let Some(vb) = b.validator(&va.key) else {
            continue;
        };
        let (ta, tb) = (va.overall.threshold, vb.overall.threshold);
        let mut fixed = 0;
        let mut broken = 0;
        for ra in a_rows {
            let Some(rb) = candidate_rows.get(&ra.row) else {
                continue;
            };
            let (Some(&sa), Some(&sb)) = (ra.scores.get(&va.key), rb.scores.get(&va.key)) else {
                continue;
            };
            let (fa, fb) = (sa >= ta, sb >= tb);
            if fa == fb {
                continue;
            }
            let label = ra.labels.get(&va.key).copied().flatten();
            let now_right = label.map(|l| l == fb);
            match now_right {
                Some(true) => fixed += 1,
                Some(false) => broken += 1,
                None => {}
            }
            flips.push(Flip {
                row: ra.row,
                id: ra.id.clone(),
                lang: ra.lang.clone(),
                text: ra.text.clone(),
                validator: va.key.clone(),
                label,
                baseline_score: sa,
                candidate_score: sb,
                baseline_flagged: fa,
                candidate_flagged: fb,
                fixed: now_right,
            });
        }
        let delta = |x: Option<f64>, y: Option<f64>| Some(y? - x?);
        deltas.push(MetricDelta {
            key: va.key.clone(),
            precision: delta(va.overall.precision, vb.overall.precision),
            recall: delta(va.overall.recall, vb.overall.recall),
            f1: delta(va.overall.f1, vb.overall.f1),
            roc_auc: delta(va.overall.roc_auc, vb.overall.roc_auc),
            pr_auc: delta(va.overall.pr_auc, vb.overall.pr_auc),
            fixed,
            broken,
        });
    }
    flips.sort_by(|x, y| x.validator.cmp(&y.validator).then(x.row.cmp(&y.row)));
    Ok(Comparison {
        baseline: a.info.templates_from.clone(),
        candidate: b.info.templates_from.clone(),
        deltas,
        flips,
    })
}
