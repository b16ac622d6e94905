//! Active learning: the messages an author should label next for a validator. A head trained
//! on violating examples and unrelated negatives is sure of the wrong things; what teaches it the
//! policy is a label on the messages it is least sure of (scores near its threshold) and on the
//! highest-scoring messages no one has labelled (where a topic-only head's false positives
//! live), as Prodigy's `textcat.teach` and Argilla's loops choose them.

use std::collections::HashSet;
use std::path::Path;

use aegis_guard::{FeatureCache, Guard};
use aegis_heads::Head;
use aegis_store::{HistoryFilter, Store};
use serde::Serialize;

use crate::error::{Result, TeachError};
use crate::fit::{depth_to_read, read_features, score, validator_slot, Progress};

/// Messages of history a pool draws from when it draws from history: the latest.
pub const HISTORY_POOL: u32 = 10_000;

/// A message to label next, with the score that chose it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Suggestion {
    pub text: String,
    /// Where it came from: a file name, "history", ...
    pub from: String,
    /// The scoring head's P(violation).
    pub score: f64,
    /// Whether the head fails it at its threshold now.
    pub fails: bool,
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
    /// The head that scores them: one trained and not yet applied, whose doubts are the ones
    /// the next labels should settle; `None` is the validator's live head.
    pub head: Option<&'a Head>,
}

/// The messages `key` could be taught next and the texts already labelled for it. The pool is
/// `pool` (each text with where it came from), with the latest [`HISTORY_POOL`] messages of
/// history added when `with_history`; labelled are its taught examples and the rows of the
/// training files beside the heads that carry its label. Nothing is drawn from `-holdout` files,
/// which measure what the author teaches.
pub async fn suggestion_pool(
    store: &Store,
    prompts: &Path,
    key: &str,
    mut pool: Vec<(String, String)>,
    with_history: bool,
) -> Result<(Vec<(String, String)>, HashSet<String>)> {
    if with_history {
        let recent = store
            .list(&HistoryFilter::default(), None, HISTORY_POOL)
            .await?;
        pool.extend(recent.rows.into_iter().map(|r| (r.text, "history".into())));
    }
    let mut labelled: HashSet<String> = store
        .examples(Some(key))
        .await?
        .into_iter()
        .map(|e| e.text.trim().to_string())
        .collect();
    let files = crate::training_files(prompts);
    labelled.extend(
        crate::read_messages(&files.training, &[])?
            .into_iter()
            .filter(|m| m.label(key).is_some())
            .map(|m| m.text.trim().to_string()),
    );
    Ok((pool, labelled))
}

/// The `wanted` messages of the pool to label next, scored by the request's head (the live one
/// by default): half the least sure (nearest its threshold, or 0.5 when that threshold is
/// degenerate), half the highest-scoring, alternating.
pub fn suggest(
    guard: &Guard,
    request: SuggestRequest,
    progress: &Progress,
) -> Result<Vec<Suggestion>> {
    let key = request.key;
    let slot = validator_slot(guard, key)?;
    let template_threshold = f64::from(guard.validators()[slot].threshold);
    let (head, threshold) = match (request.head, &guard.heads()[slot]) {
        // A trained head carries the threshold it was tuned to, which Apply writes.
        (Some(trained), _) => (
            trained,
            trained.training.threshold.unwrap_or(template_threshold),
        ),
        (None, Some(live)) => (live, template_threshold),
        (None, None) => {
            return Err(TeachError::Invalid(format!(
                "{key} has no head yet: train one, then ask which messages to label next"
            )))
        }
    };
    // A threshold below the floor is the sign of a head that learned only the topic (see
    // `topic_warning`): it says nothing about the policy, so doubt is measured where the head
    // itself is undecided.
    let boundary = if threshold < crate::near_miss::THRESHOLD_FLOOR {
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
    let depth = depth_to_read(head);
    let texts: Vec<&str> = pool.iter().map(|(t, _)| t.as_str()).collect();
    let (features, _) = read_features(
        guard,
        &texts,
        request.cache,
        depth,
        false,
        "scoring candidates",
        progress,
    )?;
    let scored: Vec<(String, String, f64)> = pool
        .into_iter()
        .zip(features)
        .filter_map(|((text, from), f)| Some((text, from, score(head, &f?, &layers)?)))
        .collect();
    Ok(choose(scored, boundary, threshold, request.wanted))
}

/// Alternates the least sure (nearest `boundary`) and the highest-scoring, never one twice; each
/// says whether it fails at `threshold`, the line the head decides at.
fn choose(
    scored: Vec<(String, String, f64)>,
    boundary: f64,
    threshold: f64,
    wanted: usize,
) -> Vec<Suggestion> {
    let mut by_doubt: Vec<usize> = (0..scored.len()).collect();
    by_doubt.sort_by(|&a, &b| {
        (scored[a].2 - boundary)
            .abs()
            .total_cmp(&(scored[b].2 - boundary).abs())
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
            fails: *score >= threshold,
            reason,
        });
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Suggestions for toxic score the live head, whose contempt reading reads layer 16: the
    /// pass must run that deep, or every candidate's score is missing and none is suggested.
    #[test]
    fn the_live_toxic_heads_candidates_are_read_through_its_readings_layer() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../prompt_guard/heads/toxic.json");
        let shipped = Head::load(&path).expect("the shipped toxic head");
        assert!(shipped.features.layers.is_empty(), "it reads the embedding");
        assert_eq!(depth_to_read(&shipped), 16);
        let mut plain = shipped.clone();
        plain.readings.clear();
        assert_eq!(depth_to_read(&plain), 1);
    }

    fn scored(scores: &[f64]) -> Vec<(String, String, f64)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (format!("m{i}"), "file".to_string(), s))
            .collect()
    }

    #[test]
    fn alternates_the_least_sure_and_the_highest_scoring() {
        let chosen = choose(scored(&[0.01, 0.48, 0.99, 0.6, 0.3, 0.95]), 0.5, 0.5, 4);
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
    fn says_which_fail_at_the_threshold_not_the_boundary_of_doubt() {
        // A topic-only head's threshold (0.02) is below the floor: doubt is read at 0.5, but
        // what fails is what the head would fail.
        let chosen = choose(scored(&[0.5, 0.01, 0.03]), 0.5, 0.02, 3);
        let fails: Vec<(&str, bool)> = chosen.iter().map(|s| (s.text.as_str(), s.fails)).collect();
        assert_eq!(fails, [("m0", true), ("m2", true), ("m1", false)]);
    }

    #[test]
    fn never_suggests_one_message_twice_or_more_than_there_are() {
        let chosen = choose(scored(&[0.5, 0.9, 0.1]), 0.5, 0.5, 10);
        let mut texts: Vec<&str> = chosen.iter().map(|s| s.text.as_str()).collect();
        texts.sort_unstable();
        assert_eq!(texts, ["m0", "m1", "m2"]);
        assert!(choose(Vec::new(), 0.5, 0.5, 3).is_empty());
    }
}
