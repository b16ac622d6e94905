//! A head fitted for one validator on cached features, with the figures a prompt author decides
//! on: held-out-source ROC AUC per language, recall and benign false positives at the threshold
//! the benign budget gives, and the messages whose verdict the new head would change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aegis_guard::{
    message_features, FeatureCache, Guard, LabelledMessage, Language, LayerSearch, MessageFeatures,
};
use aegis_heads::{CvMetrics, Head, TrainOptions};
use serde::Serialize;

use crate::author_figures::LanguageFigures;
use crate::error::{Result, TeachError};

/// Messages encoded per model call; also how often progress is reported and cancel is heeded.
const FEATURE_BATCH: usize = 16;
/// Flips listed at most (the closest calls first go last: the clearest changes lead).
const MAX_FLIPS: usize = 200;

/// What a fit reads.
pub struct FitRequest<'a> {
    pub key: &'a str,
    /// The labelled files' rows (a validator they do not label takes them as its negatives).
    pub data: Vec<LabelledMessage>,
    /// The validator's taught examples.
    pub taught: Vec<LabelledMessage>,
    /// Texts never trained on whose verdicts may flip: the benign check and stored evaluation
    /// runs, each with where it came from.
    pub flip_candidates: Vec<(String, String)>,
    /// The head deciding the validator now, if any: flips are measured against it, and a new
    /// head reads the same layers.
    pub current: Option<Head>,
    pub cache: Option<&'a FeatureCache>,
    /// Share of benign rows the threshold may flag (nested cross-validation).
    pub benign_budget: f64,
}

/// How a fit reports progress and hears a cancel.
pub struct Progress<'a> {
    /// (what, done, total), e.g. ("reading messages", 320, 7900).
    pub report: &'a (dyn Fn(&str, usize, usize) + Sync),
    pub cancel: &'a AtomicBool,
}

/// A fitted head not yet applied, and what it would do.
#[derive(Debug, Clone)]
pub struct TaughtHead {
    pub head: Head,
    pub figures: TeachFigures,
    pub flips: Vec<HeadFlip>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TeachFigures {
    pub validator: String,
    /// The main figure: the head on the examples the author labelled, out of fold.
    pub on_your_examples: crate::AuthorFigures,
    /// The rest are on every training row, the shipped data's included, beside it.
    pub rows: usize,
    pub positives: usize,
    /// Of them, the validator's taught examples.
    pub taught: usize,
    /// How the folds were made ("held-out sources", or random when too few sources).
    pub validation: String,
    pub fallback: Option<String>,
    pub roc_auc: Option<f64>,
    /// Random stratified folds beside held-out sources (reads higher: it rewards memorising one).
    pub random_roc_auc: Option<f64>,
    pub by_language: Vec<LanguageFigures>,
    /// Chosen for the benign budget on out-of-fold scores; none without benign rows.
    pub threshold: Option<f64>,
    /// The template's threshold now.
    pub current_threshold: f64,
    pub benign_budget: f64,
    /// Nested cross-validation at `threshold`.
    pub recall: Option<f64>,
    pub precision: Option<f64>,
    pub benign_false_positive_rate: Option<f64>,
    pub benign_rows: usize,
    /// Taught examples the new head decides against their label (in sample, at the threshold).
    pub taught_still_wrong: usize,
    /// The threshold the author's taught near misses ask for (at most 10% of them failing), when
    /// there are enough of them; the threshold is the higher of it and the budget's.
    pub near_miss_threshold: Option<f64>,
    /// Why the head may have learned the validator's topic rather than its policy (no passing
    /// example near the violating ones), and what to teach; `None` when they come near.
    pub topic_warning: Option<String>,
    /// Where the line could go instead, and what each place catches and flags of the author's
    /// examples and the benign rows (out of fold), lowest threshold first.
    pub trade_off: Vec<crate::LinePoint>,
    pub alpha: f64,
    pub layers: String,
    /// Messages the model had to encode (the rest came from the feature cache).
    pub encoded: usize,
    pub read_seconds: f64,
    pub train_seconds: f64,
}

/// A message whose verdict the new head changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct HeadFlip {
    pub text: String,
    /// "benign check", "evaluation run N" or "taught".
    pub from: String,
    /// The current head's score; none when no head decides the validator yet.
    pub before: Option<f64>,
    pub after: f64,
    /// Whether the new head flags it (so it flagged it before, or no head decided).
    pub now_fails: bool,
}

/// Fits the validator's head on `request`'s rows (features from the cache where it has them),
/// chooses its strength and threshold on held-out sources, and lists the verdicts it changes.
pub fn fit_head(guard: &Guard, request: FitRequest, progress: &Progress) -> Result<TaughtHead> {
    let key = request.key;
    let validator = &guard.validators()[validator_slot(guard, key)?];
    let mut data = request.data;
    crate::data::negatives_for_new_validator(&mut data, &request.taught, key);
    let taught_count = request.taught.len();
    let messages: Vec<LabelledMessage> = data
        .into_iter()
        .chain(request.taught)
        .filter(|m| m.label(key).is_some())
        .collect();
    let positives = messages
        .iter()
        .filter(|m| m.label(key) == Some(true))
        .count();
    if positives == 0 {
        return Err(TeachError::Invalid(format!(
            "{key} has no positive examples to learn from: add messages that should fail it"
        )));
    }
    let layers = layers_to_read(guard, request.current.as_ref());
    let depth = layers.iter().copied().max().unwrap_or(1);

    let started = Instant::now();
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    let (mut features, encoded) = read_features(
        guard,
        &texts,
        request.cache,
        depth,
        false,
        "reading messages",
        progress,
    )?;
    // A head that pools token states is retrained pooling them.
    let pooling = request
        .current
        .as_ref()
        .and_then(|head| head.pooling.as_ref())
        .map(|pooling| pooling.options.clone());
    if pooling.is_some() {
        read_token_states(guard, &texts, &mut features, progress)?;
    }
    let (usable, features): (Vec<LabelledMessage>, Vec<MessageFeatures>) = messages
        .into_iter()
        .zip(features)
        .filter_map(|(m, f)| f.map(|f| (m, f)))
        .unzip();
    let read_seconds = started.elapsed().as_secs_f64();

    (progress.report)("training", 0, 1);
    let started = Instant::now();
    let search = LayerSearch {
        candidates: vec![layers.clone()],
        screen_alpha: 100.0,
        pooling,
    };
    let fitted = crate::fit_validator(
        guard,
        key,
        &usable,
        &features,
        &search,
        &retrain_options(request.current.as_ref()),
        Some(request.benign_budget),
    )?;
    let threshold = fitted.threshold;
    let trained = &fitted.trained;
    let train_seconds = started.elapsed().as_secs_f64();
    (progress.report)("training", 1, 1);

    let decide_at = threshold.unwrap_or(f64::from(validator.threshold));
    let taught_still_wrong = usable
        .iter()
        .zip(&features)
        .filter(|(m, _)| m.is_taught())
        .filter(|(m, f)| {
            let score = score(&trained.head, &m.text, f, &layers).unwrap_or(0.0);
            Some(score >= decide_at) != m.label(key)
        })
        .count();

    let flips = flips(
        guard,
        &request.flip_candidates,
        request.current.as_ref(),
        f64::from(validator.threshold),
        &trained.head,
        decide_at,
        request.cache,
        progress,
    )?;

    let chosen = &trained.chosen;
    // The budget's nested figures hold at its own threshold; once near misses raise it, the
    // out-of-fold scores at the raised one.
    let at_threshold = match (&fitted.budget, threshold) {
        (Some(c), Some(_)) if !fitted.raised_by_examples() => Figures {
            recall: c.recall,
            precision: c.precision,
            benign_false_positive_rate: c.benign_false_positive_rate,
        },
        (_, Some(t)) => figures_at(&chosen.out_of_fold, &trained.labels, &trained.benign, t),
        _ => Figures::default(),
    };
    let figures = TeachFigures {
        validator: key.to_string(),
        on_your_examples: crate::author_figures(key, &usable, &chosen.out_of_fold, decide_at),
        rows: chosen.cv.rows,
        positives: chosen.cv.positives,
        taught: taught_count,
        validation: chosen.validation.describe().to_string(),
        fallback: chosen.fallback.clone(),
        roc_auc: chosen.cv.roc_auc,
        random_roc_auc: chosen.random_folds.as_ref().and_then(|r| r.cv.roc_auc),
        by_language: chosen
            .cv_by_language
            .iter()
            .map(|(language, m): (&String, &CvMetrics)| LanguageFigures {
                language: language.clone(),
                rows: m.rows,
                positives: m.positives,
                roc_auc: m.roc_auc,
            })
            .collect(),
        threshold,
        current_threshold: f64::from(validator.threshold),
        benign_budget: request.benign_budget,
        recall: at_threshold.recall,
        precision: at_threshold.precision,
        benign_false_positive_rate: at_threshold.benign_false_positive_rate,
        benign_rows: fitted.budget.as_ref().map_or(0, |c| c.benign_rows),
        near_miss_threshold: fitted.near_miss,
        taught_still_wrong,
        topic_warning: fitted.topic_warning,
        trade_off: fitted.trade_off,
        alpha: trained.head.training.alpha,
        layers: trained.head.features.label(),
        encoded,
        read_seconds,
        train_seconds,
    };
    Ok(TaughtHead {
        head: fitted.trained.head,
        figures,
        flips,
    })
}

#[derive(Default)]
struct Figures {
    recall: Option<f64>,
    precision: Option<f64>,
    benign_false_positive_rate: Option<f64>,
}

/// Recall, precision and the benign rows' false-positive rate of out-of-fold `scores` at
/// `threshold`.
fn figures_at(scores: &[f64], labels: &[bool], benign: &[bool], threshold: f64) -> Figures {
    let count = |keep: &dyn Fn(usize) -> bool| (0..scores.len()).filter(|&i| keep(i)).count();
    let positives = count(&|i| labels[i]);
    let caught = count(&|i| labels[i] && scores[i] >= threshold);
    let flagged = count(&|i| scores[i] >= threshold);
    let benign_rows = count(&|i| benign[i]);
    let benign_flagged = count(&|i| benign[i] && scores[i] >= threshold);
    let share = |part: usize, whole: usize| (whole > 0).then(|| part as f64 / whole as f64);
    Figures {
        recall: share(caught, positives),
        precision: share(caught, flagged),
        benign_false_positive_rate: share(benign_flagged, benign_rows),
    }
}

/// The layers a new head reads: the current head's, else the encoder's sentence embedding (what
/// every shipped head reads), else the model's middle layer (issue 17 found the middle best).
fn layers_to_read(guard: &Guard, current: Option<&Head>) -> Vec<usize> {
    if let Some(head) = current {
        if head.features.encoder.is_decoder() == guard.encoder().is_none() {
            return head.features.layers.clone();
        }
    }
    match guard.encoder() {
        Some(_) => Vec::new(),
        None => vec![(guard.model().info().layers / 2).max(1)],
    }
}

/// Where validator `key` sits in the guard's validators (and heads).
pub(crate) fn validator_slot(guard: &Guard, key: &str) -> Result<usize> {
    guard
        .validators()
        .iter()
        .position(|v| v.key == key)
        .ok_or_else(|| TeachError::UnknownValidator(key.to_string()))
}

/// Layers a pass must run through for `head` to score: its own and its readings' (toxic's
/// contempt reads layer 16 beside the embedding).
pub(crate) fn depth_to_read(head: &Head) -> usize {
    head.features
        .layers
        .iter()
        .copied()
        .chain(head.reading_layers())
        .max()
        .unwrap_or(1)
}

/// `text`'s score by `head`, from its `features`: the language the guard detects in it picks the
/// head's map, as a verdict does.
pub(crate) fn score(
    head: &Head,
    text: &str,
    features: &MessageFeatures,
    layers: &[usize],
) -> Option<f64> {
    let language = Language::detect(text).code();
    let input = match &head.pooling {
        Some(pooling) => pooling.pool(features.token_states.as_deref()?).ok()?,
        None => features.input(layers),
    };
    head.probability(&input, language, &|l| features.layers_input(l))
        .ok()
        .map(f64::from)
}

/// Adds each read text's token states to its features, for a head that pools them; a text the
/// encoder cannot read now is left out as [`read_features`] leaves one out (logged).
fn read_token_states(
    guard: &Guard,
    texts: &[&str],
    features: &mut [Option<MessageFeatures>],
    progress: &Progress,
) -> Result<()> {
    for (at, chunk) in texts.chunks(FEATURE_BATCH).enumerate() {
        if progress.cancel.load(Ordering::Relaxed) {
            return Err(TeachError::Cancelled);
        }
        let slots = &mut features[at * FEATURE_BATCH..at * FEATURE_BATCH + chunk.len()];
        for (slot, states) in slots
            .iter_mut()
            .zip(aegis_guard::message_token_states(guard, chunk))
        {
            match states {
                Ok(states) => {
                    if let Some(features) = slot.as_mut() {
                        features.token_states = Some(states);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "skipped a message whose token states could not be read");
                    *slot = None;
                }
            }
        }
        (progress.report)(
            "reading token states",
            (at * FEATURE_BATCH + chunk.len()).min(texts.len()),
            texts.len(),
        );
    }
    Ok(())
}

/// Features of `texts` in batches, from the cache where it has them, with every validator's
/// prompt score too when `prompt_scores`; `None` for a text the model could not read (logged).
/// Returns them and how many the model encoded.
pub fn read_features(
    guard: &Guard,
    texts: &[&str],
    cache: Option<&FeatureCache>,
    depth: usize,
    prompt_scores: bool,
    what: &str,
    progress: &Progress,
) -> Result<(Vec<Option<MessageFeatures>>, usize)> {
    let mut out = Vec::with_capacity(texts.len());
    let mut encoded = 0;
    for chunk in texts.chunks(FEATURE_BATCH) {
        if progress.cancel.load(Ordering::Relaxed) {
            return Err(TeachError::Cancelled);
        }
        let uncached = cache.map_or(chunk.len(), |c| {
            chunk.iter().filter(|t| !c.holds(guard, t)).count()
        });
        encoded += uncached;
        for (text, result) in
            chunk
                .iter()
                .zip(message_features(guard, chunk, cache, depth, prompt_scores))
        {
            match result {
                Ok(f) => out.push(Some(f)),
                Err(e) => {
                    let preview: String = text.chars().take(40).collect();
                    tracing::warn!(error = %e, message = preview, "skipped a message the model could not read");
                    out.push(None);
                }
            }
        }
        (progress.report)(what, out.len(), texts.len());
    }
    Ok((out, encoded))
}

/// The candidates whose verdict differs between the current head (at the template's threshold)
/// and the new one (at its own); with no current head, the ones the new head flags.
#[allow(clippy::too_many_arguments)]
fn flips(
    guard: &Guard,
    candidates: &[(String, String)],
    current: Option<&Head>,
    current_threshold: f64,
    new: &Head,
    new_threshold: f64,
    cache: Option<&FeatureCache>,
    progress: &Progress,
) -> Result<Vec<HeadFlip>> {
    let new_layers = new.features.layers.clone();
    let current_layers = current.map(|h| h.features.layers.clone());
    let depth = depth_to_read(new).max(current.map_or(1, depth_to_read));
    let texts: Vec<&str> = candidates.iter().map(|(t, _)| t.as_str()).collect();
    let (mut features, _) = read_features(
        guard,
        &texts,
        cache,
        depth,
        false,
        "checking for flips",
        progress,
    )?;
    if new.pooling.is_some() || current.is_some_and(|head| head.pooling.is_some()) {
        read_token_states(guard, &texts, &mut features, progress)?;
    }
    let mut flips: Vec<HeadFlip> = candidates
        .iter()
        .zip(features)
        .filter_map(|((text, from), f)| {
            let f = f?;
            let after = score(new, text, &f, &new_layers)?;
            let before = match (current, &current_layers) {
                (Some(head), Some(layers)) => score(head, text, &f, layers),
                _ => None,
            };
            let now_fails = after >= new_threshold;
            let changed = match before {
                Some(b) => (b >= current_threshold) != now_fails,
                None => now_fails,
            };
            changed.then(|| HeadFlip {
                text: text.clone(),
                from: from.clone(),
                before,
                after,
                now_fails,
            })
        })
        .collect();
    // The clearest changes first.
    flips.sort_by(|a, b| {
        let margin = |f: &HeadFlip| (f.after - new_threshold).abs();
        margin(b).total_cmp(&margin(a))
    });
    flips.truncate(MAX_FLIPS);
    Ok(flips)
}

/// How a head is retrained: as the live head was, so a head with a hidden layer keeps one, and a
/// head with a map per language gets them again, under the same rule.
fn retrain_options(current: Option<&Head>) -> TrainOptions {
    let defaults = TrainOptions::default();
    TrainOptions {
        hidden: current.and_then(|head| head.training.hidden.clone()),
        by_language: current.is_some_and(|head| head.training.by_language),
        language_rule: current.map_or(defaults.language_rule, |head| head.language_rule),
        ..defaults
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_retrained_with_its_hidden_layer_and_language_maps() {
        let shipped = |name: &str| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../prompt_guard/heads")
                .join(format!("{name}.json"));
            Head::load(&path).expect("a shipped head")
        };
        let toxic = shipped("toxic");
        let hidden = toxic
            .training
            .hidden
            .clone()
            .expect("toxic ships a hidden layer");
        assert_eq!(
            toxic.hidden.as_ref().map(|layer| layer.units()),
            Some(hidden.units)
        );
        assert_eq!(retrain_options(Some(&toxic)).hidden, Some(hidden));
        assert_eq!(retrain_options(Some(&shipped("spam"))).hidden, None);
        assert_eq!(retrain_options(None), TrainOptions::default());
        // A head with a map per language is retrained with them.
        let mut by_language = shipped("spam");
        assert!(!retrain_options(Some(&by_language)).by_language);
        by_language.training.by_language = true;
        assert!(retrain_options(Some(&by_language)).by_language);
        // ...under the rule it was trained with.
        assert_eq!(
            retrain_options(Some(&by_language)).language_rule,
            aegis_heads::LanguageRule::Detected
        );
        by_language.language_rule = aegis_heads::LanguageRule::Highest;
        assert_eq!(
            retrain_options(Some(&by_language)).language_rule,
            aegis_heads::LanguageRule::Highest
        );
    }
}
