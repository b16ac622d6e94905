//! Active learning: the messages an author should label next for a validator. A head trained
//! on violating examples and unrelated negatives is sure of the wrong things; what teaches it the
//! policy is a label on the messages it is least sure of (scores near its threshold) and on the
//! highest-scoring messages no one has labelled (where a topic-only head's false positives
//! live), as Prodigy's `textcat.teach` and Argilla's loops choose them.

use std::collections::HashSet;

use aegis_guard::{FeatureCache, Guard};
use serde::Serialize;

use crate::error::{Result, TeachError};
use crate::fit::{read_features, score, validator_slot, Progress};

/// A message to label next, with the score that chose it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Suggestion {
    pub text: String,
    /// Where it came from: a file name, "history", ...
    pub from: String,
    /// The current head's P(violation).
    pub score: f64,
    pub reason: SuggestionReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum SuggestionReason {
    /// Its score is among the nearest the threshold: the head cannot tell.
    Unsure,
    /// Among the highest scores no label has confirmed: a false positive would be here.
    HighestUnlabelled,
}

/// What to suggest from.
pub struct SuggestRequest<'a> {
    pub key: &'a str,
    /// Candidate messages and where each came from; duplicates and labelled ones are dropped.
    pub pool: Vec<(String, String)>,
    /// Texts already labelled for the validator (taught examples, the training files).
    pub labelled: HashSet<String>,
    pub cache: Option<&'a FeatureCache>,
    /// How many to suggest.
    pub wanted: usize,
}

/// The `wanted` messages of the pool to label next, scored by the validator's current head: half
/// the least sure (nearest its template's threshold, or 0.5 when that threshold is degenerate),
/// half the highest-scoring, alternating.
pub fn suggest(
    guard: &Guard,
    request: SuggestRequest,
    progress: &Progress,
) -> Result<Vec<Suggestion>> {
    let key = request.key;
    let slot = validator_slot(guard, key)?;
    let Some(head) = &guard.heads()[slot] else {
        return Err(TeachError::Invalid(format!(
            "{key} has no head yet: train and apply one, then ask which messages to label next"
        )));
    };
    // A threshold below the floor is the sign of a head that learned only the topic (see
    // `topic_warning`): it says nothing about the policy, so doubt is measured where the head
    // itself is undecided.
    let threshold = f64::from(guard.validators()[slot].threshold);
    let boundary = if threshold < crate::THRESHOLD_FLOOR {
        0.5
    } else {
        threshold
    };
    let mut seen = HashSet::new();
    let pool: Vec<(String, String)> = request
        .pool
        .into_iter()
        .map(|(text, from)| (text.trim().to_string(), from))
        .filter(|(text, _)| {
            !text.is_empty() && !request.labelled.contains(text) && seen.insert(text.clone())
        })
        .collect();
    let layers = head.features.layers.clone();
    let depth = layers.iter().copied().max().unwrap_or(1);
    let texts: Vec<&str> = pool.iter().map(|(t, _)| t.as_str()).collect();
    let (features, _) = read_features(
        guard,
        &texts,
        request.cache,
        depth,
        "scoring candidates",
        progress,
    )?;
    let scored: Vec<(String, String, f64)> = pool
        .into_iter()
        .zip(features)
        .filter_map(|((text, from), f)| Some((text, from, score(head, &f?, &layers)?)))
        .collect();
    Ok(choose(scored, boundary, request.wanted))
}

/// Alternates the least sure (nearest `threshold`) and the highest-scoring, never one twice.
fn choose(scored: Vec<(String, String, f64)>, threshold: f64, wanted: usize) -> Vec<Suggestion> {
    let mut by_doubt: Vec<usize> = (0..scored.len()).collect();
    by_doubt.sort_by(|&a, &b| {
        (scored[a].2 - threshold)
            .abs()
            .total_cmp(&(scored[b].2 - threshold).abs())
    });
    let mut by_score: Vec<usize> = (0..scored.len()).collect();
    by_score.sort_by(|&a, &b| scored[b].2.total_cmp(&scored[a].2));
    let mut taken = vec![false; scored.len()];
    let mut chosen = Vec::with_capacity(wanted.min(scored.len()));
    let (mut doubt, mut high) = (by_doubt.into_iter(), by_score.into_iter());
    while chosen.len() < wanted.min(scored.len()) {
        let unsure_turn = chosen.len() % 2 == 0;
        let (next, reason) = if unsure_turn {
            (doubt.find(|&i| !taken[i]), SuggestionReason::Unsure)
        } else {
            (
                high.find(|&i| !taken[i]),
                SuggestionReason::HighestUnlabelled,
            )
        };
        // One list ran dry of untaken messages: the other has the rest.
        let (next, reason) = match next {
            Some(i) => (i, reason),
            None => match doubt
                .find(|&i| !taken[i])
                .or_else(|| high.find(|&i| !taken[i]))
            {
                Some(i) => (i, reason),
                None => break,
            },
        };
        taken[next] = true;
        let (text, from, score) = &scored[next];
        chosen.push(Suggestion {
            text: text.clone(),
            from: from.clone(),
            score: *score,
            reason,
        });
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(scores: &[f64]) -> Vec<(String, String, f64)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (format!("m{i}"), "file".to_string(), s))
            .collect()
    }

    #[test]
    fn alternates_the_least_sure_and_the_highest_scoring() {
        let chosen = choose(scored(&[0.01, 0.48, 0.99, 0.6, 0.3, 0.95]), 0.5, 4);
        let picked: Vec<(&str, SuggestionReason)> =
            chosen.iter().map(|s| (s.text.as_str(), s.reason)).collect();
        assert_eq!(
            picked,
            [
                ("m1", SuggestionReason::Unsure),
                ("m2", SuggestionReason::HighestUnlabelled),
                ("m3", SuggestionReason::Unsure),
                ("m5", SuggestionReason::HighestUnlabelled),
            ]
        );
    }

    #[test]
    fn never_suggests_one_message_twice_or_more_than_there_are() {
        let chosen = choose(scored(&[0.5, 0.9, 0.1]), 0.5, 10);
        let mut texts: Vec<&str> = chosen.iter().map(|s| s.text.as_str()).collect();
        texts.sort_unstable();
        assert_eq!(texts, ["m0", "m1", "m2"]);
        assert!(choose(Vec::new(), 0.5, 3).is_empty());
    }
}
