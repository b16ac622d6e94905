//! Active learning: the messages an author should label next for a validator. A head trained
//! on violating examples and unrelated negatives is sure of the wrong things; what teaches it the
//! policy is a label on the messages it is least sure of (scores near its threshold) and on the
//! highest-scoring messages no one has labelled (where a topic-only head's false positives
//! live), as Prodigy's `textcat.teach` and Argilla's loops choose them. A head taught from one
//! author's phrasing also misses violations phrased otherwise, which score low and sit nowhere
//! near its threshold: the messages closest to the author's violating examples in the head's
//! own feature space that it lets pass are where those are, and labelling them widens recall.

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
    /// Passes, but reads most like the author's violating examples: a violation phrased
    /// differently would be here.
    NearYourExamples,
}

/// The messages a validator could be taught next, and what the author has taught it.
#[derive(Debug, Clone, Default)]
pub struct SuggestionPool {
    /// Candidate messages and where each came from; duplicates and labelled ones are dropped.
    pub candidates: Vec<(String, String)>,
    /// Texts already labelled for the validator (taught examples, the training files).
    pub labelled: HashSet<String>,
    /// The author's taught violating examples: candidates that read like them but pass are
    /// suggested too.
    pub violating: Vec<String>,
}

impl SuggestionPool {
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }
}

/// What to suggest from.
pub struct SuggestRequest<'a> {
    pub key: &'a str,
    pub pool: SuggestionPool,
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
) -> Result<SuggestionPool> {
    if with_history {
        let recent = store
            .list(&HistoryFilter::default(), None, HISTORY_POOL)
            .await?;
        pool.extend(recent.rows.into_iter().map(|r| (r.text, "history".into())));
    }
    let taught = store.examples(Some(key)).await?;
    let violating = taught
        .iter()
        .filter(|e| e.violates && !e.pending)
        .map(|e| e.text.trim().to_string())
        .collect();
    let mut labelled: HashSet<String> = taught
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
    Ok(SuggestionPool {
        candidates: pool,
        labelled,
        violating,
    })
}

/// The `wanted` messages of the pool to label next, scored by the request's head (the live one
/// by default), taking turns: the least sure (nearest its threshold, or 0.5 when that threshold
/// is degenerate), the highest-scoring, and (when the author taught violating examples) the
/// passing one that reads most like them.
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
    let pool = request.pool;
    let mut seen = HashSet::new();
    let candidates: Vec<(String, String)> = pool
        .candidates
        .into_iter()
        .map(|(text, from)| (text.trim().to_string(), from))
        .filter(|(text, _)| {
            !text.is_empty() && !pool.labelled.contains(text) && seen.insert(text.clone())
        })
        .collect();
    let layers = head.features.layers.clone();
    let depth = depth_to_read(head);
    let texts: Vec<&str> = candidates
        .iter()
        .map(|(t, _)| t.as_str())
        .chain(pool.violating.iter().map(String::as_str))
        .collect();
    let (mut features, _) = read_features(
        guard,
        &texts,
        request.cache,
        depth,
        false,
        "scoring candidates",
        progress,
    )?;
    let violating: Vec<Vec<f32>> = features
        .split_off(candidates.len())
        .into_iter()
        .flatten()
        .map(|f| unit(f.input(&layers)))
        .collect();
    let scored: Vec<Candidate> = candidates
        .into_iter()
        .zip(features)
        .filter_map(|((text, from), f)| {
            let f = f?;
            let score = score(head, &text, &f, &layers)?;
            let input = unit(f.input(&layers));
            let likeness = violating
                .iter()
                .map(|v| dot(v, &input))
                .max_by(f32::total_cmp)
                .map(f64::from);
            Some(Candidate {
                text,
                from,
                score,
                likeness,
            })
        })
        .collect();
    Ok(choose(scored, boundary, threshold, request.wanted))
}

/// A pool message, scored.
struct Candidate {
    text: String,
    from: String,
    score: f64,
    /// Cosine similarity, in the head's input space, to the nearest of the author's violating
    /// examples; none when the author taught none.
    likeness: Option<f64>,
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Takes turns between the least sure (nearest `boundary`), the highest-scoring and, where
/// likeness is known, the passing ones most like the author's violating examples, never one
/// twice; each says whether it fails at `threshold`, the line the head decides at.
fn choose(scored: Vec<Candidate>, boundary: f64, threshold: f64, wanted: usize) -> Vec<Suggestion> {
    let mut by_doubt: Vec<usize> = (0..scored.len()).collect();
    by_doubt.sort_by(|&a, &b| {
        (scored[a].score - boundary)
            .abs()
            .total_cmp(&(scored[b].score - boundary).abs())
    });
    let mut by_score: Vec<usize> = (0..scored.len()).collect();
    by_score.sort_by(|&a, &b| scored[b].score.total_cmp(&scored[a].score));
    let mut by_likeness: Vec<(usize, f64)> = scored
        .iter()
        .enumerate()
        .filter(|(_, c)| c.score < threshold)
        .filter_map(|(i, c)| Some((i, c.likeness?)))
        .collect();
    by_likeness.sort_by(|a, b| b.1.total_cmp(&a.1));
    let turns: &[SuggestionReason] = if by_likeness.is_empty() {
        &[
            SuggestionReason::Unsure,
            SuggestionReason::HighestUnlabelled,
        ]
    } else {
        &[
            SuggestionReason::Unsure,
            SuggestionReason::HighestUnlabelled,
            SuggestionReason::NearYourExamples,
        ]
    };
    let mut taken = vec![false; scored.len()];
    let mut chosen = Vec::with_capacity(wanted.min(scored.len()));
    let mut doubt = by_doubt.into_iter();
    let mut high = by_score.into_iter();
    let mut alike = by_likeness.into_iter().map(|(i, _)| i);
    while chosen.len() < wanted.min(scored.len()) {
        let reason = turns[chosen.len() % turns.len()];
        let next = match reason {
            SuggestionReason::Unsure => doubt.find(|&i| !taken[i]),
            SuggestionReason::HighestUnlabelled => high.find(|&i| !taken[i]),
            SuggestionReason::NearYourExamples => alike.find(|&i| !taken[i]),
        };
        // One list ran dry of untaken messages: the others have the rest.
        let Some(next) = next
            .or_else(|| doubt.find(|&i| !taken[i]))
            .or_else(|| high.find(|&i| !taken[i]))
        else {
            break;
        };
        taken[next] = true;
        let c = &scored[next];
        chosen.push(Suggestion {
            text: c.text.clone(),
            from: c.from.clone(),
            score: c.score,
            fails: c.score >= threshold,
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

    fn reasons(chosen: &[Suggestion]) -> Vec<(&str, SuggestionReason)> {
        chosen.iter().map(|s| (s.text.as_str(), s.reason)).collect()
    }

    fn scored(scores: &[f64]) -> Vec<Candidate> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &score)| Candidate {
                text: format!("m{i}"),
                from: "file".to_string(),
                score,
                likeness: None,
            })
            .collect()
    }

    #[test]
    fn every_third_is_the_passing_message_most_like_the_authors_violations() {
        let mut candidates = scored(&[0.01, 0.48, 0.99, 0.6, 0.3, 0.95, 0.05]);
        let likeness = [0.2, 0.5, 0.9, 0.8, 0.4, 0.7, 0.85];
        for (c, l) in candidates.iter_mut().zip(likeness) {
            c.likeness = Some(l);
        }
        let chosen = choose(candidates, 0.5, 0.5, 6);
        let picked = reasons(&chosen);
        // m2 and m3 read more like the author's violations, but they fail already: m6 passes.
        assert_eq!(
            picked,
            [
                ("m1", SuggestionReason::Unsure),
                ("m2", SuggestionReason::HighestUnlabelled),
                ("m6", SuggestionReason::NearYourExamples),
                ("m3", SuggestionReason::Unsure),
                ("m5", SuggestionReason::HighestUnlabelled),
                ("m4", SuggestionReason::NearYourExamples),
            ]
        );
        assert!(chosen[2..3].iter().all(|s| !s.fails));
    }

    #[test]
    fn alternates_the_least_sure_and_the_highest_scoring() {
        let chosen = choose(scored(&[0.01, 0.48, 0.99, 0.6, 0.3, 0.95]), 0.5, 0.5, 4);
        let picked = reasons(&chosen);
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
