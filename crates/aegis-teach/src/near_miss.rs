//! Whether a head learned its policy or only its topic. A validator taught from messages that
//! violate it, against data that never mentions the topic, separates the two perfectly in cross
//! validation (ROC AUC near 1) and then flags every message on the topic: news, questions, a
//! friend asking for help. The sign is in the out-of-fold scores: no passing example comes near
//! the violating ones, and the benign budget's threshold falls to almost nothing.

/// A threshold below this, chosen for the benign budget, means no passing message scored near
/// the violating ones: any message on the topic will fail.
pub const THRESHOLD_FLOOR: f64 = 0.05;

/// A passing example is near the violating ones when it scores at least this share of their
/// median score.
pub const NEAR_SHARE: f64 = 0.5;

/// Why the head may have learned the topic rather than the policy, or `None` when passing
/// examples come near the violating ones. `scores` are out-of-fold P(violation), `labels`
/// whether each row violates, `threshold` the one the benign budget chose.
pub fn topic_warning(scores: &[f64], labels: &[bool], threshold: Option<f64>) -> Option<String> {
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
    let none_near = nearest_passing < NEAR_SHARE * median;
    let threshold_low = threshold.is_some_and(|t| t < THRESHOLD_FLOOR);
    if !none_near && !threshold_low {
        return None;
    }
    let why = match (none_near, threshold) {
        (true, _) => format!(
            "no passing example scores near the violating ones (the nearest scores {nearest_passing:.3}; the violating ones' median is {median:.3})"
        ),
        (false, Some(t)) => format!(
            "the benign budget's threshold is only {t:.3} (below {THRESHOLD_FLOOR})"
        ),
        (false, None) => unreachable_reason(),
    };
    Some(format!(
        "The head may have learned the topic, not the policy: {why}, so messages on the same \
         topic that do not break the policy (news, questions, someone asking for help, a word in \
         another sense) are likely to fail. Teach it such near misses as should pass, then train \
         again."
    ))
}

/// `threshold_low` is only true with a threshold, so this branch is never taken; a message
/// rather than a panic keeps the report whole if that ever changes.
fn unreachable_reason() -> String {
    "the benign budget's threshold is low".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positives_against_unrelated_negatives_warn() {
        // Violating rows score high, passing rows never come near: the topic was learned.
        let scores = [0.9, 0.8, 0.95, 0.02, 0.01, 0.05];
        let labels = [true, true, true, false, false, false];
        let warning = topic_warning(&scores, &labels, Some(0.03)).expect("a warning");
        assert!(warning.contains("nearest scores 0.050"), "{warning}");
    }

    #[test]
    fn near_misses_that_score_close_silence_it() {
        let scores = [0.9, 0.8, 0.95, 0.6, 0.01, 0.05];
        let labels = [true, true, true, false, false, false];
        assert_eq!(topic_warning(&scores, &labels, Some(0.7)), None);
        // Close passing rows, but the budget still drove the threshold to almost nothing.
        let low = topic_warning(&scores, &labels, Some(0.01)).expect("a warning");
        assert!(low.contains("threshold is only 0.010"), "{low}");
        assert_eq!(
            topic_warning(&[0.1], &[false], None),
            None,
            "no positives: nothing to say"
        );
    }
}
