//! `aegis check`: one message, or a file of them.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use aegis_guard::{
    ContextReading, GuardError, GuardInput, Status, ValidateResponse, Verdict,
    DEFAULT_CONTEXT_TOKENS,
};
use aegis_runtime::{check_and_record, ModelStatus, Submitter, Worker, WorkerError};
use aegis_store::{Source, Store};
use anyhow::Result;
use futures_util::{stream, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;
use aegis_import::read_rows;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The message to check.
    #[arg(required_unless_present_any = ["file", "conversation"], conflicts_with_all = ["file", "conversation"])]
    pub text: Option<String>,
    /// Check every message in a .txt, .csv or .jsonl file; results stream to stdout as JSONL.
    #[arg(long, short, conflicts_with = "conversation")]
    pub file: Option<PathBuf>,
    /// Check conversations: a .jsonl file, one a line, as {"messages": [{"role", "content"}, ...]}
    /// (the chat shape). Every turn is checked in the context of the turns before it, or only the
    /// last where the line says "turns": "last"; each checked turn is a JSONL result naming it.
    #[arg(long)]
    pub conversation: Option<PathBuf>,
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
    /// How every head reads a turn that has context (turn, joined or higher), in place of each
    /// validator's own `context:` (README, "Conversations"); for measuring.
    #[arg(long, value_parser = parse_reading)]
    pub context_reading: Option<ContextReading>,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
}

pub fn run(args: CheckArgs) -> Result<ExitStatus> {
    // Input problems are found before the model loads: a typo should not cost a model load.
    if let Some(text) = &args.text {
        if text.trim().is_empty() {
            return Err(GuardError::EmptyText.into());
        }
    }
    if let Some(path) = &args.conversation {
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            anyhow::bail!(
                "{}: conversations are read from .jsonl, one {{\"messages\": [...]}} a line",
                path.display()
            );
        }
    }
    let rows = args
        .file
        .as_ref()
        .or(args.conversation.as_ref())
        .map(|f| read_rows(f, args.column.as_deref()))
        .transpose()?;
    let runtime = tokio::runtime::Runtime::new()?;
    // The database is opened before the model loads, so a locked or damaged one fails fast.
    let store = if args.no_history {
        None
    } else {
        Some(runtime.block_on(args.db.open())?)
    };
    let guard = args
        .guard
        .load(&args.db)?
        .with_prompt_scores(args.prompt_scores)
        .with_context(DEFAULT_CONTEXT_TOKENS, args.context_reading);
    let model = guard.model().info().clone();
    // Through the model worker and its one check-and-record, as the app and the HTTP API check:
    // the rows in flight are scored in shared batches.
    let worker = Worker::start(CHECKS_IN_FLIGHT * 2, move || Ok(guard));
    let checker = Checker {
        worker: &worker,
        store: store.as_ref(),
        submitter: Submitter {
            source: Source::Cli,
            user_id: Some(&args.user_id),
        },
    };
    runtime.block_on(async {
        if let ModelStatus::Failed(message) = worker.settled().await {
            anyhow::bail!("the model failed to load: {message}");
        }
        match (rows, &args.text) {
            (Some(rows), _) => check_rows(&checker, rows, args.conversation.is_some()).await,
            (None, Some(text)) => {
                let verdict = checker.check(GuardInput::message(text.as_str())).await?;
                if args.json {
                    let response = ValidateResponse::new(&args.user_id, text, &verdict);
                    println!("{}", serde_json::to_string_pretty(&response)?);
                } else {
                    print_table(&verdict, &model);
                }
                Ok(exit_for(verdict.status))
            }
            (None, None) => unreachable!("clap requires text or --file"),
        }
    })
}

/// Checks messages on the worker and, when history is on, records each verdict.
struct Checker<'a> {
    worker: &'a Worker,
    store: Option<&'a Store>,
    submitter: Submitter<'a>,
}

/// Why one message has no verdict: the message's own problem, or history's (which stops the run:
/// the next rows could not be recorded either).
enum CheckProblem {
    Message(String),
    History(anyhow::Error),
}

impl Checker<'_> {
    async fn check(&self, input: GuardInput) -> Result<Verdict> {
        let Some(store) = self.store else {
            return Ok(self.worker.check(input).await?.verdict);
        };
        let recorded = check_and_record(self.worker, store, input, self.submitter).await?;
        recorded.verdict_id?;
        Ok(recorded.checked.verdict)
    }

    /// `check` for one row of many: the row's own problem is kept apart from history's.
    async fn check_row(&self, input: GuardInput) -> Result<Verdict, CheckProblem> {
        self.check(input)
            .await
            .map_err(|e| match e.downcast::<WorkerError>() {
                Ok(problem) => CheckProblem::Message(problem.to_string()),
                Err(history) => CheckProblem::History(history),
            })
    }
}

fn parse_reading(value: &str) -> Result<ContextReading, String> {
    value.parse()
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
            r.decided_by.as_str(),
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
    if aegis_guard::heads_unavailable(model).is_some() {
        // A model server: its URL stands where a local file's hash would.
        println!(
            "model: {} served by {} ({}), {:.0} ms",
            verdict.model.id, verdict.model.content_hash, model.weight_format, verdict.latency_ms
        );
    } else {
        println!(
            "model: {} (sha256 {}) on {}, {} weights, {:.0} ms",
            verdict.model.id,
            &verdict.model.content_hash[..12.min(verdict.model.content_hash.len())],
            model.device,
            model.weight_format,
            verdict.latency_ms
        );
    }
    if model.synthetic {
        println!("warning: {}", aegis_engine::SYNTHETIC_WARNING);
    }
}

/// Messages being checked at once: enough for the worker to fill a batch, and a bad row still
/// fails only itself.
const CHECKS_IN_FLIGHT: usize = 64;

/// Streams a verdict per row as JSONL; `conversation` results name the turn each checked.
async fn check_rows(
    checker: &Checker<'_>,
    rows: Vec<aegis_import::Row>,
    conversation: bool,
) -> Result<ExitStatus> {
    let started = Instant::now();
    let progress = ProgressBar::new(rows.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut passed, mut failed, mut bad) = (0usize, 0usize, 0usize);
    let mut outcomes = stream::iter(&rows)
        .map(|row| async move {
            let outcome = match &row.input {
                Ok(input) => checker
                    .check_row(input.clone())
                    .await
                    .map(|v| (input.text(), v)),
                Err(problem) => Err(CheckProblem::Message(problem.clone())),
            };
            (row.line, outcome)
        })
        .buffered(CHECKS_IN_FLIGHT);
    let stdout = std::io::stdout();
    while let Some((line, outcome)) = outcomes.next().await {
        match outcome {
            Ok((text, verdict)) => {
                match verdict.status {
                    Status::Passed => passed += 1,
                    Status::Failed => failed += 1,
                }
                let user_id = checker.submitter.user_id.unwrap_or_default();
                // A conversation's turn names itself; a lone message keeps the original shape.
                let response = if conversation {
                    ValidateResponse::for_turns(user_id, text, std::slice::from_ref(&verdict))
                } else {
                    ValidateResponse::new(user_id, text, &verdict)
                };
                let mut json = serde_json::to_value(response)?;
                json["line"] = line.into();
                writeln!(stdout.lock(), "{json}")?;
            }
            Err(CheckProblem::History(e)) => return Err(e),
            Err(CheckProblem::Message(problem)) => {
                bad += 1;
                progress.suspend(|| eprintln!("line {line}: {problem}"));
            }
        }
        progress.inc(1);
    }
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
