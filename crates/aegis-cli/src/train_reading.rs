//! `aegis train --reading VALIDATOR:NAME=FILE`: a second linear map kept in a validator's head,
//! for one kind of violation its own map misses (issue "Read who says it"). Contempt without a
//! rude word points another way in the embedding than insults do: in the head's own rows it
//! pulled the map off the insults (unseen tweets' toxic recall at the threshold fell from 0.753 to
//! 0.679), while a map of its own catches it and leaves the insults' map as it was. The message
//! fails when either map fails it ([`aegis_heads::Reading`]).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use aegis_guard::{FeatureCache, Guard, LabelledMessage, LayerSearch, MessageFeatures};
use aegis_heads::{Reading, TrainOptions};
use anyhow::{bail, Context, Result};

/// One `--reading` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingSpec {
    pub validator: String,
    pub name: String,
    pub data: PathBuf,
}

impl std::str::FromStr for ReadingSpec {
    type Err = String;

    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let shape =
            || format!("{spec:?} is not VALIDATOR:NAME=FILE, e.g. toxic:contempt=rows.jsonl");
        let (validator, rest) = spec.split_once(':').ok_or_else(shape)?;
        let (name, data) = rest.split_once('=').ok_or_else(shape)?;
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !plain(validator) || !plain(name) || data.is_empty() {
            return Err(shape());
        }
        Ok(Self {
            validator: validator.into(),
            name: name.into(),
            data: data.into(),
        })
    }
}

/// What training a reading needs from the head's own run.
pub struct ReadingRun<'a> {
    pub guard: &'a Guard,
    /// The head's rows and their features: those labelled not to violate the validator are the
    /// reading's negatives beside its file's.
    pub rows: &'a [LabelledMessage],
    pub features: &'a [MessageFeatures],
    /// The layers the head reads: the reading reads the same input unless `reading_layers`.
    pub layers: Vec<usize>,
    /// Encoder layers the reading reads instead (`--reading-layers`).
    pub reading_layers: Option<Vec<usize>>,
    pub screen_alpha: f64,
    pub options: &'a TrainOptions,
    pub cache: Option<&'a FeatureCache>,
    pub benign_budget: f64,
}

/// Trains the reading `spec` describes and aligns it to `head_threshold`.
pub fn train_reading(
    run: &ReadingRun,
    spec: &ReadingSpec,
    head_threshold: f64,
    say: &mut dyn FnMut(String),
) -> Result<Reading> {
    let key = spec.validator.as_str();
    let own: Vec<LabelledMessage> =
        aegis_teach::read_messages(std::slice::from_ref(&spec.data), &[])?
            .into_iter()
            .filter(|m| m.label(key).is_some())
            .collect();
    if !own.iter().any(|m| m.label(key) == Some(true)) {
        bail!(
            "{}: no row is labelled {key} true, so the reading {:?} has nothing to learn",
            spec.data.display(),
            spec.name
        );
    }
    let texts: Vec<&str> = own.iter().map(|m| m.text.as_str()).collect();
    let layers = run
        .reading_layers
        .clone()
        .unwrap_or_else(|| run.layers.clone());
    let depth = layers.iter().copied().max().unwrap_or(1);
    let (read, _) = aegis_teach::read_features(
        run.guard,
        &texts,
        run.cache,
        depth,
        false,
        "reading the reading's rows",
        &aegis_teach::Progress {
            report: &|_, _, _| {},
            cancel: &AtomicBool::new(false),
        },
    )?;
    let mut rows = Vec::new();
    let mut features = Vec::new();
    for (message, read) in own.into_iter().zip(read) {
        if let Some(read) = read {
            rows.push(message);
            features.push(read);
        }
    }
    let from_file = rows.len();
    for (message, read) in run.rows.iter().zip(run.features) {
        if message.label(key) == Some(false) {
            rows.push(message.clone());
            features.push(read.clone());
        }
    }
    say(format!(
        "{key}: reading {:?}: {from_file} rows of {} and {} of the head's rows not {key}",
        spec.name,
        spec.data.display(),
        rows.len() - from_file
    ));
    let search = LayerSearch {
        candidates: vec![layers],
        screen_alpha: run.screen_alpha,
        pooling: None,
    };
    // A reading's positives are one authored kind, a source or two: folds that hold out whole
    // sources would leave a fold with none to learn from, so its strength is chosen on random
    // folds. Its threshold is not: random folds put a benign source on both sides and understate
    // what unseen traffic will see (on the real benign messages held back, a threshold chosen so
    // flagged 0.8% where it promised 0.3%), so the benign budget is held on folds of whole
    // sources at that strength, as every head's threshold is.
    let fit = |options: &TrainOptions| {
        aegis_teach::fit_validator(
            run.guard,
            key,
            &rows,
            &features,
            &search,
            options,
            Some(run.benign_budget),
        )
    };
    let random = fit(&TrainOptions {
        validation: aegis_heads::Validation::RandomFolds,
        ..run.options.clone()
    })?;
    let alpha = random.trained.head.training.alpha;
    let fitted = fit(&TrainOptions {
        validation: aegis_heads::Validation::BySource,
        alphas: vec![alpha],
        ..run.options.clone()
    })?;
    let own_threshold = fitted
        .budget
        .as_ref()
        .map(|b| b.threshold)
        .with_context(|| {
            format!(
                "{key}: the reading {:?} has no benign rows to set its threshold on",
                spec.name
            )
        })?;
    let share = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.3}"));
    if let (Some(by_source), Some(random)) = (&fitted.budget, &random.budget) {
        say(format!(
            "{key}: reading {:?} (alpha {alpha}) fails at {own_threshold:.3} on its own: benign false positives {} of {} rows (nested, held-out sources); recall on its rows {} (nested, random folds)",
            spec.name,
            share(by_source.benign_false_positive_rate),
            by_source.benign_rows,
            share(random.recall)
        ));
    }
    let head = fitted.trained.head;
    Ok(Reading::aligned(
        spec.name.clone(),
        head.training,
        run.reading_layers.clone(),
        head.weights,
        head.bias,
        own_threshold,
        head_threshold,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_names_its_validator_its_kind_and_its_rows() {
        let spec: ReadingSpec = "toxic:contempt=prompt_guard/heads/authored-contempt.jsonl"
            .parse()
            .expect("valid");
        assert_eq!(spec.validator, "toxic");
        assert_eq!(spec.name, "contempt");
        assert_eq!(
            spec.data,
            PathBuf::from("prompt_guard/heads/authored-contempt.jsonl")
        );
        for bad in [
            "toxic",
            "toxic:contempt",
            ":contempt=f",
            "toxic:=f",
            "to xic:c=f",
            "toxic:c=",
        ] {
            let err = bad.parse::<ReadingSpec>().unwrap_err();
            assert!(err.contains("VALIDATOR:NAME=FILE"), "{bad}: {err}");
        }
    }
}
