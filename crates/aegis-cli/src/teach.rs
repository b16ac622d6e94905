//! `aegis examples` and `aegis heads`: the labelled examples a validator is taught with, and the
//! versions of its head, kept in the history database beside the verdicts.

use std::path::{Path, PathBuf};

use aegis_guard::Language;
use aegis_heads::Head;
use aegis_store::{Added, ExampleOrigin, NewExample, Store};
use anyhow::{bail, Context, Result};

use crate::history_cmd::{with_store, DbArgs};
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
        /// The text is a message `aegis examples suggest` chose: the default line is drawn on
        /// the author's other examples, since suggestions are chosen hard.
        #[arg(long)]
        suggested: bool,
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
        /// The file's messages are ones `aegis examples suggest` chose: the default line is
        /// drawn on the author's other examples, since suggestions are chosen hard.
        #[arg(long)]
        suggested: bool,
    },
    /// The messages to label next for a validator (active learning): those its current head is
    /// least sure of and the highest-scoring ones no label has confirmed, alternating. Label
    /// them with `aegis examples add --suggested` (or `import --suggested`), then train again.
    Suggest {
        validator: String,
        /// Candidates: a file of messages (CSV, JSONL, text; repeatable). Default: the messages
        /// in history.
        #[arg(long = "from")]
        from: Vec<PathBuf>,
        /// How many to suggest.
        #[arg(long, short = 'n', default_value_t = 20)]
        n: usize,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        guard: Box<crate::options::GuardArgs>,
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
        #[command(flatten)]
        prompts: PromptsArg,
    },
    /// Make a head file live (one `aegis train --out` wrote, or one trained elsewhere): written
    /// where the guard reads it, its threshold into the template, recorded as the newest version.
    Apply {
        file: PathBuf,
        /// The note the version keeps.
        #[arg(long, default_value = "aegis heads apply")]
        note: String,
        #[command(flatten)]
        prompts: PromptsArg,
    },
    /// Put an earlier version back, byte for byte, and record that as the newest.
    Revert {
        id: i64,
        #[command(flatten)]
        prompts: PromptsArg,
    },
    /// Record in each head on the local encoder that lacks one the encoder's fingerprint (its
    /// embeddings of fixed probe texts), so an `--encoder-server` can be checked against it;
    /// `aegis train` records it for new heads. Applied as a new version of each head.
    Fingerprint {
        #[command(flatten)]
        prompts: PromptsArg,
    },
}

#[derive(Debug, clap::Args)]
pub struct PromptsArg {
    /// The templates folder whose heads/ it concerns (default: as `aegis check` finds it).
    #[arg(long)]
    prompts: Option<PathBuf>,
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
    // Suggesting loads the guard, which opens the store itself when it must finish an apply.
    let command = match args.command {
        ExamplesCommand::Suggest {
            validator,
            from,
            n,
            json,
            guard,
        } => return suggest(&args.db, &validator, &from, n, json, &guard),
        command => command,
    };
    let actor = args.db.actor();
    with_store(&args.db, |store| async move {
        match command {
            ExamplesCommand::Suggest { .. } => unreachable!("answered before the store opens"),
            ExamplesCommand::Add {
                validator,
                text,
                fail,
                pass: _,
                lang,
                suggested,
            } => {
                let language = lang.unwrap_or_else(|| Language::detect(&text).code().to_string());
                let trained_at_once = store.may_teach(&actor).await?;
                let added = store
                    .add_example(
                        &actor,
                        &NewExample {
                            validator,
                            text,
                            violates: fail,
                            language,
                            origin: origin(suggested, ExampleOrigin::Manual),
                            verdict_id: None,
                            submitted_by: None,
                        },
                    )
                    .await?;
                match added {
                    Added::New { id } => println!("added example {id}"),
                    Added::Merged { id } => {
                        println!("already there: counted again as example {id}")
                    }
                }
                if !trained_at_once {
                    println!(
                        "proposed, as {actor} is a reviewer: trained on once an author accepts it"
                    );
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
            ExamplesCommand::Import {
                file,
                validator,
                suggested,
            } => {
                let (new, merged) = import_file(
                    &store,
                    &actor,
                    &file,
                    validator.as_deref(),
                    origin(suggested, ExampleOrigin::Import),
                )
                .await?;
                println!("{new} new examples, {merged} merged into ones already there");
            }
            ExamplesCommand::Remove { ids } => {
                let mut missing = Vec::new();
                for id in ids {
                    if !store.remove_example(&actor, id).await? {
                        missing.push(id);
                    }
                }
                all_found(&missing)?;
            }
            ExamplesCommand::Accept { ids } => {
                let mut missing = Vec::new();
                for &id in &ids {
                    if !store.accept_example(&actor, id).await? {
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

/// Where an example came from: a suggestion when the author says so, else `otherwise`.
fn origin(suggested: bool, otherwise: ExampleOrigin) -> ExampleOrigin {
    if suggested {
        ExampleOrigin::Suggestion
    } else {
        otherwise
    }
}

async fn import_file(
    store: &Store,
    actor: &str,
    file: &Path,
    only: Option<&str>,
    origin: ExampleOrigin,
) -> Result<(usize, usize)> {
    // Every row is checked before any is added: a bad file adds nothing. Read as `aegis eval`
    // and `aegis train` read labelled files, JSONL or CSV.
    let rows = aegis_eval::Dataset::load(file)?.rows;
    let mut examples = Vec::new();
    for aegis_eval::DatasetRow { message, .. } in rows {
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
                origin,
                verdict_id: None,
                submitted_by: None,
            });
        }
    }
    let (mut new, mut merged) = (0, 0);
    for example in &examples {
        match store.add_example(actor, example).await? {
            Added::New { .. } => new += 1,
            Added::Merged { .. } => merged += 1,
        }
    }
    Ok((new, merged))
}

pub fn run_heads(args: HeadsArgs) -> Result<ExitStatus> {
    let actor = args.db.actor();
    with_store(&args.db, |store| async move {
        let prompts = match &args.command {
            HeadsCommand::Versions { prompts, .. }
            | HeadsCommand::Apply { prompts, .. }
            | HeadsCommand::Revert { prompts, .. }
            | HeadsCommand::Fingerprint { prompts } => prompts.prompts.as_deref(),
        };
        // Listing needs no templates folder, so only a named one that is missing is an error.
        let prompts = match (aegis_guard::find_prompts_dir(prompts, None), &args.command) {
            (Ok(dir), _) => Some(dir),
            (Err(_), HeadsCommand::Versions { .. }) if prompts.is_none() => None,
            (Err(e), _) => return Err(e.into()),
        };
        if let Some(prompts) = &prompts {
            crate::options::report_finished(
                &aegis_teach::finish_interrupted_applies(&store, &actor, prompts).await?,
            );
        }
        match args.command {
            HeadsCommand::Versions {
                validator, json, ..
            } => print_versions(&store, &validator, json).await?,
            HeadsCommand::Apply { file, note, .. } => {
                let prompts = prompts.context("no templates folder")?;
                let bytes = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                let head = Head::from_bytes(&bytes, &file)?;
                let validators = aegis_guard::load_validators(&prompts)?.validators;
                let validator = validators.iter().find(|v| v.key == head.validator);
                if validator.is_none() {
                    bail!(
                        "{} is a head for {:?}, which has no template in {}",
                        file.display(),
                        head.validator,
                        prompts.display()
                    );
                }
                let applied =
                    aegis_teach::apply_head(&store, &actor, &prompts, validator, &head, &note)
                        .await?;
                print_applied(&applied, &format!("{} applied", applied.path.display()));
            }
            HeadsCommand::Revert { id, .. } => {
                let prompts = prompts.context("no templates folder")?;
                if store.head_version(id).await?.is_none() {
                    bail!("no head version {id}: `aegis heads versions VALIDATOR` lists them");
                }
                let validators = aegis_guard::load_validators(&prompts)?.validators;
                let applied =
                    aegis_teach::revert_head(&store, &actor, &prompts, &validators, id).await?;
                print_applied(
                    &applied,
                    &format!("{} is version {id} again", applied.path.display()),
                );
            }
            HeadsCommand::Fingerprint { .. } => {
                let prompts = prompts.context("no templates folder")?;
                record_fingerprints(&store, &actor, &prompts).await?;
            }
        }
        Ok(ExitStatus::Passed)
    })
}

/// `aegis heads fingerprint`: the local encoder's fingerprint into each head trained on exactly
/// its weights that has none.
async fn record_fingerprints(store: &Store, actor: &str, prompts: &std::path::Path) -> Result<()> {
    let setup = aegis_runtime::GuardSetup {
        model: aegis_runtime::ModelSource::Local(aegis_engine::ModelRequest::new("default")),
        heads_read: aegis_runtime::HeadsRead::parse(aegis_runtime::DEFAULT_HEADS_READ)?,
        // The fingerprint is what the heads' own encoder gives: never a quantized one.
        encoder_arithmetic: aegis_engine::EncoderArithmetic::Precise,
        prompts: prompts.to_path_buf(),
        rejection: aegis_guard::RejectionMode::chosen(false),
        language: None,
    };
    let encoder = setup.load_encoder()?.context("no encoder")?;
    let fingerprint = aegis_guard::encoder_fingerprint(encoder.as_ref())?;
    let validators = aegis_guard::load_validators(prompts)?.validators;
    for validator in &validators {
        let path = aegis_guard::head_path(prompts, &validator.key, true);
        let Ok(mut head) = Head::load(&path) else {
            continue;
        };
        if head.model.fingerprint.is_some() {
            println!("{}: has a fingerprint", validator.key);
        } else if head.model.content_hash != encoder.info().content_hash {
            println!(
                "{}: trained on other encoder weights ({}); retrain it instead",
                validator.key, head.model.content_hash
            );
        } else {
            head.model.fingerprint = Some(fingerprint.clone());
            let applied = aegis_teach::apply_head(
                store,
                actor,
                prompts,
                Some(validator),
                &head,
                "encoder fingerprint recorded",
            )
            .await?;
            print_applied(
                &applied,
                &format!("{}: fingerprint recorded", validator.key),
            );
        }
    }
    Ok(())
}

async fn print_versions(store: &Store, validator: &str, json: bool) -> Result<()> {
    let versions = store.head_versions(validator).await?;
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
    Ok(())
}

fn print_applied(applied: &aegis_teach::Applied, what: &str) {
    println!("{what}, recorded as version {}", applied.version);
    if let Some(threshold) = applied.threshold {
        println!("threshold {threshold:.3} written into its template");
    }
    if !applied.kept_readings.is_empty() {
        println!("{}", kept_readings_line(applied));
    }
}

/// Says that a head came without readings and kept the replaced head's.
pub fn kept_readings_line(applied: &aegis_teach::Applied) -> String {
    format!(
        "kept the replaced head's readings ({}), moved to its threshold: train with --reading to replace them",
        applied.kept_readings.join(", ")
    )
}

/// `aegis examples suggest`: the pool scored by the validator's current head.
fn suggest(
    db: &DbArgs,
    key: &str,
    from: &[PathBuf],
    wanted: usize,
    json: bool,
    guard_args: &crate::options::GuardArgs,
) -> Result<ExitStatus> {
    let mut pool: Vec<(String, String)> = Vec::new();
    for path in from {
        pool.extend(aegis_import::MessageFile::read(path, None)?.texts_from());
    }
    let prompts = guard_args.prompts_dir()?;
    let with_history = from.is_empty();
    let pool = with_store(db, |store| async move {
        Ok(aegis_teach::suggestion_pool(&store, &prompts, key, pool, with_history).await?)
    })?;
    anyhow::ensure!(
        !pool.is_empty(),
        "no messages to choose from: give --from FILE, or check some messages first"
    );
    let guard = guard_args.load(db)?;
    let cache = aegis_guard::FeatureCache::new(aegis_teach::feature_cache_dir());
    let report = |_: &str, _: usize, _: usize| {};
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let progress = aegis_teach::Progress {
        report: &report,
        cancel: &cancel,
    };
    let suggestions = aegis_teach::suggest(
        &guard,
        aegis_teach::SuggestRequest {
            key,
            pool,
            cache: Some(&cache),
            wanted,
            head: None,
        },
        &progress,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&suggestions)?);
    } else {
        for s in &suggestions {
            let why = match s.reason {
                aegis_teach::SuggestionReason::Unsure => "unsure",
                aegis_teach::SuggestionReason::HighestUnlabelled => "high",
                aegis_teach::SuggestionReason::NearYourExamples => "alike",
            };
            println!("{:.3}  {why:<6}  {}", s.score, s.text.replace('\n', " "));
        }
        eprintln!("label them: aegis examples add {key} TEXT --suggested --fail (or --pass); then train again");
    }
    Ok(ExitStatus::Passed)
}

/// Makes `head` live in `prompts` as the validator's newest version, with its threshold.
pub fn apply_head(
    db: &DbArgs,
    prompts: &Path,
    validator: Option<&aegis_guard::Validator>,
    head: &Head,
    note: &str,
) -> Result<aegis_teach::Applied> {
    let actor = db.actor();
    with_store(db, |store| async move {
        Ok(aegis_teach::apply_head(&store, &actor, prompts, validator, head, note).await?)
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
