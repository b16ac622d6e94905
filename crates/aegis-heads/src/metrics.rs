//! Ranking and threshold metrics for binary labels.

use std::collections::BTreeMap;

use crate::record::CvMetrics;

/// ROC AUC: the probability that a random positive outscores a random negative, ties counting
/// half (Mann-Whitney). `None` when either class is absent.
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 || scores.len() != labels.len() {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Average ranks (1-based) over runs of tied scores.
    let mut rank_sum_positive = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && scores[order[end]] == scores[order[start]] {
            end += 1;
        }
        let average_rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            if labels[i] {
                rank_sum_positive += average_rank;
            }
        }
        start = end;
    }
    let p = positives as f64;
    Some((rank_sum_positive - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinaryMetrics {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// Precision, recall and F1 of `score >= threshold` as the positive prediction. An empty
/// denominator gives 0 rather than NaN, so reports stay printable.
pub fn binary_metrics(scores: &[f64], labels: &[bool], threshold: f64) -> BinaryMetrics {
    let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
    for (&s, &l) in scores.iter().zip(labels) {
        match (s >= threshold, l) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let precision = ratio(tp, tp + fp);
    let recall = ratio(tp, tp + fn_);
    let f1 = if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    BinaryMetrics {
        precision,
        recall,
        f1,
    }
}

/// [`cv_metrics`] for each language's rows separately.
pub fn metrics_by_language(
    scores: &[f64],
    labels: &[bool],
    languages: &[&str],
) -> BTreeMap<String, CvMetrics> {
    let mut codes: Vec<&str> = languages.to_vec();
    codes.sort_unstable();
    codes.dedup();
    codes
        .into_iter()
        .map(|code| {
            let (s, l): (Vec<f64>, Vec<bool>) = scores
                .iter()
                .zip(labels)
                .zip(languages)
                .filter(|(_, lang)| **lang == code)
                .map(|((s, l), _)| (*s, *l))
                .unzip();
            (code.to_string(), cv_metrics(&s, &l))
        })
        .collect()
}

/// Metrics of probabilities against labels, at 0.5.
pub fn cv_metrics(probabilities: &[f64], labels: &[bool]) -> CvMetrics {
    let m = binary_metrics(probabilities, labels, 0.5);
    CvMetrics {
        rows: labels.len(),
        positives: labels.iter().filter(|&&l| l).count(),
        roc_auc: roc_auc(probabilities, labels),
        precision: m.precision,
        recall: m.recall,
        f1: m.f1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_of_perfect_reversed_and_tied_rankings() {
        let labels = [false, false, true, true];
        assert_eq!(roc_auc(&[0.1, 0.2, 0.3, 0.4], &labels), Some(1.0));
        assert_eq!(roc_auc(&[0.4, 0.3, 0.2, 0.1], &labels), Some(0.0));
        assert_eq!(roc_auc(&[0.5; 4], &labels), Some(0.5));
        // One positive ties one negative: 3 of 4 pairs won, 1 tied.
        assert_eq!(roc_auc(&[0.1, 0.3, 0.3, 0.4], &labels), Some(0.875));
        assert_eq!(roc_auc(&[0.1, 0.2], &[true, true]), None);
    }

    #[test]
    fn threshold_metrics() {
        let m = binary_metrics(&[0.9, 0.8, 0.2, 0.6], &[true, false, true, false], 0.5);
        assert_eq!(m.precision, 1.0 / 3.0);
        assert_eq!(m.recall, 0.5);
        assert!((m.f1 - 0.4).abs() < 1e-12);
        let none = binary_metrics(&[0.1], &[false], 0.5);
        assert_eq!((none.precision, none.recall, none.f1), (0.0, 0.0, 0.0));
    }
}
