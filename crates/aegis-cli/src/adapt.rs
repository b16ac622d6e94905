//! `aegis adapt`: an adaptation of the encoder's upper layers for the validators jointly (issue
//! "Read who says it"), written where the guard loads it from (`heads/encoder-adapter.safetensors`
//! beside the heads). The heads must be retrained on the adapted encoder afterwards
//! (`scripts/train-heads.sh` does both): they bind to the encoder's content hash, which covers
//! the adapter.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use aegis_adapt::{adapt, AdapterShape, Progress, TrainingOptions, TrainingText};
use aegis_engine::{default_encoder_dir, Projection};
use aegis_teach::AdapterRecord;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::cross_fit::training_text;
use crate::history_cmd::with_store;
use crate::history_cmd::DbArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct AdaptArgs {
    /// Labelled messages, JSONL (the evaluation schema), repeatable.
    #[arg(long, required = true)]
    pub data: Vec<PathBuf>,
    /// Validators whose labels steer the adaptation, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "spam,toxic,harassment,financial_advice"
    )]
    pub validators: Vec<String>,
    /// The templates folder: the adapter is written to its heads/ (see --out).
    #[arg(long, default_value = "prompt_guard")]
    pub prompts: PathBuf,
    /// Write the adapter here instead (only the file: no version is recorded).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
    /// The encoder's sentence-transformers folder (default: where scripts/setup-encoder.sh puts it).
    #[arg(long)]
    pub encoder: Option<PathBuf>,
    /// The first adapted layer, counted from 0; every layer above it is adapted too.
    #[arg(long, default_value_t = 22)]
    pub first_layer: usize,
    #[arg(long, default_value_t = 4)]
    pub rank: usize,
    /// The update is alpha / rank times the low-rank product.
    #[arg(long, default_value_t = 16.0)]
    pub alpha: f64,
    /// Adapted projections: q, k, v, o, gate, up, down.
    #[arg(long, value_delimiter = ',', default_value = "q,k,v,o,gate,up,down")]
    pub projections: Vec<String>,
    #[arg(long, default_value_t = TrainingOptions::default().epochs)]
    pub epochs: usize,
    #[arg(long, default_value_t = TrainingOptions::default().learning_rate)]
    pub learning_rate: f64,
    #[arg(long, default_value_t = TrainingOptions::default().batch_tokens)]
    pub batch_tokens: usize,
    #[arg(long, default_value_t = TrainingOptions::default().seed)]
    pub seed: u64,
    /// Share of the sources held out to choose when to stop (the updates with the lowest loss on
    /// them are kept); 0 trains to the end.
    #[arg(long, default_value_t = TrainingOptions::default().validation_share)]
    pub validation_share: f64,
    /// Measure instead of writing an adapter: train one adapter per fold of K folds of whole
    /// sources, and print what heads on it score on sources it never saw, beside the plain
    /// encoder read the same way (held-out-source ROC AUC by language, the benign budget's
    /// threshold, and the --score files at it).
    #[arg(long, value_name = "K")]
    pub cross_fit: Option<usize>,
    /// With --cross-fit: labelled files only scored, never trained on (held-back kinds, held-out
    /// benign messages), reported by kind and language; repeatable.
    #[arg(long, requires = "cross_fit")]
    pub score: Vec<PathBuf>,
    /// With --cross-fit: the share of benign training rows a threshold may flag.
    #[arg(long, default_value_t = 0.01, requires = "cross_fit")]
    pub benign_budget: f64,
    /// With --cross-fit: write each training row's embedding through the adapter that never saw
    /// its source here, for `aegis train --out-of-fold` to train the heads of an adapter trained
    /// with the same settings on the same data.
    #[arg(long, value_name = "FILE", requires = "cross_fit")]
    pub out_of_fold: Option<PathBuf>,
    /// Progress is also appended here (default: adapt.log in the cache folder, e.g.
    /// ~/.cache/aegis/adapt/).
    #[arg(long)]
    pub log: Option<PathBuf>,
}

pub fn run(args: AdaptArgs) -> Result<ExitStatus> {
    let projections = args
        .projections
        .iter()
        .map(|name| {
            Projection::ALL
                .into_iter()
                .find(|p| p.name() == name.trim())
                .with_context(|| format!("no projection {name:?}: use q, k, v, o, gate, up, down"))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.rank == 0 || args.epochs == 0 {
        bail!("--rank and --epochs must be at least 1");
    }
    let messages = aegis_teach::read_messages(&args.data, &[])?;
    let texts: Vec<TrainingText> = messages
        .iter()
        .map(|m| training_text(m, &args.validators))
        .collect();
    let log_path = match &args.log {
        Some(path) => path.clone(),
        None => {
            let dir = aegis_adapt::cache_folder()
                .unwrap_or_else(|| std::env::temp_dir().join("aegis-adapt"));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.join("adapt.log")
        }
    };
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening the log {}", log_path.display()))?;
    let shape = AdapterShape {
        first_layer: args.first_layer,
        rank: args.rank,
        alpha: args.alpha,
        projections,
    };
    let options = TrainingOptions {
        epochs: args.epochs,
        learning_rate: args.learning_rate,
        batch_tokens: args.batch_tokens,
        seed: args.seed,
        validation_share: args.validation_share,
        ..TrainingOptions::default()
    };
    let folder = args.encoder.clone().unwrap_or_else(default_encoder_dir);
    let started = Instant::now();
    let mut say = |line: String| {
        eprintln!("{line}");
        let _ = writeln!(log, "{line}");
    };
    if let Some(folds) = args.cross_fit {
        let scored = crate::cross_fit::ScoredFiles::read(&args.score)?;
        let run = crate::cross_fit::CrossFitRun {
            folder: &folder,
            validators: &args.validators,
            shape,
            options,
            folds,
            benign_budget: args.benign_budget,
            out_of_fold: args
                .out_of_fold
                .as_deref()
                .map(|path| (path, settings(&args, &texts).to_string())),
        };
        crate::cross_fit::run(&run, &messages, &scored, &mut say)?;
        say(format!(
            "cross-fitted in {:.0} s",
            started.elapsed().as_secs_f64()
        ));
        return Ok(ExitStatus::Passed);
    }
    say(format!(
        "adapting the layers from {} up (rank {}, alpha {}) on {} texts from {} files; log {}",
        shape.first_layer,
        shape.rank,
        shape.alpha,
        texts.len(),
        args.data.len(),
        log_path.display()
    ));
    let mut last_report = Instant::now();
    let (adapter, report) = adapt(
        &folder,
        &texts,
        args.validators.len(),
        shape,
        &options,
        |p| {
            let due = last_report.elapsed().as_secs() >= 10;
            match p {
                Progress::States { done, total } if due || done == total => {
                    last_report = Instant::now();
                    say(format!("reading lower-layer states: {done}/{total}"));
                }
                Progress::Step(step) if due || step.step == step.steps => {
                    last_report = Instant::now();
                    let per_step = step.elapsed.as_secs_f64() / step.step as f64;
                    let left = per_step * (step.steps - step.step) as f64;
                    say(format!(
                        "epoch {} step {}/{}: loss {:.4}, {:.0} s so far, about {:.0} s left",
                        step.epoch,
                        step.step,
                        step.steps,
                        step.loss,
                        step.elapsed.as_secs_f64(),
                        left
                    ));
                }
                _ => {}
            }
        },
    )?;
    let bytes = adapter.to_bytes()?;
    let written = match &args.out {
        Some(out) => {
            aegis_files::write_atomically(out, &bytes)
                .with_context(|| format!("writing {}", out.display()))?;
            format!("wrote {}", out.display())
        }
        None => {
            let record = AdapterRecord {
                data_sha256: data_sha256(&texts),
                metrics: {
                    let mut metrics = settings(&args, &texts);
                    metrics["texts"] = report.texts.into();
                    metrics["validation_losses"] = serde_json::json!(report.validation_losses);
                    metrics["kept_step"] = report.kept_step.into();
                    metrics["epoch_losses"] = serde_json::json!(report.epoch_losses);
                    metrics["seconds"] = report.elapsed.as_secs().into();
                    metrics
                }
                .to_string(),
                note: format!("aegis adapt on {} files", args.data.len()),
                applied_by: args.db.actor(),
            };
            let prompts = args.prompts.clone();
            let applied = with_store(&args.db, |store| async move {
                Ok(aegis_teach::apply_adapter(&store, &prompts, &bytes, &record).await?)
            })?;
            format!(
                "applied {} as version {} (retrain the heads on it: scripts/train-heads.sh)",
                applied.path.display(),
                applied.version
            )
        }
    };
    say(format!(
        "{written}: {} texts trained on, {} held out to stop on ({} left out), {} steps, kept step {} \
         (validation loss {:?}), loss by epoch {:?}, {:.0} s in all",
        report.texts,
        report.validation_texts,
        report.left_out,
        report.steps,
        report.kept_step,
        report
            .validation_losses
            .iter()
            .map(|(step, loss)| format!("{step}: {loss:.4}"))
            .collect::<Vec<_>>(),
        report
            .epoch_losses
            .iter()
            .map(|l| format!("{l:.4}"))
            .collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    ));
    Ok(ExitStatus::Passed)
}

/// What decides the adapter's bytes: its shape, the training settings and the data's hash.
fn settings(args: &AdaptArgs, texts: &[TrainingText]) -> serde_json::Value {
    serde_json::json!({
        "first_layer": args.first_layer,
        "rank": args.rank,
        "alpha": args.alpha,
        "projections": args.projections,
        "epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "batch_tokens": args.batch_tokens,
        "seed": args.seed,
        "validation_share": args.validation_share,
        "data_sha256": data_sha256(texts),
    })
}

/// Hash of the texts and labels trained on, in order: two adapters with the same data hash and
/// settings are the same adapter.
fn data_sha256(texts: &[TrainingText]) -> String {
    let mut digest = Sha256::new();
    for text in texts {
        digest.update((text.text.len() as u64).to_le_bytes());
        digest.update(text.text.as_bytes());
        for label in &text.labels {
            digest.update([match label {
                None => 0u8,
                Some(false) => 1,
                Some(true) => 2,
            }]);
        }
    }
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
