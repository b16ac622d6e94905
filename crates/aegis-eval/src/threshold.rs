//! Choosing a validator's threshold so that the choice itself is measured honestly: the
//! threshold picked on some folds is scored on the fold it never saw (nested cross-validation),
//! and kept only when that beats the current threshold on the same rows.

use serde::Serialize;

use crate::metrics::{best_f1_threshold, Confusion};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThresholdChoice {
    pub current: f64,
    /// F1 of the current threshold on the given (already held-out) scores.
    pub current_f1: Option<f64>,
    /// The best-F1 threshold on all the scores: what would be written.
    pub tuned: f64,
    /// F1 of "pick the best-F1 threshold", each fold scored at the threshold its other folds chose.
    pub tuned_f1: Option<f64>,
    /// Whether the tuned threshold measures better by more than [`KEEP_MARGIN`].
    pub keep: bool,
}

/// A tuned threshold must beat the current one by this much F1: less is noise on a few hundred
/// rows, and every change is a new template version to review.
pub const KEEP_MARGIN: f64 = 0.005;

/// `scores` must be held out already (out-of-fold head probabilities, or a prompt's P(Yes), which
/// nothing was fitted to). `None` without both classes.
pub fn choose_threshold(
    scores: &[f64],
    labels: &[bool],
    current: f64,
    folds: usize,
) -> Option<ThresholdChoice> {
    let folds = folds.max(2);
    let tuned = best_f1_threshold(scores, labels)?.threshold;
    if labels.iter().all(|&l| l) {
        return None;
    }
    // Stratified, deterministic: the i-th positive and the i-th negative go to fold i mod k.
    let mut seen = [0usize; 2];
    let fold_of: Vec<usize> = labels
        .iter()
        .map(|&l| {
            let class = usize::from(l);
            seen[class] += 1;
            (seen[class] - 1) % folds
        })
        .collect();
    let mut pooled = Confusion::default();
    for fold in 0..folds {
        let (mut train_scores, mut train_labels) = (Vec::new(), Vec::new());
        for i in (0..scores.len()).filter(|&i| fold_of[i] != fold) {
            train_scores.push(scores[i]);
            train_labels.push(labels[i]);
        }
        let threshold = best_f1_threshold(&train_scores, &train_labels)
            .map(|b| b.threshold)
            .unwrap_or(current);
        let (mut held_scores, mut held_labels) = (Vec::new(), Vec::new());
        for i in (0..scores.len()).filter(|&i| fold_of[i] == fold) {
            held_scores.push(scores[i]);
            held_labels.push(labels[i]);
        }
        let c = Confusion::at(&held_scores, &held_labels, threshold);
        pooled.true_positives += c.true_positives;
        pooled.false_positives += c.false_positives;
        pooled.true_negatives += c.true_negatives;
        pooled.false_negatives += c.false_negatives;
    }
    let current_f1 = Confusion::at(scores, labels, current).f1();
    let tuned_f1 = pooled.f1();
    Some(ThresholdChoice {
        current,
        current_f1,
        tuned,
        tuned_f1,
        keep: matches!((tuned_f1, current_f1), (Some(t), Some(c)) if t > c + KEEP_MARGIN),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_score_scale_gets_a_lower_threshold_that_holds_out_of_fold() {
        // Positives sit around 0.3, negatives around 0.1: 0.5 flags nothing.
        let mut scores = Vec::new();
        let mut labels = Vec::new();
        for i in 0..40 {
            scores.push(0.25 + (i % 10) as f64 * 0.01);
            labels.push(true);
            scores.push(0.05 + (i % 10) as f64 * 0.01);
            labels.push(false);
        }
        let choice = choose_threshold(&scores, &labels, 0.5, 5).expect("both classes");
        assert_eq!(choice.current_f1, Some(0.0));
        assert!(choice.tuned > 0.14 && choice.tuned <= 0.25, "{choice:?}");
        // One fold never saw the lowest positive score, so it misses it: the honest price of tuning.
        assert!(
            choice.tuned_f1.is_some_and(|f| f > 0.9 && f < 1.0),
            "{choice:?}"
        );
        assert!(choice.keep);
    }

    #[test]
    fn a_good_threshold_is_kept_and_one_class_gives_nothing() {
        let scores = [0.9, 0.8, 0.7, 0.2, 0.1, 0.3, 0.95, 0.05, 0.6, 0.4];
        let labels = [
            true, true, true, false, false, false, true, false, true, false,
        ];
        let choice = choose_threshold(&scores, &labels, 0.5, 2).expect("both classes");
        assert_eq!(choice.current_f1, Some(1.0));
        assert!(!choice.keep);
        assert!(choose_threshold(&[0.1, 0.2], &[false, false], 0.5, 2).is_none());
        assert!(choose_threshold(&[0.1, 0.2], &[true, true], 0.5, 2).is_none());
    }
}
