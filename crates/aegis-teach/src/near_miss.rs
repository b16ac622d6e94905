//! Whether a head learned its policy or only its topic. A validator taught from messages that
//! violate it, against data that never mentions the topic, separates the two perfectly in cross
//! validation (ROC AUC near 1) and then flags every message on the topic: news, questions, a
//! friend asking for help. The sign is in the out-of-fold scores: no passing example comes near
//! the violating ones, and the benign budget's threshold falls to almost nothing.

use aegis_guard::LabelledMessage;

/// A threshold below this, chosen for the benign budget, means no passing message scored near
/// the violating ones: any message on the topic will fail.
pub const THRESHOLD_FLOOR: f64 = 0.05;

/// A passing example is near the violating ones when it scores at least this share of their
/// median score.
pub const NEAR_SHARE: f64 = 0.5;

/// Share of the author's own passing examples (taught near misses) a threshold may flag. The
/// benign budget is measured on traffic that never mentions a new validator's topic, so it
/// allows a threshold near zero; the author's near misses are the only rows that say where the
/// policy's line is, and the threshold rises until at most this share of them fails.
pub const NEAR_MISS_BUDGET: f64 = 0.1;

/// Fewer taught near misses than this say too little to move the threshold; fewer taught
/// violating examples say too little to draw a line on their side.
pub const MIN_NEAR_MISSES: usize = 5;

/// The line the author's own examples draw (three decimals, as templates write them), by their
/// out-of-fold scores; `None` with fewer than [`MIN_NEAR_MISSES`] taught near misses.
/// `messages` are the rows training read, in order; `out_of_fold` scores the ones labelled for
/// `key`, in that order.
///
/// With enough taught violating examples, the line is the highest at which
/// [`crate::AUTHOR_RECALL_FLOOR`] of them still fail out of fold (of those the author chose,
/// not labels on suggested messages: [`crate::trade_off::recall_ceiling`]), as issue 66 asked
/// of the default. The middle of the
/// gap between the two sides, which it replaced, sat where the author's own phrasing left room:
/// each round of labels pushed the near misses further down, the line fell with them, and near
/// misses written by someone else scored above it (the guide's lab note `lab/teaching.md`).
/// Without enough violating examples, the line goes just above the near misses, letting at most
/// [`NEAR_MISS_BUDGET`] of them fail.
pub fn near_miss_threshold(
    key: &str,
    messages: &[LabelledMessage],
    out_of_fold: &[f64],
) -> Option<f64> {
    let mut near_misses: Vec<f64> = messages
        .iter()
        .filter(|m| m.label(key).is_some())
        .zip(out_of_fold)
        .filter(|(m, _)| m.is_taught() && m.label(key) == Some(false))
        .map(|(_, &score)| score)
        .collect();
    if near_misses.len() < MIN_NEAR_MISSES {
        return None;
    }
    near_misses.sort_by(|a, b| b.total_cmp(a));
    let may_fail = (NEAR_MISS_BUDGET * near_misses.len() as f64).floor() as usize;
    // Just above the highest score that must pass.
    let above_near_misses =
        (((near_misses[may_fail] * 1000.0).floor() + 1.0) / 1000.0).clamp(0.001, 0.999);
    Some(
        crate::trade_off::recall_ceiling(key, messages, out_of_fold, MIN_NEAR_MISSES)
            .unwrap_or(above_near_misses),
    )
}

/// The threshold a taught validator decides at: the higher of the benign budget's and the near
/// misses' (either may be missing).
pub fn higher_threshold(budget: Option<f64>, near_miss: Option<f64>) -> Option<f64> {
    match (budget, near_miss) {
        (Some(b), Some(n)) => Some(b.max(n)),
        (b, n) => b.or(n),
    }
}

/// The passing examples an author taught `key` among `messages`: its near misses.
pub fn taught_near_misses(key: &str, messages: &[LabelledMessage]) -> usize {
    messages
        .iter()
        .filter(|m| m.label(key) == Some(false) && m.is_taught())
        .count()
}

/// Why the head may have learned the topic rather than the policy, or `None` when passing
/// examples come near the violating ones. `scores` are out-of-fold P(violation), `labels`
/// whether each row violates, `threshold` the one it decides at, `near_misses` how many passing
/// examples the author taught. Once the author has taught [`MIN_NEAR_MISSES`] of them, neither
/// sign means the topic alone was learned: passing examples scoring far below the violating ones
/// is the head having learned them (their weight is an author's label's, see
/// `aegis_heads::row_weights`), and the threshold is the line they draw with the violating ones
/// ([`near_miss_threshold`]), low or not; the figures on the author's examples say how well.
pub fn topic_warning(
    scores: &[f64],
    labels: &[bool],
    threshold: Option<f64>,
    near_misses: usize,
) -> Option<String> {
    let mut violating: Vec<f64> = scores
        .iter()
        .zip(labels)
        .filter(|(_, &violates)| violates)
        .map(|(&s, _)| s)
        .collect();
    if violating.is_empty() {
        return None;
    }
    violating.sort_by(f64::total_cmp);
    let median = violating[violating.len() / 2];
    let nearest_passing = scores
        .iter()
        .zip(labels)
        .filter(|(_, &violates)| !violates)
        .map(|(&s, _)| s)
        .fold(0.0_f64, f64::max);
    tracing::debug!(
        nearest_passing,
        violating_median = median,
        threshold,
        near_misses,
        "topic warning's inputs"
    );
    if near_misses >= MIN_NEAR_MISSES {
        return None;
    }
    let none_near = nearest_passing < NEAR_SHARE * median;
    let low_threshold = threshold.filter(|&t| t < THRESHOLD_FLOOR);
    let why = match (none_near, low_threshold) {
        (true, _) => format!(
            "no passing example scores near the violating ones (the nearest scores {nearest_passing:.3}; the violating ones' median is {median:.3})"
        ),
        (false, Some(t)) => format!(
            "its threshold is only {t:.3} (below {THRESHOLD_FLOOR}), so nothing passing scores near the line"
        ),
        (false, None) => return None,
    };
    Some(format!(
        "The head may have learned the topic, not the policy: {why}, so messages on the same \
         topic that do not break the policy (news, questions, someone asking for help, a word in \
         another sense) are likely to fail. Teach it such near misses as should pass, then train \
         again."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rows::row;

    #[test]
    fn the_threshold_rises_until_few_taught_near_misses_fail() {
        // Ten taught near misses scoring 0.1 to 1.0; the shipped rows do not count.
        let mut messages: Vec<LabelledMessage> = (1..=10)
            .map(|i| row(&format!("n{i}"), false, true))
            .collect();
        let mut scores: Vec<f64> = (1..=10).map(|i| f64::from(i) / 10.0).collect();
        messages.push(row("shipped", false, false));
        scores.push(0.99);
        messages.push(row("unlabelled", true, false));
        messages[11].labels.clear();
        // One of ten may fail: the line goes just above the second highest, 0.9.
        assert_eq!(
            near_miss_threshold("promo", &messages, &scores),
            Some(0.901)
        );
        assert_eq!(
            near_miss_threshold("promo", &messages[..4], &scores),
            None,
            "too few"
        );
    }

    #[test]
    fn with_the_authors_violating_examples_the_line_keeps_nine_in_ten_of_them() {
        // Near misses at most 0.01, violating examples from 0.5 (one of ten sits lower): the
        // line goes to 0.5, the highest that still fails nine of them, not to the gap's middle.
        let mut messages: Vec<LabelledMessage> =
            (0..5).map(|i| row(&format!("n{i}"), false, true)).collect();
        let mut scores = vec![0.001, 0.002, 0.005, 0.008, 0.01];
        messages.extend((0..10).map(|i| row(&format!("v{i}"), true, true)));
        scores.extend([0.05, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9, 0.95, 0.99, 0.99]);
        assert_eq!(near_miss_threshold("promo", &messages, &scores), Some(0.5));
        // Violating examples among the near misses: recall holds and the near misses fail.
        scores[5..].fill(0.005);
        assert_eq!(
            near_miss_threshold("promo", &messages, &scores),
            Some(0.005)
        );
    }

    #[test]
    fn positives_against_unrelated_negatives_warn() {
        // Violating rows score high, passing rows never come near: the topic was learned.
        let scores = [0.9, 0.8, 0.95, 0.02, 0.01, 0.05];
        let labels = [true, true, true, false, false, false];
        let warning = topic_warning(&scores, &labels, Some(0.03), 0).expect("a warning");
        assert!(warning.contains("nearest scores 0.050"), "{warning}");
        // Taught near misses the head now scores low are learned, not missing, and the line they
        // draw is the author's, however low.
        assert_eq!(
            topic_warning(&scores, &labels, Some(0.03), MIN_NEAR_MISSES),
            None
        );
    }

    #[test]
    fn near_misses_that_score_close_silence_it() {
        let scores = [0.9, 0.8, 0.95, 0.6, 0.01, 0.05];
        let labels = [true, true, true, false, false, false];
        assert_eq!(topic_warning(&scores, &labels, Some(0.7), 0), None);
        // Close passing rows, but the budget still drove the threshold to almost nothing.
        let low = topic_warning(&scores, &labels, Some(0.01), 0).expect("a warning");
        assert!(low.contains("its threshold is only 0.010"), "{low}");
        assert_eq!(
            topic_warning(&[0.1], &[false], None, 0),
            None,
            "no positives: nothing to say"
        );
    }
}
