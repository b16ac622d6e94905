//! `aegis train`: heads for validators from labelled messages (the evaluation schema).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Instant;

use aegis_guard::{heads_dir, FeatureCache, LabelledMessage, LayerSearch, MessageFeatures};
use aegis_heads::{HiddenOptions, TrainOptions, Validation};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::train_data::{reviewed_messages, taught_messages};
use crate::train_report::{
    print_author_figures, print_budget_choice, print_report, print_sources, ProgressLines,
};
use crate::ExitStatus;

mod arguments;
mod out_of_fold;

use aegis_teach::{keep_positives, negatives_for_new_validator, read_messages};
use arguments::{check_numbers, parse_layers, validators_to_train};
use out_of_fold::out_of_fold_for;

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

pub fn run(mut args: TrainArgs) -> Result<ExitStatus> {
    // A head learns from features its encoder computes; int8's rounding (what `auto` picks on a
    // CPU with VNNI) would make what it learns depend on the CPU it was trained on, and the
    // shipped heads keep their verdicts on int8 because they were trained without it.
    if args.guard.encoder_weights.trim() == "auto" {
        args.guard.encoder_weights = "precise".into();
    }
    check_numbers(&args)?;
    let mut messages = read_messages(&args.data, &args.exclude_source)?;
    if args.from_reviews {
        let reviewed = reviewed_messages(&args.db)?;
        eprintln!("{} reviewed messages from history", reviewed.len());
        messages.extend(reviewed);
    }
    let taught = if args.examples {
        let taught = taught_messages(&args.db)?;
        eprintln!("{} taught examples from history", taught.len());
        taught
    } else {
        Vec::new()
    };
    // Heads on the encoder read it here, whatever serves the model.
    anyhow::ensure!(
        args.guard.backend.is_none() || args.guard.encoder_chosen(),
        "heads on the decoder are trained on the model's hidden states, which a model server does not return: train on a local model (drop --backend / AEGIS_BACKEND), or on the encoder"
    );
    let guard = args.guard.load(&args.db)?;
    let search = LayerSearch {
        candidates: match guard.encoder() {
            Some(encoder) => parse_layers(&args.layers, encoder.info().layers, true)?,
            None => parse_layers(&args.layers, guard.model().info().layers, false)?,
        },
        screen_alpha: args.screen_alpha,
    };
    let reading_layers = match (&args.reading_layers, guard.encoder()) {
        (None, _) => None,
        (Some(spec), Some(encoder)) => {
            match parse_layers(spec, encoder.info().layers, true)?.as_slice() {
                [layers] if !layers.is_empty() => Some(layers.clone()),
                _ => bail!("--reading-layers: one set of layers, such as 16 or 12+16"),
            }
        }
        (Some(_), None) => bail!("--reading-layers: readings of other layers read an encoder"),
    };
    // The forward pass stops after the deepest layer any candidate or reading reads (an
    // encoder's embedding is read whole beside them).
    let depth = search
        .candidates
        .iter()
        .flatten()
        .chain(reading_layers.iter().flatten())
        .copied()
        .max()
        .unwrap_or(1);
    let keys = validators_to_train(&args, &guard, messages.iter().chain(&taught))?;
    for key in &keys {
        let negatives = negatives_for_new_validator(&mut messages, &taught, key);
        if negatives > 0 {
            eprintln!(
                "{key}: no data file labels it, so its {negatives} negatives are the data's rows (benign messages and the other validators' positives)"
            );
        }
    }
    messages.extend(taught);
    if let Some(positives) = args.positives {
        for key in &keys {
            let kept = keep_positives(&mut messages, key, positives);
            eprintln!("{key}: training on {kept} of its positives (--positives)");
        }
    }
    let messages: Vec<LabelledMessage> = messages
        .into_iter()
        .filter(|m| keys.iter().any(|k| m.label(k).is_some()))
        .collect();
    if messages.is_empty() {
        bail!("no row is labelled for {}", keys.join(", "));
    }

    let cache = (!args.no_cache).then(|| {
        FeatureCache::new(
            args.feature_cache
                .clone()
                .unwrap_or_else(aegis_teach::feature_cache_dir),
        )
    });
    let out_of_fold = out_of_fold_for(&args, &search, guard.encoder().is_some())?;
    let from_file = |m: &LabelledMessage| {
        out_of_fold
            .as_ref()
            .and_then(|o| o.get(&m.text))
            .map(|embedding| MessageFeatures {
                layers: Vec::new(),
                embedding: Some(embedding.to_vec()),
                prompt_scores: None,
            })
    };
    let texts: Vec<&str> = messages
        .iter()
        .filter(|m| out_of_fold.as_ref().and_then(|o| o.get(&m.text)).is_none())
        .map(|m| m.text.as_str())
        .collect();
    if let Some(out_of_fold) = &out_of_fold {
        eprintln!(
            "{} of {} rows read out of fold (cross-fit run {}); the rest through the loaded encoder",
            messages.len() - texts.len(),
            messages.len(),
            out_of_fold.run()
        );
    }
    let progress = ProgressBar::new(texts.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("reading messages {bar:40} {pos}/{len}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let lines =
        Mutex::new((!std::io::stderr().is_terminal()).then(|| ProgressLines::new(texts.len())));
    let report = |_: &str, done: usize, _: usize| {
        progress.set_position(done as u64);
        if let Some(lines) = lines.lock().ok().as_mut().and_then(|l| l.as_mut()) {
            lines.reached(done);
        }
    };
    let (read, _) = aegis_teach::read_features(
        &guard,
        &texts,
        cache.as_ref(),
        depth,
        args.prompt_scores,
        "reading messages",
        &aegis_teach::Progress {
            report: &report,
            cancel: &AtomicBool::new(false),
        },
    )?;
    progress.finish_and_clear();
    // A message the model could not read was logged and is left out.
    let mut read = read.into_iter();
    let (usable, features): (Vec<LabelledMessage>, Vec<MessageFeatures>) = messages
        .into_iter()
        .filter_map(|m| {
            let features = from_file(&m).or_else(|| read.next().flatten())?;
            Some((m, features))
        })
        .unzip();

    let defaults = TrainOptions::default();
    let options = TrainOptions {
        folds: args.folds,
        validation: args.validation.into(),
        alphas: args
            .alpha
            .map_or(defaults.alphas.clone(), |alpha| vec![alpha]),
        hidden: None,
        by_language: false,
    };
    let prompts = args.guard.prompts_dir()?;
    let live_dir = heads_dir(&prompts, guard.encoder().is_some());
    let out_dir = args.out.clone().unwrap_or_else(|| live_dir.clone());
    #[cfg(feature = "lab")]
    let mut scores_out = crate::train_report::ScoresFile::create(args.scores_out.as_deref())?;
    for key in &keys {
        let started = Instant::now();
        let options = TrainOptions {
            hidden: args
                .hidden
                .iter()
                .find(|(validator, _)| validator == key)
                .map(|&(_, units)| HiddenOptions {
                    units,
                    ..HiddenOptions::shipped()
                }),
            by_language: args.by_language.contains(key),
            ..options.clone()
        };
        if options.hidden.is_none() {
            // The Teach view keeps a head's layer; this command trains what it is told, so a
            // retrain that drops the layer says so.
            let live = aegis_heads::Head::load(&live_dir.join(format!("{key}.json")));
            if let Some(units) = live.ok().and_then(|h| h.hidden).map(|l| l.units()) {
                eprintln!(
                    "note: {key}'s live head has a hidden layer of {units} units; this trains \
                     a linear head (add --hidden {key}:{units} to keep one)"
                );
            }
        }
        let fitted = aegis_teach::fit_validator(
            &guard,
            key,
            &usable,
            &features,
            &search,
            &options,
            args.tune_thresholds.then_some(args.benign_budget),
        )?;
        print_report(&fitted.trained);
        #[cfg(feature = "lab")]
        scores_out.write(&fitted.trained, &usable)?;
        eprintln!(
            "{key}: trained in {:.1} s (features read beforehand)",
            started.elapsed().as_secs_f64()
        );
        if args.tune_thresholds {
            print_budget_choice(&guard, key, fitted.budget.as_ref(), args.benign_budget);
        }
        if let (true, Some(line)) = (fitted.raised_by_examples(), fitted.threshold) {
            eprintln!(
                "{key}: threshold raised to {line:.3}, the line your examples draw (at most {:.0}% of the taught near misses fail)",
                aegis_teach::NEAR_MISS_BUDGET * 100.0
            );
        }
        if let Some(warning) = &fitted.topic_warning {
            eprintln!("warning: {key}: {warning}");
        }
        let threshold = args.threshold.or(fitted.threshold);
        let trade_off = fitted.trade_off;
        let mut trained = fitted.trained;
        if let Some(placed) = args.threshold {
            eprintln!("{key}: deciding at {placed:.3}, as --threshold places it");
            trained.head.training.threshold = Some(placed);
        }
        trained.head.training.out_of_fold = out_of_fold.as_ref().map(|o| o.run().to_string());
        let threshold = threshold.or_else(|| guard.validator(key).map(|v| f64::from(v.threshold)));
        // A reading is one more line (`Reading` has no hidden layer), for every language.
        let reading_options = TrainOptions {
            hidden: None,
            by_language: false,
            ..options.clone()
        };
        for spec in args.reading.iter().filter(|r| &r.validator == key) {
            let head_threshold = threshold.with_context(|| {
                format!(
                    "--reading {}: {key} has no threshold to align it to",
                    spec.name
                )
            })?;
            let run = crate::train_reading::ReadingRun {
                guard: &guard,
                rows: &usable,
                features: &features,
                layers: trained.head.features.layers.clone(),
                reading_layers: reading_layers.clone(),
                screen_alpha: args.screen_alpha,
                options: &reading_options,
                cache: cache.as_ref(),
                benign_budget: args.reading_budget,
            };
            let reading =
                crate::train_reading::train_reading(&run, spec, head_threshold, &mut |l| {
                    eprintln!("{l}")
                })?;
            trained.head.readings.push(reading);
        }
        if let Some(threshold) = threshold {
            print_sources(&trained, threshold);
            if args.examples {
                print_author_figures(key, &usable, &trained, threshold, &trade_off);
            }
        }
        if args.dry_run {
            continue;
        }
        let described = format!(
            "layers {}, alpha {}",
            trained.head.features.label(),
            trained.head.training.alpha
        );
        if out_dir == live_dir {
            let validator = guard.validator(key);
            let applied = crate::teach::apply_head(
                &args.db,
                &prompts,
                validator,
                &trained.head,
                "aegis train",
            )?;
            eprintln!(
                "applied {} ({described}) as head version {}",
                applied.path.display(),
                applied.version
            );
            if let Some(threshold) = applied.threshold {
                eprintln!("wrote threshold {threshold:.3} into {key}'s template");
            }
            if !applied.kept_readings.is_empty() {
                eprintln!("{}", crate::teach::kept_readings_line(&applied));
            }
        } else {
            let path = out_dir.join(format!("{key}.json"));
            trained.head.save(&path)?;
            eprintln!(
                "wrote {} ({described}); not applied: --out is not the folder the guard reads",
                path.display()
            );
        }
    }
    Ok(ExitStatus::Passed)
}
