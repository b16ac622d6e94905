//! `aegis train`'s arguments, and their checks against each other and the loaded guard before any
//! message goes through the model: a mistake costs a line of error, not a feature pass.

use std::path::PathBuf;

use aegis_guard::{Guard, LabelledMessage};
use aegis_heads::{LanguageRule, Validation};
use anyhow::{bail, Context, Result};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Validators to train (default: every one with labels in the data).
    pub validators: Vec<String>,
    /// Labelled messages, JSONL: {"text", "lang", "labels": {"spam": true|false|null, ...}}.
    #[arg(long, required_unless_present_any = ["from_reviews", "examples"])]
    pub data: Vec<PathBuf>,
    /// Add reviewers' decisions from history: an overturn flips the guard's result into the label.
    #[arg(long)]
    pub from_reviews: bool,
    /// Add the examples taught in the history database (`aegis examples`, the Teach view) to the
    /// data; each applied head is recorded there as a version either way (`aegis heads`).
    #[arg(long)]
    pub examples: bool,
    #[command(flatten)]
    pub db: DbArgs,
    /// Train on only this many of each validator's positives, spread evenly over the data (all
    /// its negatives stay): the learning curve that says how many examples are enough.
    #[arg(long)]
    pub positives: Option<usize>,
    /// Leave out rows whose "source" is this (repeatable), e.g. sources whose licence forbids it.
    #[arg(long)]
    pub exclude_source: Vec<String>,
    /// Candidate layers, compared per validator by cross-validated ROC AUC: `auto` (on the model,
    /// every second layer up to two thirds of the depth and two concatenations of middle layers;
    /// on an encoder, every fourth layer and its sentence embedding), or a list such as
    /// `8,11,8+12` (`+` concatenates; `embedding` names an encoder's embedding). Verdicts stop
    /// reading after the deepest layer a head names.
    #[arg(long, default_value = "auto")]
    pub layers: String,
    /// L2 strength the layer candidates are compared at (the chosen layers then get the full
    /// cross-validated search).
    #[arg(long, default_value_t = 100.0)]
    pub screen_alpha: f64,
    /// Also run every validator's own prompt on every message, to report the prompt's ROC AUC
    /// beside the heads' (one prompt per validator per message: slow).
    #[arg(long)]
    pub prompt_scores: bool,
    /// Fit at this L2 strength instead of choosing one by cross-validation: a retrain after
    /// adding examples keeps the strength its head was chosen with (`training.alpha` in the
    /// head), in a few seconds.
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Cross-validation folds.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// How folds are made, and so how the strength, the layers and the threshold are chosen:
    /// `by-source` holds out whole sources (the row's "source"; rows the project wrote by
    /// language and kind), the figure a user's traffic will see; `random` is stratified random
    /// folds, which put one source on both sides of a split and read higher. By-source reports
    /// the random figure beside its own.
    #[arg(long, value_enum, default_value_t = ValidationArg::BySource)]
    pub validation: ValidationArg,
    /// Train a hidden layer of UNITS ReLU units beside VALIDATOR's linear map, from it, at the
    /// strength chosen for it, e.g. `toxic:64` (the shipped toxic and harassment heads have 64;
    /// README, "A hidden layer"). The head records the settings, so the Teach view retrains it
    /// alike.
    #[arg(long, value_name = "VALIDATOR:UNITS", value_parser = crate::hidden_arg::parse_hidden)]
    pub hidden: Vec<(String, usize)>,
    /// Train VALIDATOR's head with a map for each language the guard detects (rows of each
    /// class permitting): the map every row teaches plus a correction that language's rows
    /// teach, the shared map scoring the rest. Measured on harassment, not shipped: it ranks
    /// English public sources a little better but catches less at the benign budget (README, "A
    /// map per language"). The head records it, so the Teach view retrains it alike.
    #[arg(long, value_name = "VALIDATOR")]
    pub by_language: Vec<String>,
    /// Train VALIDATOR's head on an attention pooling of the encoder's token states: a learned
    /// query weighs each token before the mean, so a short insult in a long message is not
    /// diluted (issue 64). Kept only where, with each fold's query fitted without it, held-out
    /// sources rank better than on the sentence embedding; the report says which. Reads every
    /// row's token states once more (not cached). Through --encoder-server the server must pool
    /// nothing (`llama-server --embeddings --pooling none`).
    #[arg(long, value_name = "VALIDATOR")]
    pub attention: Vec<String>,
    /// Which of a --by-language head's maps scores a message: `highest`, the highest of them
    /// whatever the language (a message fails if either language's reading fails it); `detected`,
    /// the detected language's, which a message mixing languages can steer (sessions 60 to 63
    /// measured it). Out-of-fold scores, and so the threshold, follow the rule.
    #[arg(long, value_enum, default_value_t = LanguageRuleArg::Highest)]
    pub language_rule: LanguageRuleArg,
    /// Where heads are written (default: the templates folder's heads/, applied as versions with
    /// their thresholds; elsewhere only the head files are written).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also choose each validator's threshold on the head's out-of-fold scores: the highest
    /// recall with at most --benign-budget of the benign rows (every label false) flagged,
    /// measured by nested cross-validation, and write it into the template's front matter.
    #[arg(long)]
    pub tune_thresholds: bool,
    /// Decide at this threshold instead of the tuned one: a place on the trade-off table that
    /// training with --examples prints (what it catches of your violating examples against the
    /// near misses and benign rows it flags). One validator at a time.
    #[arg(long, value_name = "THRESHOLD")]
    pub threshold: Option<f64>,
    /// Share of benign rows a tuned threshold may flag (default: the shipped heads' budget).
    #[arg(long, default_value_t = aegis_teach::BENIGN_BUDGET)]
    pub benign_budget: f64,
    /// A second map for one kind of violation the head misses, `VALIDATOR:NAME=FILE` (e.g.
    /// `toxic:contempt=prompt_guard/heads/authored-contempt.jsonl`): trained on FILE's rows
    /// labelled for the validator against every row of the data labelled not to violate it, its
    /// threshold chosen at --reading-budget, kept in the head. The message fails when either map
    /// fails it (README, "Contempt without a rude word").
    #[arg(long, value_name = "VALIDATOR:NAME=FILE")]
    pub reading: Vec<crate::train_reading::ReadingSpec>,
    /// Share of benign rows a reading may flag on its own, on top of the head's budget.
    #[arg(long, default_value_t = 0.003)]
    pub reading_budget: f64,
    /// Encoder layers the readings read instead of the head's own input, e.g. `16` (its mean
    /// after layer 16; `+` joins several): contempt without a rude word is read from layer 16
    /// (README, "Contempt without a rude word").
    #[arg(long, value_name = "LAYERS", requires = "reading")]
    pub reading_layers: Option<String>,
    /// Report only; write no heads.
    #[arg(long)]
    pub dry_run: bool,
    /// Recompute every message's features instead of reusing cached ones.
    #[arg(long)]
    pub no_cache: bool,
    /// Train on these embeddings of the rows, written by `aegis adapt --cross-fit K --out-of-fold
    /// FILE`: each row read by an adapter that never trained on its source. A head trained on
    /// the loaded adapter's reading of its own training rows sees what it memorised, and its
    /// thresholds collapse; rows the file lacks are read through the loaded encoder. For heads
    /// on the embedding of an adapted encoder, trained with the same settings on the same data
    /// (not checked: the adapter file does not record them; the head records the file's run).
    /// Research: built with the `lab` feature.
    #[cfg(feature = "lab")]
    #[arg(long, value_name = "FILE")]
    pub out_of_fold: Option<PathBuf>,
    /// Write every training row's out-of-fold score (the head's, under --validation; the
    /// scores its ROC AUC is read from) to FILE as JSON lines, so that two runs on different
    /// data can be compared on the rows they share (`scripts/research/compare-scores.py`).
    /// Research: built with the `lab` feature.
    #[cfg(feature = "lab")]
    #[arg(long, value_name = "FILE")]
    pub scores_out: Option<PathBuf>,
    /// Where features are cached (default: the platform cache folder, aegis/features).
    #[arg(long, env = "AEGIS_FEATURE_CACHE")]
    pub feature_cache: Option<PathBuf>,
    #[command(flatten)]
    pub guard: GuardArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ValidationArg {
    BySource,
    Random,
}

impl From<ValidationArg> for Validation {
    fn from(arg: ValidationArg) -> Self {
        match arg {
            ValidationArg::BySource => Validation::BySource,
            ValidationArg::Random => Validation::RandomFolds,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LanguageRuleArg {
    Detected,
    Highest,
}

impl From<LanguageRuleArg> for LanguageRule {
    fn from(arg: LanguageRuleArg) -> Self {
        match arg {
            LanguageRuleArg::Detected => LanguageRule::Detected,
            LanguageRuleArg::Highest => LanguageRule::Highest,
        }
    }
}

/// The numeric options in range, and a threshold only where it places one validator's line.
pub(super) fn check_numbers(args: &TrainArgs) -> Result<()> {
    anyhow::ensure!(
        args.alpha.is_none_or(|a| a.is_finite() && a > 0.0),
        "--alpha must be a positive number"
    );
    anyhow::ensure!(
        args.threshold.is_none_or(|t| t > 0.0 && t < 1.0),
        "--threshold must be between 0 and 1"
    );
    anyhow::ensure!(
        args.threshold.is_none() || args.validators.len() == 1,
        "--threshold places one validator's line: name that one validator"
    );
    Ok(())
}

/// The validators named (each with a template), or every one some row labels; the per-validator
/// options must name validators among them.
pub(super) fn validators_to_train<'a>(
    args: &TrainArgs,
    guard: &Guard,
    rows: impl Iterator<Item = &'a LabelledMessage> + Clone,
) -> Result<Vec<String>> {
    let keys: Vec<String> = if args.validators.is_empty() {
        guard
            .validators()
            .iter()
            .map(|v| v.key.clone())
            .filter(|key| rows.clone().any(|m| m.label(key).is_some()))
            .collect()
    } else {
        for key in &args.validators {
            if guard.validator(key).is_none() {
                bail!("no validator template is called {key:?}");
            }
        }
        args.validators.clone()
    };
    if let Some((validator, _)) = args.hidden.iter().find(|(v, _)| !keys.contains(v)) {
        bail!(
            "--hidden {validator}: it is not among the validators trained here ({})",
            keys.join(", ")
        );
    }
    if let Some(validator) = args.attention.iter().find(|v| !keys.contains(v)) {
        bail!(
            "--attention {validator}: it is not among the validators trained here ({})",
            keys.join(", ")
        );
    }
    if let Some(validator) = args.by_language.iter().find(|v| !keys.contains(v)) {
        bail!(
            "--by-language {validator}: it is not among the validators trained here ({})",
            keys.join(", ")
        );
    }
    if let Some(spec) = args.reading.iter().find(|r| !keys.contains(&r.validator)) {
        bail!(
            "--reading {}: {} is not among the validators trained here ({})",
            spec.name,
            spec.validator,
            keys.join(", ")
        );
    }
    Ok(keys)
}

/// `auto`, or a comma-separated list of layer sets (`8`, `8+12`, and on an encoder `embedding`,
/// the empty set).
pub(super) fn parse_layers(spec: &str, layers: usize, encoder: bool) -> Result<Vec<Vec<usize>>> {
    if spec == "auto" && encoder {
        let mut candidates: Vec<Vec<usize>> = (4..layers).step_by(4).map(|l| vec![l]).collect();
        candidates.push(Vec::new());
        return Ok(candidates);
    }
    if spec == "auto" {
        // Measured on the 270M (issue 17): middle layers generalise to unseen and hard cases
        // better than the last, which is no better than layer 8 on held-out messages. Layers past
        // two thirds of the depth are left out of the default search: they cost a third more
        // forward pass per message and were not better. `--layers` can ask for any.
        let top = (layers * 2 / 3).max(1);
        let mut candidates: Vec<Vec<usize>> = (2..=top).step_by(2).map(|l| vec![l]).collect();
        let middle = layers / 2;
        if middle >= 3 && middle + 3 <= top {
            candidates.push(vec![middle - 1, middle + 3]);
            candidates.push(vec![middle - 3, middle, middle + 3]);
        }
        return Ok(candidates);
    }
    spec.split(',')
        .map(|set| {
            if set.trim() == "embedding" {
                if !encoder {
                    bail!("--layers: `embedding` is an encoder's; the heads read the model here");
                }
                return Ok(Vec::new());
            }
            set.split('+')
                .map(|l| {
                    let layer: usize = l.trim().parse().with_context(|| {
                        format!("--layers: {l:?} is not a layer number (use e.g. 8,11,8+12)")
                    })?;
                    if layer == 0 || layer > layers {
                        bail!("--layers: no layer {layer}; the model has layers 1 to {layers}");
                    }
                    Ok(layer)
                })
                .collect()
        })
        .collect()
}
