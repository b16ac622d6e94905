//! `aegis train`: heads for validators from labelled messages (the evaluation schema).

use std::io::BufRead;
use std::path::PathBuf;

use aegis_guard::{
    message_features, train_validator, FeatureCache, LabelledMessage, MessageFeatures,
    ValidatorTraining, HEADS_DIR,
};
use aegis_heads::{CvMetrics, FeatureKind, TrainOptions};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Validators to train (default: every one with labels in the data).
    pub validators: Vec<String>,
    /// Labelled messages, JSONL: {"text", "lang", "labels": {"spam": true|false|null, ...}}.
    #[arg(long, required_unless_present = "from_reviews")]
    pub data: Vec<PathBuf>,
    /// Add reviewers' decisions from history: an overturn flips the guard's result into the label.
    #[arg(long)]
    pub from_reviews: bool,
    #[command(flatten)]
    pub db: DbArgs,
    /// Leave out rows whose "source" is this (repeatable), e.g. sources whose licence forbids it.
    #[arg(long)]
    pub exclude_source: Vec<String>,
    /// Feature to train on: auto (best cross-validated ROC AUC per validator), message_mean or
    /// answer_hidden.
    #[arg(long, default_value = "auto")]
    pub feature: String,
    /// Cross-validation folds.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Where heads are written (default: the templates folder's heads/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also choose each validator's threshold by nested cross-validation on the head's
    /// out-of-fold scores, and write it into the template's front matter when it measures
    /// better than the current one.
    #[arg(long)]
    pub tune_thresholds: bool,
    /// Report only; write no heads.
    #[arg(long)]
    pub dry_run: bool,
    /// Recompute every message's features instead of reusing cached ones.
    #[arg(long)]
    pub no_cache: bool,
    /// Where features are cached (default: the platform cache folder, aegis/features).
    #[arg(long, env = "AEGIS_FEATURE_CACHE")]
    pub feature_cache: Option<PathBuf>,
    #[command(flatten)]
    pub guard: GuardArgs,
}

pub fn run(args: TrainArgs) -> Result<ExitStatus> {
    let kinds: Vec<FeatureKind> = match args.feature.as_str() {
        "auto" => FeatureKind::ALL.to_vec(),
        other => vec![other.parse().map_err(anyhow::Error::msg)?],
    };
    let mut messages = read_messages(&args.data, &args.exclude_source)?;
    if args.from_reviews {
        let reviewed = reviewed_messages(&args.db)?;
        eprintln!("{} reviewed messages from history", reviewed.len());
        messages.extend(reviewed);
    }
    let guard = args.guard.load()?;
    let keys: Vec<String> = if args.validators.is_empty() {
        guard
            .validators()
            .iter()
            .map(|v| v.key.clone())
            .filter(|key| messages.iter().any(|m| m.label(key).is_some()))
            .collect()
    } else {
        for key in &args.validators {
            if !guard.validators().iter().any(|v| &v.key == key) {
                bail!("no validator template is called {key:?}");
            }
        }
        args.validators.clone()
    };
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
                .unwrap_or_else(default_feature_cache),
        )
    });
    let progress = ProgressBar::new(messages.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("reading messages {bar:40} {pos}/{len}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut usable = Vec::with_capacity(messages.len());
    let mut features: Vec<MessageFeatures> = Vec::with_capacity(messages.len());
    for message in messages {
        match message_features(&guard, &message.text, cache.as_ref()) {
            Ok(f) => {
                features.push(f);
                usable.push(message);
            }
            Err(e) => progress.suspend(|| {
                eprintln!(
                    "skipped {}: {e}",
                    message.id.as_deref().unwrap_or("a message")
                )
            }),
        }
        progress.inc(1);
    }
    progress.finish_and_clear();

    let options = TrainOptions {
        folds: args.folds,
        ..TrainOptions::default()
    };
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| args.guard.prompts_dir().join(HEADS_DIR));
    print_header(&kinds);
    for key in &keys {
        let trained = train_validator(&guard, key, &usable, &features, &kinds, &options)?;
        print_report(&trained, &kinds);
        if args.tune_thresholds {
            tune_threshold(&guard, key, &usable, &trained, &options, args.dry_run)?;
        }
        if !args.dry_run {
            let path = out_dir.join(format!("{key}.json"));
            trained.head.save(&path)?;
            eprintln!(
                "wrote {} ({}, alpha {})",
                path.display(),
                trained.head.feature,
                trained.head.training.alpha
            );
        }
    }
    Ok(ExitStatus::Passed)
}

/// Picks the threshold on the shipped head's out-of-fold probabilities (held out, so the choice
/// is measured honestly) and writes it into the template when it is worth a new version.
fn tune_threshold(
    guard: &aegis_guard::Guard,
    key: &str,
    messages: &[LabelledMessage],
    trained: &ValidatorTraining,
    options: &TrainOptions,
    dry_run: bool,
) -> Result<()> {
    let Some((_, head)) = trained
        .tried
        .iter()
        .find(|(k, _)| *k == trained.head.feature)
    else {
        return Ok(());
    };
    // The same rows, in the same order, as the head was trained on.
    let labels: Vec<bool> = messages.iter().filter_map(|m| m.label(key)).collect();
    let Some(validator) = guard.validators().iter().find(|v| v.key == key) else {
        return Ok(());
    };
    let Some(choice) = aegis_eval::choose_threshold(
        &head.out_of_fold,
        &labels,
        f64::from(validator.threshold),
        options.folds,
    ) else {
        eprintln!("{key}: threshold not tuned (one class only)");
        return Ok(());
    };
    let f1 = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "–".into());
    println!(
        "{key:<18} threshold {:.3} (CV F1 {}) vs tuned {:.3} (nested CV F1 {}): {}",
        choice.current,
        f1(choice.current_f1),
        choice.tuned,
        f1(choice.tuned_f1),
        if choice.keep { "tuned" } else { "kept" }
    );
    if choice.keep && !dry_run {
        // Templates keep three decimals; rounding down keeps the chosen message flagged.
        let written = ((choice.tuned * 1000.0).floor() / 1000.0).max(0.001);
        let content = validator.content_with_threshold(written as f32)?;
        std::fs::write(&validator.path, content)
            .with_context(|| format!("cannot write {}", validator.path.display()))?;
        eprintln!("wrote threshold {written} to {}", validator.path.display());
    }
    Ok(())
}

fn reviewed_messages(db: &DbArgs) -> Result<Vec<LabelledMessage>> {
    let runtime = tokio::runtime::Runtime::new()?;
    let examples = runtime.block_on(async {
        let store = db.open().await?;
        let examples = store.reviewed_examples(&Default::default()).await;
        store.close().await;
        anyhow::Ok(examples?)
    })?;
    Ok(examples.into_iter().map(|e| e.into_labelled()).collect())
}

fn default_feature_cache() -> PathBuf {
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("aegis/features")
}

fn read_messages(files: &[PathBuf], exclude_sources: &[String]) -> Result<Vec<LabelledMessage>> {
    let mut messages = Vec::new();
    for file in files {
        let reader = std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        );
        for (index, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("cannot read {}", file.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let message: LabelledMessage = serde_json::from_str(&line).with_context(|| {
                format!(
                    "{} line {}: not a labelled message ({{\"text\": ..., \"labels\": {{...}}}})",
                    file.display(),
                    index + 1
                )
            })?;
            let excluded = message
                .source
                .as_ref()
                .is_some_and(|s| exclude_sources.contains(s));
            if !excluded && !message.text.trim().is_empty() {
                messages.push(message);
            }
        }
    }
    Ok(messages)
}

fn print_header(kinds: &[FeatureKind]) {
    let mut header = format!(
        "{:<18} {:<4} {:>5} {:>5}  {:>7}",
        "validator", "lang", "rows", "pos", "prompt"
    );
    for kind in kinds {
        header.push_str(&format!("  {:>13}", kind.as_str()));
    }
    header.push_str(&format!(
        "  {:>7}  {:>5} {:>5} {:>5}",
        "chosen", "P", "R", "F1"
    ));
    println!("{header}");
    println!(
        "{:<18} (ROC AUC; 'chosen' is the shipped head, cross-validated; P/R/F1 at 0.5)",
        ""
    );
}

fn auc(m: Option<&CvMetrics>) -> String {
    m.and_then(|m| m.roc_auc)
        .map_or_else(|| "-".to_string(), |a| format!("{a:.3}"))
}

fn print_report(t: &ValidatorTraining, kinds: &[FeatureKind]) {
    let chosen = &t.head.training;
    let languages: Vec<&String> = t.prompt.by_language.keys().collect();
    let all = "all".to_string();
    for language in std::iter::once(&all).chain(languages) {
        let pick = |overall: &CvMetrics, by: &std::collections::BTreeMap<String, CvMetrics>| {
            if language == "all" {
                Some(overall.clone())
            } else {
                by.get(language).cloned()
            }
        };
        let prompt = pick(&t.prompt.overall, &t.prompt.by_language);
        let shipped = pick(&chosen.cv, &chosen.cv_by_language);
        let mut line = format!(
            "{:<18} {:<4} {:>5} {:>5}  {:>7}",
            t.key,
            language,
            prompt.as_ref().map_or(0, |m| m.rows),
            prompt.as_ref().map_or(0, |m| m.positives),
            auc(prompt.as_ref())
        );
        for kind in kinds {
            let tried = t
                .tried
                .iter()
                .find(|(k, _)| k == kind)
                .and_then(|(_, trained)| pick(&trained.cv, &trained.cv_by_language));
            line.push_str(&format!("  {:>13}", auc(tried.as_ref())));
        }
        let (p, r, f1) = shipped
            .as_ref()
            .map_or((0.0, 0.0, 0.0), |m| (m.precision, m.recall, m.f1));
        line.push_str(&format!(
            "  {:>7}  {p:>5.2} {r:>5.2} {f1:>5.2}",
            auc(shipped.as_ref())
        ));
        println!("{line}");
    }
}
