//! `aegis import`: a file through the guard into history, resumable after any interruption.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use aegis_import::{check_on_worker, import_file, MessageFile};
use aegis_runtime::Worker;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A .txt, .csv or .jsonl file of messages.
    pub file: PathBuf,
    /// CSV column holding the text (default: text, else question).
    #[arg(long)]
    pub column: Option<String>,
    /// user_id recorded with every message.
    #[arg(long)]
    pub user_id: Option<String>,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
}

pub fn run(args: ImportArgs) -> Result<ExitStatus> {
    let file = MessageFile::read(&args.file, args.column.as_deref())?;
    let runtime = tokio::runtime::Runtime::new()?;
    let store = runtime.block_on(args.db.open())?;
    let guard = args.guard.load(&args.db)?;
    // Through the model worker, as the app imports: the rows in flight are checked in batches.
    let worker = Worker::start(64, move || Ok(guard));
    let progress = ProgressBar::new(file.rows.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  ETA {eta}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut reported_problems = 0;
    let mut first_report = true;
    let mut was_paused = false;
    let summary = runtime.block_on(import_file(
        &store,
        &file,
        args.user_id.as_deref(),
        |text| {
            let worker = worker.clone();
            async move { check_on_worker(&worker, text).await }
        },
        |p| {
            if std::mem::take(&mut first_report) && p.rows_done > 0 {
                progress.suspend(|| {
                    eprintln!(
                        "resuming batch {} ({} of {} rows done)",
                        p.batch_id, p.rows_done, p.total_rows
                    )
                });
            }
            progress.set_position(p.rows_done);
            match &p.paused {
                Some(why) => {
                    progress.set_message(format!("paused, retrying: {why}"));
                    // Said once on stderr too, for a log with no progress bar to show it.
                    if !std::mem::replace(&mut was_paused, true) {
                        progress.suspend(|| {
                            eprintln!(
                                "paused at row {}: {why}; retrying until it answers",
                                p.rows_done
                            )
                        });
                    }
                }
                None => {
                    progress.set_message("");
                    if std::mem::take(&mut was_paused) {
                        progress.suspend(|| eprintln!("resumed at row {}", p.rows_done));
                    }
                }
            }
            if p.bad_rows > reported_problems {
                reported_problems = p.bad_rows;
                if let Some((line, problem)) = &p.last_problem {
                    progress.suspend(|| eprintln!("line {line}: {problem}"));
                }
            }
        },
        &AtomicBool::new(false),
    ))?;
    progress.finish_and_clear();
    let p = &summary.progress;
    if summary.already_done {
        eprintln!(
            "{} was already imported (batch {}, {} rows); nothing to do",
            args.file.display(),
            p.batch_id,
            p.rows_done
        );
    } else {
        eprintln!(
            "imported {} messages ({} bad rows) into {} in {:.1} s; batch {} complete with {} of {} rows",
            p.recorded,
            p.bad_rows,
            store.database(),
            started.elapsed().as_secs_f64(),
            p.batch_id,
            p.rows_done,
            p.total_rows
        );
    }
    runtime.block_on(store.close());
    Ok(if p.bad_rows > 0 {
        ExitStatus::InputError
    } else {
        ExitStatus::Passed
    })
}
