//! `aegis examples` and `aegis heads`: the labelled examples a validator is taught with, and the
//! versions of its head, kept in the history database beside the verdicts.

use std::path::{Path, PathBuf};

use aegis_guard::{LabelledMessage, Language};
use aegis_heads::Head;
use aegis_store::{Added, ExampleOrigin, NewExample, Store};
use anyhow::{bail, Context, Result};

use crate::history_cmd::DbArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct ExamplesArgs {
    #[command(subcommand)]
    pub command: ExamplesCommand,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ExamplesCommand {
    /// Teach a validator one text: `--fail` if it violates the policy, `--pass` if not.
    Add {
        validator: String,
        text: String,
        #[arg(long, conflicts_with = "pass", required_unless_present = "pass")]
        fail: bool,
        #[arg(long)]
        pass: bool,
        /// The text's language (`id`, `en`; detected when left out).
        #[arg(long)]
        lang: Option<String>,
    },
    /// List examples, with their ids, labels, contradictions and proposals awaiting review.
    List {
        validator: Option<String>,
        #[arg(long)]
        json: bool,
        /// Only proposals from /feedback that no reviewer has accepted yet.
        #[arg(long)]
        pending: bool,
    },
    /// Accept proposed examples (from /feedback) by id, so training uses them.
    Accept {
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Add every label of a labelled JSONL file (the evaluation schema) as examples.
    Import {
        file: PathBuf,
        /// Only this validator's labels.
        #[arg(long)]
        validator: Option<String>,
    },
    /// Remove examples by id.
    Remove {
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Debug, clap::Args)]
pub struct HeadsArgs {
    #[command(subcommand)]
    pub command: HeadsCommand,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum HeadsCommand {
    /// A validator's applied heads, newest first, with their figures.
    Versions {
        validator: String,
        #[arg(long)]
        json: bool,
    },
    /// Put an earlier version back, byte for byte, and record that as the newest.
    Revert {
        id: i64,
        /// The templates folder whose heads/ receives it (default: as `aegis check` finds it).
        #[arg(long)]
        prompts: Option<PathBuf>,
    },
}

/// An error naming the example ids that were not there, if any.
fn all_found(missing: &[i64]) -> Result<()> {
    if missing.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = missing.iter().map(i64::to_string).collect();
    bail!("no example with id {}", ids.join(", "))
}

pub fn run_examples(args: ExamplesArgs) -> Result<ExitStatus> {
    with_store(&args.db, |store| async move {
        match args.command {
            ExamplesCommand::Add {
                validator,
                text,
                fail,
                pass: _,
                lang,
            } => {
                let language = lang.unwrap_or_else(|| Language::detect(&text).code().to_string());
                let added = store
                    .add_example(&NewExample {
                        validator,
                        text,
                        violates: fail,
                        language,
                        origin: ExampleOrigin::Manual,
                        verdict_id: None,
                        submitted_by: None,
                    })
                    .await?;
                match added {
                    Added::New { id } => println!("added example {id}"),
                    Added::Merged { id } => {
                        println!("already there: counted again as example {id}")
                    }
                }
            }
            ExamplesCommand::List {
                validator,
                json,
                pending,
            } => {
                let mut examples = store.examples(validator.as_deref()).await?;
                if pending {
                    examples.retain(|e| e.pending);
                }
                if json {
                    println!("{}", serde_json::to_string_pretty(&examples)?);
                } else {
                    for e in &examples {
                        let proposed = match (&e.submitted_by, e.pending) {
                            (Some(by), true) => format!("  PENDING from {by}"),
                            (None, true) => "  PENDING".to_string(),
                            _ => String::new(),
                        };
                        println!(
                            "{:>6}  {:<18} {}  {:<2}  {:<8}{}{}  {}",
                            e.id,
                            e.validator,
                            if e.violates { "fail" } else { "pass" },
                            e.language,
                            e.origin.as_str(),
                            if e.contradicted { "  CONTRADICTED" } else { "" },
                            proposed,
                            e.text.replace('\n', " ")
                        );
                    }
                    let contradicted = examples.iter().filter(|e| e.contradicted).count();
                    let pending = examples.iter().filter(|e| e.pending).count();
                    eprintln!(
                        "{} examples, {contradicted} contradicted, {pending} pending review \
                         (not trained on until accepted: aegis examples accept ID)",
                        examples.len()
                    );
                }
            }
            ExamplesCommand::Import { file, validator } => {
                let (new, merged) = import_file(&store, &file, validator.as_deref()).await?;
                println!("{new} new examples, {merged} merged into ones already there");
            }
            ExamplesCommand::Remove { ids } => {
                let mut missing = Vec::new();
                for id in ids {
                    if !store.remove_example(id).await? {
                        missing.push(id);
                    }
                }
                all_found(&missing)?;
            }
            ExamplesCommand::Accept { ids } => {
                let mut missing = Vec::new();
                for &id in &ids {
                    if !store.accept_example(id).await? {
                        missing.push(id);
                    }
                }
                all_found(&missing)?;
                println!("{} accepted: the next training uses them", ids.len());
            }
        }
        Ok(ExitStatus::Passed)
    })
}

async fn import_file(store: &Store, file: &Path, only: Option<&str>) -> Result<(usize, usize)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // Every line is checked before any is added: a bad file adds nothing.
    let mut examples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let message: LabelledMessage = serde_json::from_str(line).with_context(|| {
            format!(
                "{} line {}: not a labelled message ({{\"text\": ..., \"labels\": {{...}}}})",
                file.display(),
                index + 1
            )
        })?;
        for (key, label) in &message.labels {
            let Some(violates) = label else { continue };
            if only.is_some_and(|only| only != key) {
                continue;
            }
            examples.push(NewExample {
                validator: key.clone(),
                text: message.text.clone(),
                violates: *violates,
                language: message.language(),
                origin: ExampleOrigin::Import,
                verdict_id: None,
                submitted_by: None,
            });
        }
    }
    let (mut new, mut merged) = (0, 0);
    for example in &examples {
        match store.add_example(example).await? {
            Added::New { .. } => new += 1,
            Added::Merged { .. } => merged += 1,
        }
    }
    Ok((new, merged))
}

pub fn run_heads(args: HeadsArgs) -> Result<ExitStatus> {
    with_store(&args.db, |store| async move {
        match args.command {
            HeadsCommand::Versions { validator, json } => {
                let versions = store.head_versions(&validator).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&versions)?);
                } else if versions.is_empty() {
                    eprintln!("no head of {validator} was applied through this history");
                } else {
                    for v in &versions {
                        println!(
                            "{:>5}  {}  {}  {}  {}",
                            v.id,
                            aegis_store::format_millis(v.applied_at),
                            &v.content_hash[..12],
                            summary(&v.metrics),
                            v.note
                        );
                    }
                }
            }
            HeadsCommand::Revert { id, prompts } => {
                if store.head_version(id).await?.is_none() {
                    bail!("no head version {id}: `aegis heads versions VALIDATOR` lists them");
                }
                let prompts = aegis_guard::find_prompts_dir(prompts.as_deref(), None)?;
                let validators = aegis_guard::load_validators(&prompts)?.validators;
                let applied = aegis_teach::revert_head(&store, &prompts, &validators, id).await?;
                println!(
                    "{} is version {id} again, recorded as version {}",
                    applied.path.display(),
                    applied.version
                );
                if let Some(threshold) = applied.threshold {
                    println!("threshold {threshold:.3} written back into its template");
                }
            }
        }
        Ok(ExitStatus::Passed)
    })
}

/// Records a head just written as the validator's newest version.
pub fn record_head_version(db: &DbArgs, head: &Head, note: &str) -> Result<i64> {
    let content = head.to_bytes()?;
    with_store(db, |store| async move {
        Ok(aegis_teach::record_head_version(&store, head, content, note).await?)
    })
}

/// The figures a version line shows: held-out ROC AUC and its threshold.
fn summary(metrics: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(metrics).unwrap_or_default();
    let auc = value["cv"]["roc_auc"]
        .as_f64()
        .map_or("-".into(), |a| format!("{a:.3}"));
    let threshold = value["threshold"]
        .as_f64()
        .map_or("-".into(), |t| format!("{t:.3}"));
    format!(
        "ROC AUC {auc} ({}), threshold {threshold}",
        value["validation"].as_str().unwrap_or("?")
    )
}

fn with_store<T, F, Fut>(db: &DbArgs, work: F) -> Result<T>
where
    F: FnOnce(std::sync::Arc<Store>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let store = std::sync::Arc::new(db.open().await?);
        let result = work(store.clone()).await;
        if let Ok(store) = std::sync::Arc::try_unwrap(store) {
            store.close().await;
        }
        result
    })
}
