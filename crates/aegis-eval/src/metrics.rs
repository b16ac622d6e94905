//! Metrics of one validator's scores against labels: `score >= threshold` flags a message, as in
//! the guard. Undefined values (precision with nothing flagged, anything needing a class that is
//! absent) are `None`, never a made-up 0, so a report can say "no positives" instead of lying.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Confusion {
    pub true_positives: usize,
    pub false_positives: usize,
    pub true_negatives: usize,
    pub false_negatives: usize,
}

impl Confusion {
    pub fn at(scores: &[f64], labels: &[bool], threshold: f64) -> Self {
        let mut c = Self::default();
        for (&score, &label) in scores.iter().zip(labels) {
            match (score >= threshold, label) {
                (true, true) => c.true_positives += 1,
                (true, false) => c.false_positives += 1,
                (false, false) => c.true_negatives += 1,
                (false, true) => c.false_negatives += 1,
            }
        }
        c
    }

    pub fn precision(&self) -> Option<f64> {
        ratio(
            self.true_positives,
            self.true_positives + self.false_positives,
        )
    }

    pub fn recall(&self) -> Option<f64> {
        ratio(
            self.true_positives,
            self.true_positives + self.false_negatives,
        )
    }

    /// 2TP / (2TP + FP + FN): defined whenever anything was labelled positive or flagged.
    pub fn f1(&self) -> Option<f64> {
        ratio(
            2 * self.true_positives,
            2 * self.true_positives + self.false_positives + self.false_negatives,
        )
    }

    pub fn accuracy(&self) -> Option<f64> {
        ratio(
            self.true_positives + self.true_negatives,
            self.true_positives + self.true_negatives + self.false_positives + self.false_negatives,
        )
    }
}

fn ratio(numerator: usize, denominator: usize) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// The threshold with the best F1 over the scores seen (each distinct score tried as a threshold;
/// on equal F1 the higher threshold, which flags less).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BestThreshold {
    pub threshold: f64,
    pub f1: f64,
    pub precision: f64,
    pub recall: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Metrics {
    /// Rows with a label for this validator (nulls are left out).
    pub labelled: usize,
    pub positives: usize,
    pub negatives: usize,
    pub threshold: f64,
    pub confusion: Confusion,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    pub accuracy: Option<f64>,
    /// Needs both classes.
    pub roc_auc: Option<f64>,
    /// Average precision (the step-wise area under the PR curve); needs a positive.
    pub pr_auc: Option<f64>,
    pub best_f1: Option<BestThreshold>,
}

/// The columns of the per-language metrics table, as every report (terminal and HTML) shows it.
pub const METRIC_COLUMNS: [&str; 14] = [
    "threshold",
    "labelled",
    "positives",
    "TP",
    "FP",
    "TN",
    "FN",
    "precision",
    "recall",
    "F1",
    "accuracy",
    "ROC AUC",
    "PR AUC",
    "best-F1 at",
];

/// A metric as reports print it: three decimals, or a dash where it is undefined.
pub fn metric_text(value: Option<f64>) -> String {
    value
        .map(|v| format!("{v:.3}"))
        .unwrap_or_else(|| "–".into())
}

impl Metrics {
    /// This row of the metrics table, one cell per `METRIC_COLUMNS` entry.
    pub fn cells(&self) -> [String; METRIC_COLUMNS.len()] {
        let c = &self.confusion;
        [
            format!("{:.3}", self.threshold),
            self.labelled.to_string(),
            self.positives.to_string(),
            c.true_positives.to_string(),
            c.false_positives.to_string(),
            c.true_negatives.to_string(),
            c.false_negatives.to_string(),
            metric_text(self.precision),
            metric_text(self.recall),
            metric_text(self.f1),
            metric_text(self.accuracy),
            metric_text(self.roc_auc),
            metric_text(self.pr_auc),
            self.best_f1.map_or_else(
                || "–".into(),
                |b| format!("{:.3} (F1 {:.3})", b.threshold, b.f1),
            ),
        ]
    }

    pub fn compute(scores: &[f64], labels: &[bool], threshold: f64) -> Self {
        let confusion = Confusion::at(scores, labels, threshold);
        let positives = labels.iter().filter(|&&l| l).count();
        Self {
            labelled: labels.len(),
            positives,
            negatives: labels.len() - positives,
            threshold,
            confusion,
            precision: confusion.precision(),
            recall: confusion.recall(),
            f1: confusion.f1(),
            accuracy: confusion.accuracy(),
            roc_auc: aegis_heads::roc_auc(scores, labels),
            pr_auc: average_precision(scores, labels),
            best_f1: best_f1_threshold(scores, labels),
        }
    }
}

/// Rows grouped by distinct score, highest first, with the running (TP, FP) after each group:
/// the operating points of every threshold, ties moving together.
fn operating_points(scores: &[f64], labels: &[bool]) -> Vec<(f64, usize, usize)> {
    let mut order: Vec<usize> = (0..scores.len().min(labels.len())).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp) = (0, 0);
    let mut points: Vec<(f64, usize, usize)> = Vec::new();
    for i in order {
        if labels[i] {
            tp += 1;
        } else {
            fp += 1;
        }
        match points.last_mut() {
            Some(last) if last.0 == scores[i] => *last = (scores[i], tp, fp),
            _ => points.push((scores[i], tp, fp)),
        }
    }
    points
}

/// Σ (Rₖ − Rₖ₋₁) Pₖ over thresholds from high to low (as scikit-learn's average precision).
pub fn average_precision(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let positives = labels.iter().filter(|&&l| l).count();
    if positives == 0 {
        return None;
    }
    let mut previous_recall = 0.0;
    let mut area = 0.0;
    for (_, tp, fp) in operating_points(scores, labels) {
        let recall = tp as f64 / positives as f64;
        area += (recall - previous_recall) * tp as f64 / (tp + fp) as f64;
        previous_recall = recall;
    }
    Some(area)
}

pub fn best_f1_threshold(scores: &[f64], labels: &[bool]) -> Option<BestThreshold> {
    let positives = labels.iter().filter(|&&l| l).count();
    if positives == 0 {
        return None;
    }
    let mut best: Option<BestThreshold> = None;
    for (threshold, tp, fp) in operating_points(scores, labels) {
        let f1 = 2.0 * tp as f64 / (tp + fp + positives) as f64;
        // Points come highest threshold first, so only a strictly better F1 replaces one.
        if best.is_none_or(|b| f1 > b.f1) {
            best = Some(BestThreshold {
                threshold,
                f1,
                precision: tp as f64 / (tp + fp) as f64,
                recall: tp as f64 / positives as f64,
            });
        }
    }
    best
}

/// A curve for the report: ROC as (false-positive rate, true-positive rate), PR as (recall,
/// precision), one point per distinct threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Curves {
    pub roc: Vec<(f64, f64)>,
    pub pr: Vec<(f64, f64)>,
}

impl Curves {
    pub fn compute(scores: &[f64], labels: &[bool]) -> Self {
        let positives = labels.iter().filter(|&&l| l).count();
        let negatives = labels.len() - positives;
        if positives == 0 {
            return Self::default();
        }
        let points = operating_points(scores, labels);
        let mut roc = vec![(0.0, 0.0)];
        let mut pr = Vec::new();
        for &(_, tp, fp) in &points {
            let recall = tp as f64 / positives as f64;
            if negatives > 0 {
                roc.push((fp as f64 / negatives as f64, recall));
            }
            pr.push((recall, tp as f64 / (tp + fp) as f64));
        }
        if negatives == 0 {
            roc.clear();
        }
        Self { roc, pr }
    }
}

/// Score counts in `bins` equal bins over [0, 1], positives and negatives apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Histogram {
    pub positives: Vec<usize>,
    pub negatives: Vec<usize>,
}

impl Histogram {
    pub fn compute(scores: &[f64], labels: &[bool], bins: usize) -> Self {
        let mut h = Self {
            positives: vec![0; bins],
            negatives: vec![0; bins],
        };
        if bins == 0 {
            return h;
        }
        for (&score, &label) in scores.iter().zip(labels) {
            let bin = ((score.clamp(0.0, 1.0) * bins as f64) as usize).min(bins - 1);
            if label {
                h.positives[bin] += 1;
            } else {
                h.negatives[bin] += 1;
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    // Every expected value below was worked out by hand; see tests/fixtures/metrics.md for the
    // working.
    const SCORES: [f64; 7] = [0.9, 0.8, 0.7, 0.7, 0.4, 0.2, 0.1];
    const LABELS: [bool; 7] = [true, false, true, false, true, false, false];

    #[test]
    fn threshold_metrics_with_a_tie_across_classes() {
        let m = Metrics::compute(&SCORES, &LABELS, 0.5);
        assert_eq!(
            m.confusion,
            Confusion {
                true_positives: 2,
                false_positives: 2,
                true_negatives: 2,
                false_negatives: 1
            }
        );
        assert!(close(m.precision, 0.5));
        assert!(close(m.recall, 2.0 / 3.0));
        assert!(close(m.f1, 4.0 / 7.0));
        assert!(close(m.accuracy, 4.0 / 7.0));
        assert!(close(m.roc_auc, 8.5 / 12.0));
        assert!(close(m.pr_auc, 0.7));
        let best = m.best_f1.expect("positives exist");
        assert_eq!(best.threshold, 0.4);
        assert!((best.f1 - 0.75).abs() < 1e-12);
        assert!((best.precision - 0.6).abs() < 1e-12);
        assert_eq!(best.recall, 1.0);
    }

    #[test]
    fn the_threshold_is_inclusive_like_the_guard() {
        let m = Metrics::compute(&SCORES, &LABELS, 0.7);
        assert_eq!(m.confusion.true_positives, 2);
        assert_eq!(m.confusion.false_positives, 2);
    }

    #[test]
    fn an_all_negative_validator_has_no_recall_auc_or_best_threshold() {
        let m = Metrics::compute(&[0.6, 0.3, 0.1], &[false, false, false], 0.5);
        assert_eq!(m.confusion.false_positives, 1);
        assert!(close(m.precision, 0.0));
        assert_eq!(m.recall, None);
        assert!(close(m.f1, 0.0));
        assert!(close(m.accuracy, 2.0 / 3.0));
        assert_eq!((m.roc_auc, m.pr_auc, m.best_f1), (None, None, None));
        let quiet = Metrics::compute(&[0.3, 0.1], &[false, false], 0.5);
        assert_eq!((quiet.precision, quiet.f1), (None, None));
        assert!(Curves::compute(&[0.3], &[false]).roc.is_empty());
    }

    #[test]
    fn no_labelled_rows_give_no_numbers() {
        let m = Metrics::compute(&[], &[], 0.5);
        assert_eq!(m.labelled, 0);
        assert_eq!(
            (m.precision, m.recall, m.f1, m.accuracy, m.roc_auc, m.pr_auc),
            (None, None, None, None, None, None)
        );
    }

    #[test]
    fn curves_step_through_tied_groups_together() {
        let c = Curves::compute(&SCORES, &LABELS);
        assert_eq!(c.roc.first(), Some(&(0.0, 0.0)));
        assert_eq!(c.roc.last(), Some(&(1.0, 1.0)));
        // 0.9, 0.8, the tied 0.7s as one point, 0.4, 0.2, 0.1.
        assert_eq!(c.pr.len(), 6);
        assert_eq!(c.pr[2], (2.0 / 3.0, 0.5));
        let h = Histogram::compute(&SCORES, &LABELS, 10);
        assert_eq!(h.positives.iter().sum::<usize>(), 3);
        assert_eq!(h.negatives[1], 1);
        assert_eq!(h.positives[9], 1);
        assert_eq!(
            Histogram::compute(&[1.0], &[true], 4).positives,
            vec![0, 0, 0, 1]
        );
    }
}
