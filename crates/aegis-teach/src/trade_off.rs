//! Where a taught validator's line could go, and what each place costs: the share of the author's
//! violating examples it catches against the share of their near misses and of benign traffic it
//! flags, on out-of-fold scores. The author's examples are separated perfectly by their own
//! phrasing in sample, so only scores from fits that did not see them say what a line will do
//! to the next message.

use aegis_guard::LabelledMessage;
use serde::Serialize;

/// The share of the author's violating examples the default line keeps failing (out of fold): a
/// line drawn further up, into the gap the author's own phrasing leaves, lets the next violation
/// written differently pass. Measured on the examples the author chose, not on labels given to
/// suggested messages (see [`recall_ceiling`]).
pub const AUTHOR_RECALL_FLOOR: f64 = 0.9;

/// One place the line could go.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LinePoint {
    pub threshold: f64,
    /// Share of the author's violating examples failing at it.
    pub recall: f64,
    /// Share of the author's near misses (taught passing examples) failing at it; none when none
    /// were taught.
    pub near_misses_flagged: Option<f64>,
    /// Share of the benign rows failing at it; none without benign rows.
    pub benign_flagged: Option<f64>,
}

/// The author's side of the rows labelled for `key`, with their out-of-fold scores.
struct AuthorScores {
    violating: Vec<f64>,
    /// The violating examples the author chose (not labels on suggested messages).
    chosen_violating: Vec<f64>,
    near_misses: Vec<f64>,
    benign: Vec<f64>,
}

impl AuthorScores {
    /// `messages` are the rows training read, in order; `out_of_fold` and `benign` are over the
    /// ones labelled for `key`, in that order.
    fn of(key: &str, messages: &[LabelledMessage], out_of_fold: &[f64], benign: &[bool]) -> Self {
        let mut scores = Self {
            violating: Vec::new(),
            chosen_violating: Vec::new(),
            near_misses: Vec::new(),
            benign: Vec::new(),
        };
        let labelled = messages.iter().filter_map(|m| m.label(key).map(|l| (m, l)));
        for (((message, violates), &score), &is_benign) in labelled
            .zip(out_of_fold)
            .zip(benign.iter().chain(std::iter::repeat(&false)))
        {
            if is_benign {
                scores.benign.push(score);
            }
            if message.is_taught() {
                if violates {
                    scores.violating.push(score);
                    if !crate::data::was_suggested(message) {
                        scores.chosen_violating.push(score);
                    }
                } else {
                    scores.near_misses.push(score);
                }
            }
        }
        scores
    }
}

fn share_at_or_above(scores: &[f64], threshold: f64) -> Option<f64> {
    (!scores.is_empty())
        .then(|| scores.iter().filter(|&&s| s >= threshold).count() as f64 / scores.len() as f64)
}

/// A threshold as templates write it (three decimals), at most `score`: a message scoring
/// `score` still fails at it.
fn at_most(score: f64) -> f64 {
    ((score * 1000.0).floor() / 1000.0).clamp(0.001, 0.999)
}

/// The curve for `key`: a point at each threshold where one of the author's examples changes
/// side (the highest that still fails it), lowest first; empty without taught violating
/// examples.
pub fn trade_off(
    key: &str,
    messages: &[LabelledMessage],
    out_of_fold: &[f64],
    benign: &[bool],
) -> Vec<LinePoint> {
    let scores = AuthorScores::of(key, messages, out_of_fold, benign);
    if scores.violating.is_empty() {
        return Vec::new();
    }
    let mut thresholds: Vec<f64> = scores
        .violating
        .iter()
        .chain(&scores.near_misses)
        .map(|&s| at_most(s))
        .collect();
    thresholds.sort_by(f64::total_cmp);
    thresholds.dedup();
    thresholds
        .into_iter()
        .map(|threshold| point_at(&scores, threshold))
        .collect()
}

fn point_at(scores: &AuthorScores, threshold: f64) -> LinePoint {
    LinePoint {
        threshold,
        recall: share_at_or_above(&scores.violating, threshold).unwrap_or(0.0),
        near_misses_flagged: share_at_or_above(&scores.near_misses, threshold),
        benign_flagged: share_at_or_above(&scores.benign, threshold),
    }
}

/// The highest threshold at which at least [`AUTHOR_RECALL_FLOOR`] of the author's violating
/// examples still fail, out of fold; `None` with fewer than `min_examples` of them.
///
/// The examples are the ones the author chose, when there are `min_examples` of them: labels on
/// suggested messages are left out. Suggestions are chosen where the head is unsure or lets a
/// violation pass, so they score low out of fold, and nine in ten of them held the line so low
/// that hard negatives written by someone else failed by the dozen while their violations scored
/// far above it (docs/guide/src/lab/teaching.md, sessions 44 and 49). They still train the head
/// and still count on the curve.
pub fn recall_ceiling(
    key: &str,
    messages: &[LabelledMessage],
    out_of_fold: &[f64],
    min_examples: usize,
) -> Option<f64> {
    let min_examples = min_examples.max(1);
    let scores = AuthorScores::of(key, messages, out_of_fold, &[]);
    let mut violating = if scores.chosen_violating.len() >= min_examples {
        scores.chosen_violating
    } else {
        scores.violating
    };
    if violating.len() < min_examples {
        return None;
    }
    violating.sort_by(f64::total_cmp);
    // 1 - 0.9 is 0.0999...: without the nudge, one in ten would round down to none.
    let may_miss = ((1.0 - AUTHOR_RECALL_FLOOR) * violating.len() as f64 + 1e-9).floor() as usize;
    Some(at_most(violating[may_miss.min(violating.len() - 1)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rows::row;

    #[test]
    fn the_curve_trades_recall_for_near_misses_at_each_example() {
        // Four violating examples (0.2 .. 0.9), two near misses (0.1, 0.5), two benign rows.
        let messages = vec![
            row("v1", true, true),
            row("v2", true, true),
            row("v3", true, true),
            row("v4", true, true),
            row("n1", false, true),
            row("n2", false, true),
            row("b1", false, false),
            row("b2", false, false),
        ];
        let scores = [0.2, 0.6, 0.8, 0.9, 0.1, 0.5, 0.01, 0.3];
        let benign = [false, false, false, false, false, false, true, true];
        let curve = trade_off("promo", &messages, &scores, &benign);
        let thresholds: Vec<f64> = curve.iter().map(|p| p.threshold).collect();
        assert_eq!(thresholds, [0.1, 0.2, 0.5, 0.6, 0.8, 0.9]);
        let at_half = &curve[2];
        assert_eq!(at_half.recall, 0.75);
        assert_eq!(at_half.near_misses_flagged, Some(0.5));
        assert_eq!(at_half.benign_flagged, Some(0.0));
        let lowest = &curve[0];
        assert_eq!(
            (
                lowest.recall,
                lowest.near_misses_flagged,
                lowest.benign_flagged
            ),
            (1.0, Some(1.0), Some(0.5))
        );
        // Recall never rises as the line does.
        assert!(curve.windows(2).all(|w| w[0].recall >= w[1].recall));
    }

    #[test]
    fn the_recall_ceiling_is_drawn_on_the_examples_the_author_chose() {
        // Ten chosen violating examples (0.50 .. 0.95) and five suggested ones scoring low.
        let mut messages: Vec<_> = (0..10).map(|i| row(&format!("v{i}"), true, true)).collect();
        let mut scores: Vec<f64> = (0..10).map(|i| 0.5 + 0.05 * f64::from(i)).collect();
        for i in 0..5 {
            messages.push(crate::test_rows::suggested_row(&format!("s{i}"), true));
            scores.push(0.02);
        }
        // Nine in ten of the chosen still fail at 0.55; counting the suggested, it would be 0.02.
        assert_eq!(recall_ceiling("promo", &messages, &scores, 5), Some(0.55));
        // Fewer than five chosen: all of them count.
        assert_eq!(
            recall_ceiling("promo", &messages[6..], &scores[6..], 5),
            Some(0.02)
        );
    }

    #[test]
    fn the_recall_ceiling_keeps_nine_in_ten_of_the_authors_violations() {
        let mut messages: Vec<LabelledMessage> =
            (0..10).map(|i| row(&format!("v{i}"), true, true)).collect();
        messages.push(row("untaught", true, false));
        let scores = [0.05, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.0];
        // One of ten may pass: the second lowest still fails at the ceiling.
        assert_eq!(recall_ceiling("promo", &messages, &scores, 5), Some(0.3));
        assert_eq!(recall_ceiling("promo", &messages[..4], &scores, 5), None);
    }
}
