//! `aegis train`: heads for validators from labelled messages (the evaluation schema).

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Instant;

use aegis_guard::{heads_dir, FeatureCache, LabelledMessage, LayerSearch, MessageFeatures};
use aegis_heads::{HiddenOptions, QueryOptions, TrainOptions};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::train_data::{reviewed_messages, taught_messages};
use crate::train_report::{
    print_author_figures, print_budget_choice, print_report, print_sources, ProgressLines,
};
use crate::ExitStatus;

mod arguments;
mod out_of_fold;

use aegis_teach::{keep_positives, negatives_for_new_validator, read_messages};
pub use arguments::TrainArgs;
use arguments::{check_numbers, parse_layers, validators_to_train};
use out_of_fold::out_of_fold_for;

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
        pooling: None,
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
                token_states: None,
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

    let mut features = features;
    if !args.attention.is_empty() {
        anyhow::ensure!(
            out_of_fold.is_none(),
            "--attention reads the loaded encoder's token states; rows read out of fold (--out-of-fold) have none"
        );
        read_token_states(&guard, &usable, &mut features)?;
    }
    let defaults = TrainOptions::default();
    let options = TrainOptions {
        folds: args.folds,
        validation: args.validation.into(),
        alphas: args
            .alpha
            .map_or(defaults.alphas.clone(), |alpha| vec![alpha]),
        hidden: None,
        by_language: false,
        language_rule: args.language_rule.into(),
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
        let search = LayerSearch {
            pooling: args.attention.contains(key).then(QueryOptions::shipped),
            ..search.clone()
        };
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
        if let Some(choice) = &fitted.trained.query_choice {
            eprintln!(
                "{key}: attention query, held-out ROC AUC over {} folds: {:.4} on the mean, {:.4} pooled ({})",
                choice.folds,
                choice.mean_roc_auc,
                choice.attention_roc_auc,
                if fitted.trained.head.pooling.is_some() {
                    "kept: the head pools the token states"
                } else {
                    "not kept: the head reads the sentence embedding"
                }
            );
        }
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
            anyhow::ensure!(
                trained.head.pooling.is_none() || reading_layers.is_some(),
                "--reading {}: {key}'s head pools token states, which a reading cannot share; give it layers of its own (--reading-layers)",
                spec.name
            );
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

/// Each usable row's token states ([`MessageFeatures::token_states`]), for the --attention
/// heads: read in chunks, with a line of progress each.
fn read_token_states(
    guard: &aegis_guard::Guard,
    rows: &[LabelledMessage],
    features: &mut [MessageFeatures],
) -> Result<()> {
    const CHUNK: usize = 256;
    let started = Instant::now();
    for (at, chunk) in rows.chunks(CHUNK).enumerate() {
        let texts: Vec<&str> = chunk.iter().map(|m| m.text.as_str()).collect();
        let states = aegis_guard::message_token_states(guard, &texts);
        for (offset, state) in states.into_iter().enumerate() {
            let row = at * CHUNK + offset;
            features[row].token_states = Some(state.with_context(|| {
                format!("--attention: the token states of {:?}", rows[row].text)
            })?);
        }
        eprintln!(
            "token states: {} of {} rows ({:.0} s)",
            (at * CHUNK + chunk.len()),
            rows.len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
