//! Choosing a validator's threshold against a false-positive budget on benign traffic (most of
//! what a guard sees is ordinary), so that the choice itself is measured honestly: the threshold
//! picked on some folds is scored on the fold it never saw (nested cross-validation).

use serde::Serialize;

use crate::metrics::Confusion;

/// A threshold held to a false-positive budget on benign traffic: the lowest threshold (so the
/// highest recall) at which at most `budget` of the benign rows are flagged, with what that rule
/// scores when each fold is cut at the threshold its other folds chose.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BudgetChoice {
    pub budget: f64,
    /// Chosen on all the scores: what would be written.
    pub threshold: f64,
    /// Nested cross-validation, pooled over folds.
    pub recall: Option<f64>,
    pub precision: Option<f64>,
    pub f1: Option<f64>,
    /// Share of benign rows flagged, nested.
    pub benign_false_positive_rate: Option<f64>,
    pub benign_rows: usize,
}

/// Benign rows go round `folds` folds in order, and so do the other rows of each class.
#[cfg(test)]
fn round_robin_folds(labels: &[bool], benign: &[bool], folds: usize) -> Vec<usize> {
    let folds = folds.max(2);
    let mut seen = [0usize; 3];
    labels
        .iter()
        .zip(benign)
        .map(|(&label, &benign)| {
            let class = if benign { 2 } else { usize::from(label) };
            seen[class] += 1;
            (seen[class] - 1) % folds
        })
        .collect()
}

/// The lowest threshold flagging at most `budget` of `benign_scores` (a score at or above the
/// threshold flags), rounded up to `decimals` as templates store it. `None` without benign rows.
pub fn threshold_for_budget(benign_scores: &[f64], budget: f64, decimals: i32) -> Option<f64> {
    if benign_scores.is_empty() {
        return None;
    }
    let mut sorted = benign_scores.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let allowed = (budget.max(0.0) * sorted.len() as f64).floor() as usize;
    // The highest benign score that must pass; the threshold goes just above it.
    let must_pass = sorted.get(allowed).copied().unwrap_or(0.0);
    let step = 10f64.powi(-decimals);
    let rounded = ((must_pass / step).floor() + 1.0) * step;
    Some(rounded.clamp(step, 1.0 - step))
}

/// `scores` must be held out already (out-of-fold head probabilities). `benign[i]` marks rows of
/// benign traffic (their label is false). `fold_of[i]` is the fold row `i` belongs to: the
/// threshold picked on the other folds' benign rows is scored on it. Pass the folds the scores
/// were made with (held-out sources, so a fold's benign rows come from sources the threshold
/// never saw). `None` without benign rows.
pub fn choose_threshold_for_budget(
    scores: &[f64],
    labels: &[bool],
    benign: &[bool],
    budget: f64,
    fold_of: &[usize],
    decimals: i32,
) -> Option<BudgetChoice> {
    let folds = fold_of.iter().max().map_or(1, |f| f + 1);
    let benign_of = |rows: &mut dyn Iterator<Item = usize>| -> Vec<f64> {
        rows.filter(|&i| benign[i]).map(|i| scores[i]).collect()
    };
    let threshold = threshold_for_budget(&benign_of(&mut (0..scores.len())), budget, decimals)?;
    let mut pooled = Confusion::default();
    let (mut benign_flagged, mut benign_rows) = (0usize, 0usize);
    for fold in 0..folds {
        let chosen = threshold_for_budget(
            &benign_of(&mut (0..scores.len()).filter(|&i| fold_of[i] != fold)),
            budget,
            decimals,
        )
        .unwrap_or(threshold);
        let held: Vec<usize> = (0..scores.len()).filter(|&i| fold_of[i] == fold).collect();
        let held_scores: Vec<f64> = held.iter().map(|&i| scores[i]).collect();
        let held_labels: Vec<bool> = held.iter().map(|&i| labels[i]).collect();
        let c = Confusion::at(&held_scores, &held_labels, chosen);
        pooled.true_positives += c.true_positives;
        pooled.false_positives += c.false_positives;
        pooled.true_negatives += c.true_negatives;
        pooled.false_negatives += c.false_negatives;
        for &i in held.iter().filter(|&&i| benign[i]) {
            benign_rows += 1;
            benign_flagged += usize::from(scores[i] >= chosen);
        }
    }
    Some(BudgetChoice {
        budget,
        threshold,
        recall: pooled.recall(),
        precision: pooled.precision(),
        f1: pooled.f1(),
        benign_false_positive_rate: (benign_rows > 0)
            .then(|| benign_flagged as f64 / benign_rows as f64),
        benign_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_threshold_flags_at_most_its_share_of_benign_rows() {
        // 100 benign scores 0.00 .. 0.99: a 2% budget lets the two highest (0.98, 0.99) through.
        let benign: Vec<f64> = (0..100).map(|i| f64::from(i) / 100.0).collect();
        let t = threshold_for_budget(&benign, 0.02, 3).expect("benign rows");
        assert!((t - 0.971).abs() < 1e-9, "{t}");
        assert_eq!(benign.iter().filter(|&&s| s >= t).count(), 2);
        // No budget: just above the highest benign score.
        assert!((threshold_for_budget(&benign, 0.0, 3).expect("rows") - 0.991).abs() < 1e-9);
        assert_eq!(threshold_for_budget(&[], 0.02, 3), None);
    }

    #[test]
    fn the_budget_choice_is_measured_out_of_fold() {
        // 200 benign rows spread over [0, 0.5), 50 positives over [0.4, 0.9), 50 other negatives.
        let mut scores = Vec::new();
        let (mut labels, mut benign) = (Vec::new(), Vec::new());
        for i in 0..200 {
            scores.push(f64::from(i) / 400.0);
            labels.push(false);
            benign.push(true);
        }
        for i in 0..50 {
            scores.push(0.4 + f64::from(i) / 100.0);
            labels.push(true);
            benign.push(false);
            scores.push(f64::from(i) / 200.0);
            labels.push(false);
            benign.push(false);
        }
        let folds = round_robin_folds(&labels, &benign, 5);
        let choice = choose_threshold_for_budget(&scores, &labels, &benign, 0.02, &folds, 3)
            .expect("benign");
        assert_eq!(choice.benign_rows, 200);
        let fpr = choice.benign_false_positive_rate.expect("benign rows");
        assert!(fpr <= 0.03, "{choice:?}");
        // Positives from 0.4: those above the benign tail (about 0.49) are caught.
        let recall = choice.recall.expect("positives");
        assert!(recall > 0.75 && recall < 0.9, "{choice:?}");
        assert!(choose_threshold_for_budget(&[0.5], &[true], &[false], 0.02, &[0], 3).is_none());
    }
}
