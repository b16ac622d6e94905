//! `aegis check`: one message, or a file of them.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use aegis_guard::{Guard, GuardError, ScoreSource, Status, ValidateResponse, Verdict};
use aegis_store::{NewVerdict, Source, Store, TemplateContent};
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;
use aegis_import::read_rows;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The message to check.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub text: Option<String>,
    /// Check every message in a .txt, .csv or .jsonl file; results stream to stdout as JSONL.
    #[arg(long, short)]
    pub file: Option<PathBuf>,
    /// CSV column holding the text (default: text, else question).
    #[arg(long)]
    pub column: Option<String>,
    /// Print the original /validate response shape (with scores) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// user_id reported in JSON output and recorded in history.
    #[arg(long, default_value = "cli")]
    pub user_id: String,
    /// Do not record verdicts in history.
    #[arg(long)]
    pub no_history: bool,
    /// Also run the prompts of validators a head decides, to report both scores (slower: one
    /// prompt per validator; the head still decides).
    #[arg(long)]
    pub prompt_scores: bool,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// Where verdicts go when history is on.
struct Recorder {
    runtime: tokio::runtime::Runtime,
    store: Store,
    templates: Vec<TemplateContent>,
    user_id: String,
}

impl Recorder {
    fn record(&self, text: &str, verdict: &Verdict) -> Result<()> {
        self.runtime.block_on(self.store.record(&NewVerdict {
            text,
            source: Source::Cli,
            user_id: Some(&self.user_id),
            import: None,
            verdict,
            templates: &self.templates,
        }))?;
        Ok(())
    }
}

pub fn run(args: CheckArgs) -> Result<ExitStatus> {
    // Input problems are found before the model loads: a typo should not cost a model load.
    if let Some(text) = &args.text {
        if text.trim().is_empty() {
            return Err(GuardError::EmptyText.into());
        }
    }
    let rows = args
        .file
        .as_ref()
        .map(|f| read_rows(f, args.column.as_deref()))
        .transpose()?;
    // The database is opened before the model loads, so a locked or damaged one fails fast.
    let history = if args.no_history {
        None
    } else {
        let runtime = tokio::runtime::Runtime::new()?;
        let store = runtime.block_on(args.db.open())?;
        Some((runtime, store))
    };
    let guard = args.guard.load()?.with_prompt_scores(args.prompt_scores);
    let recorder = history.map(|(runtime, store)| Recorder {
        runtime,
        store,
        templates: guard.validators().iter().map(Into::into).collect(),
        user_id: args.user_id.clone(),
    });
    match (rows, &args.text) {
        (Some(rows), _) => check_rows(&guard, rows, &args.user_id, recorder.as_ref()),
        (None, Some(text)) => {
            let verdict = guard.check(text)?;
            if let Some(recorder) = &recorder {
                recorder.record(text, &verdict)?;
            }
            if args.json {
                let response = ValidateResponse::new(&args.user_id, text, &verdict);
                println!("{}", serde_json::to_string_pretty(&response)?);
            } else {
                print_table(&verdict, guard.model().info());
            }
            Ok(exit_for(verdict.status))
        }
        (None, None) => unreachable!("clap requires text or --file"),
    }
}

fn exit_for(status: Status) -> ExitStatus {
    match status {
        Status::Passed => ExitStatus::Passed,
        Status::Failed => ExitStatus::Failed,
    }
}

fn print_table(verdict: &Verdict, model: &aegis_engine::ModelInfo) {
    println!(
        "{:<20} {:>7} {:>6} {:>7} {:>9}  verdict",
        "validator", "score", "by", "prompt", "threshold"
    );
    for r in &verdict.results {
        println!(
            "{:<20} {:>7.3} {:>6} {:>7} {:>9}  {}",
            r.key,
            r.score,
            match r.decided_by {
                ScoreSource::Head => "head",
                ScoreSource::Prompt => "prompt",
            },
            r.prompt_score
                .map_or_else(|| "-".to_string(), |p| format!("{p:.3}")),
            format!("{}", r.threshold),
            if r.passed { "passed" } else { "FAILED" }
        );
    }
    println!();
    match verdict.status {
        Status::Passed => println!("status: passed (aman)"),
        Status::Failed => {
            println!("status: failed ({})", verdict.case);
            println!("message: {}", verdict.rejection_message);
        }
    }
    println!(
        "model: {} (sha256 {}) on {}, {} weights, {:.0} ms",
        verdict.model.id,
        &verdict.model.content_hash[..12.min(verdict.model.content_hash.len())],
        model.device,
        model.weight_format,
        verdict.latency_ms
    );
    if model.synthetic {
        println!("warning: {}", aegis_engine::SYNTHETIC_WARNING);
    }
}

/// Messages per model call: one packed forward reads them all (as the worker batches concurrent
/// requests), and a bad row still fails only itself.
const CHECK_BATCH: usize = 16;

fn check_rows(
    guard: &Guard,
    rows: Vec<aegis_import::Row>,
    user_id: &str,
    recorder: Option<&Recorder>,
) -> Result<ExitStatus> {
    let started = Instant::now();
    let progress = ProgressBar::new(rows.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut passed, mut failed, mut bad) = (0usize, 0usize, 0usize);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for chunk in rows.chunks(CHECK_BATCH) {
        let texts: Vec<&str> = chunk
            .iter()
            .filter_map(|row| row.text.as_deref().ok())
            .collect();
        let mut verdicts = guard.check_batch(&texts).into_iter();
        for row in chunk {
            let outcome = row.text.as_deref().map_err(Clone::clone).and_then(|text| {
                let verdict = verdicts
                    .next()
                    .unwrap_or(Err(GuardError::EmptyText))
                    .map_err(|e| e.to_string())?;
                Ok((text, verdict))
            });
            match outcome {
                Ok((text, verdict)) => {
                    if let Some(recorder) = recorder {
                        recorder.record(text, &verdict)?;
                    }
                    match verdict.status {
                        Status::Passed => passed += 1,
                        Status::Failed => failed += 1,
                    }
                    let mut json =
                        serde_json::to_value(ValidateResponse::new(user_id, text, &verdict))?;
                    json["line"] = row.line.into();
                    writeln!(out, "{json}")?;
                }
                Err(problem) => {
                    bad += 1;
                    progress.suspend(|| eprintln!("line {}: {problem}", row.line));
                }
            }
            progress.inc(1);
        }
    }
    out.flush()?;
    progress.finish_and_clear();
    let total = passed + failed;
    eprintln!(
        "{total} checked: {passed} passed, {failed} failed; {bad} bad rows; {:.1} s ({:.0} ms per message)",
        started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64() * 1e3 / total.max(1) as f64
    );
    Ok(if failed > 0 {
        ExitStatus::Failed
    } else if bad > 0 {
        ExitStatus::InputError
    } else {
        ExitStatus::Passed
    })
}
