//! `aegis eval`: the guard against a labelled set, per validator and language; runs are kept in
//! the history database so thresholds can be moved and runs compared without the model.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use aegis_eval::{
    compare, metric_text, render_html, run_info, score_rows, Comparison, Dataset, EvalReport,
    Sample, ScoredRow, METRIC_COLUMNS,
};
use aegis_store::Store;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Labelled messages: JSONL in the evaluation schema ({"text", "lang", "labels": {"spam":
    /// true|false|null, ...}}) or CSV with a text column and one label column per validator.
    pub dataset: Option<PathBuf>,
    /// Evaluate at most this many rows (the first ones, or a random sample with --seed).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Draw the --limit rows at random, reproducibly, with this seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Also run the templates in this folder, or take stored run N ("run:N"), and list the
    /// messages whose verdict flipped between it (the baseline) and this run.
    #[arg(long, value_name = "DIR|run:N")]
    pub compare: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Do not keep the run in the history database.
    #[arg(long)]
    pub no_store: bool,
    #[command(flatten)]
    pub guard: GuardArgs,
}

#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML report (curves, histograms, worst errors) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Measure at this threshold instead of the template's, e.g. --threshold toxic=0.35
    /// (repeatable); scores are not recomputed.
    #[arg(long = "threshold", value_name = "KEY=VALUE")]
    pub thresholds: Vec<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// Stored runs, newest first, with each validator's F1 and ROC AUC.
    Runs {
        #[arg(long, default_value_t = 20)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// A stored run's report, at its own thresholds or new ones (no model needed).
    Show {
        run: i64,
        /// Compare with another stored run of the same data (the baseline).
        #[arg(long, value_name = "RUN")]
        compare: Option<i64>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a stored run.
    Delete { run: i64 },
}

pub fn run(args: EvalArgs) -> Result<ExitStatus> {
    match args.command {
        Some(command) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(stored(command, &args.db))
        }
        None => evaluate(args.run, &args.db),
    }
}

fn evaluate(args: RunArgs, db: &DbArgs) -> Result<ExitStatus> {
    let Some(path) = &args.dataset else {
        bail!("name a dataset to evaluate (JSONL or CSV), or use `aegis eval runs` / `aegis eval show RUN`");
    };
    if args.seed.is_some() && args.limit.is_none() {
        bail!("--seed draws a sample of --limit rows; add --limit N");
    }
    let thresholds = parse_thresholds(&args.output.thresholds)?;
    let dataset = Dataset::load(path)?.sampled(Sample {
        limit: args.limit,
        seed: args.seed,
    });
    let guard = args.guard.load(db)?;
    let unknown: Vec<String> = dataset
        .labelled_keys()
        .into_iter()
        .filter(|k| guard.validator(k).is_none())
        .collect();
    if !unknown.is_empty() {
        eprintln!(
            "warning: the dataset labels {} but no template has that key; those labels are ignored",
            unknown.join(", ")
        );
    }
    let prompts = args.guard.prompts_dir()?;
    let info = run_info(&guard, &dataset, &prompts.display().to_string());
    let rows = score_with_progress(&guard, &dataset, "")?;
    let report = EvalReport::build(&info, &rows, &thresholds);

    let runtime = tokio::runtime::Runtime::new()?;
    let store = if args.no_store {
        None
    } else {
        Some(runtime.block_on(db.open())?)
    };
    // Stored at the templates' own thresholds: a --threshold is a view, not part of the run.
    let run_id = match &store {
        Some(store) => Some(runtime.block_on(
            store.save_eval_run(&EvalReport::build(&info, &rows, &BTreeMap::new()), &rows),
        )?),
        None => None,
    };

    let comparison = match args.compare.as_deref() {
        None => None,
        Some(target) => {
            let (baseline, baseline_rows) = match target.strip_prefix("run:") {
                Some(id) => {
                    let id: i64 = id
                        .parse()
                        .with_context(|| format!("{target:?}: run:N takes a run number"))?;
                    let store = store
                        .as_ref()
                        .context("--compare run:N reads stored runs; drop --no-store")?;
                    let stored = runtime
                        .block_on(store.eval_run(id))?
                        .with_context(|| format!("no stored evaluation run {id}"))?;
                    (
                        EvalReport::build(&stored.info, &stored.rows, &thresholds),
                        stored.rows,
                    )
                }
                None => {
                    let dir = PathBuf::from(target);
                    let other = args.guard.guard_on(Arc::clone(guard.model()), &dir)?;
                    let other_info = run_info(&other, &dataset, &dir.display().to_string());
                    let other_rows = score_with_progress(&other, &dataset, "baseline ")?;
                    if let Some(store) = &store {
                        runtime.block_on(store.save_eval_run(
                            &EvalReport::build(&other_info, &other_rows, &BTreeMap::new()),
                            &other_rows,
                        ))?;
                    }
                    (
                        EvalReport::build(&other_info, &other_rows, &thresholds),
                        other_rows,
                    )
                }
            };
            Some(compare((&baseline, &baseline_rows), (&report, &rows))?)
        }
    };
    if let Some(store) = store {
        runtime.block_on(store.close());
    }
    output(&report, comparison.as_ref(), run_id, &args.output)
}

fn score_with_progress(
    guard: &aegis_guard::Guard,
    dataset: &Dataset,
    what: &str,
) -> Result<Vec<ScoredRow>> {
    let progress = ProgressBar::new(dataset.rows.len() as u64);
    progress.set_style(
        ProgressStyle::with_template(&format!(
            "{what}{{bar:40}} {{pos}}/{{len}} messages  {{per_sec}}  ETA {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let rows = score_rows(
        guard,
        dataset,
        &mut |done, _| progress.set_position(done as u64),
        None,
    )
    .context("evaluation cancelled")?;
    progress.finish_and_clear();
    Ok(rows)
}

async fn stored(command: EvalCommand, db: &DbArgs) -> Result<ExitStatus> {
    let store = db.open().await?;
    let result = stored_command(&store, command).await;
    store.close().await;
    result
}

async fn stored_command(store: &Store, command: EvalCommand) -> Result<ExitStatus> {
    match command {
        EvalCommand::Runs { limit, json } => {
            let runs = store.eval_runs(limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
                return Ok(ExitStatus::Passed);
            }
            if runs.is_empty() {
                println!("no evaluation runs yet: `aegis eval DATASET` makes one");
            }
            for run in runs {
                let metrics: Vec<String> = run
                    .metrics
                    .iter()
                    .map(|m| {
                        format!(
                            "{} F1 {} AUC {}",
                            m.key,
                            metric_text(m.overall.f1),
                            metric_text(m.overall.roc_auc)
                        )
                    })
                    .collect();
                println!(
                    "run {:<4} {}  {} ({} rows)  templates {}  {}",
                    run.id,
                    aegis_store::format_millis(run.created_at),
                    run.info.dataset.name,
                    run.rows,
                    run.info.templates_from,
                    metrics.join(" · ")
                );
            }
        }
        EvalCommand::Show {
            run,
            compare: baseline,
            output: out,
        } => {
            let thresholds = parse_thresholds(&out.thresholds)?;
            let stored = store
                .eval_run(run)
                .await?
                .with_context(|| format!("no stored evaluation run {run}"))?;
            let report = EvalReport::build(&stored.info, &stored.rows, &thresholds);
            let comparison = match baseline {
                None => None,
                Some(id) => {
                    let base = store
                        .eval_run(id)
                        .await?
                        .with_context(|| format!("no stored evaluation run {id}"))?;
                    let base_report = EvalReport::build(&base.info, &base.rows, &thresholds);
                    Some(compare(
                        (&base_report, &base.rows),
                        (&report, &stored.rows),
                    )?)
                }
            };
            return output(&report, comparison.as_ref(), Some(run), &out);
        }
        EvalCommand::Delete { run } => {
            if !store.delete_eval_run(run).await? {
                bail!("no stored evaluation run {run}");
            }
            eprintln!("deleted evaluation run {run}");
        }
    }
    Ok(ExitStatus::Passed)
}

fn parse_thresholds(pairs: &[String]) -> Result<BTreeMap<String, f64>> {
    pairs
        .iter()
        .map(|pair| {
            let (key, value) = pair.split_once('=').with_context(|| {
                format!("--threshold {pair:?}: write KEY=VALUE, e.g. toxic=0.4")
            })?;
            let value: f64 = value
                .trim()
                .parse()
                .with_context(|| format!("--threshold {pair:?}: {value:?} is not a number"))?;
            if !(0.0..=1.0).contains(&value) {
                bail!("--threshold {pair:?}: a threshold is between 0 and 1");
            }
            Ok((key.trim().to_string(), value))
        })
        .collect()
}

fn output(
    report: &EvalReport,
    comparison: Option<&Comparison>,
    run_id: Option<i64>,
    out: &OutputArgs,
) -> Result<ExitStatus> {
    if let Some(path) = &out.html {
        aegis_files::write_atomically(path, render_html(report, comparison).as_bytes())?;
        eprintln!("wrote the HTML report to {}", path.display());
    }
    if out.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "run_id": run_id,
                "report": report,
                "comparison": comparison,
            }))?
        );
    } else {
        print_report(report);
        if let Some(c) = comparison {
            print_comparison(c);
        }
        if let Some(id) = run_id {
            println!(
                "\nStored as run {id}: `aegis eval show {id} --threshold KEY=VALUE` re-measures at another threshold."
            );
        }
    }
    Ok(ExitStatus::Passed)
}

fn print_report(report: &EvalReport) {
    let d = &report.info.dataset;
    println!(
        "{}: {} of {} rows, model {}, templates from {}",
        d.name, report.rows, d.file_rows, report.info.model.id, report.info.templates_from
    );
    if !report.errors.is_empty() {
        println!(
            "{} rows got no verdict (first: row {}: {})",
            report.errors.len(),
            report.errors[0].row,
            report.errors[0].message
        );
    }
    let mut table = vec![["validator", "lang"]
        .into_iter()
        .chain(METRIC_COLUMNS)
        .map(String::from)
        .collect::<Vec<_>>()];
    for v in &report.validators {
        let languages = std::iter::once(("all", &v.overall))
            .chain(v.by_language.iter().map(|(lang, m)| (lang.as_str(), m)));
        for (lang, m) in languages {
            let labels = [v.key.clone(), lang.to_string()];
            table.push(labels.into_iter().chain(m.cells()).collect());
        }
    }
    println!();
    print_table(&table);
    if report.benign.rows > 0 {
        let line = |what: &str, b: &aegis_eval::BenignRate| {
            println!(
                "{what:<24} {} of {} benign rows flagged ({})",
                b.flagged,
                b.rows,
                metric_text(b.rate)
            );
        };
        println!("\nbenign false-positive rate (rows whose every label is false):");
        for v in &report.validators {
            line(&v.key, &v.benign);
        }
        line("any validator", &report.benign);
    }
}

fn print_comparison(c: &Comparison) {
    println!("\nCompared with {} (baseline):", c.baseline);
    let signed = |v: Option<f64>| v.map(|v| format!("{v:+.3}")).unwrap_or_else(|| "–".into());
    for d in &c.deltas {
        println!(
            "  {:<18} ΔP {:>7} ΔR {:>7} ΔF1 {:>7} ΔROC AUC {:>7}  fixed {} broken {}",
            d.key,
            signed(d.precision),
            signed(d.recall),
            signed(d.f1),
            signed(d.roc_auc),
            d.fixed,
            d.broken
        );
    }
    println!("\n{} flipped verdicts:", c.flips.len());
    for f in &c.flips {
        let label = match f.label {
            Some(true) => "violation",
            Some(false) => "fine",
            None => "unlabelled",
        };
        let text: String = f.text.chars().take(70).collect();
        println!(
            "  {:<18} row {:<5} {:<10} {:.3} -> {:.3}  {}",
            f.validator,
            f.row,
            label,
            f.baseline_score,
            f.candidate_score,
            text.replace('\n', " ")
        );
    }
}

/// Rows of cells in aligned columns: the first two (names) to the left, numbers to the right.
fn print_table(rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &width))| {
                if c < 2 {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}
