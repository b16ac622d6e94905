//! `aegis import`: a file through the guard into history, resumable after any interruption.

use std::path::PathBuf;
use std::time::Instant;

use aegis_store::{ImportRow, NewVerdict, Source, TemplateContent};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

use crate::history_cmd::DbArgs;
use crate::input::read_rows;
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
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let rows = read_rows(&args.file, args.column.as_deref())?;
    let runtime = tokio::runtime::Runtime::new()?;
    let store = runtime.block_on(args.db.open())?;
    let file_name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let batch = runtime.block_on(store.begin_import(&file_name, &sha, rows.len() as i64))?;
    if batch.is_done() {
        eprintln!(
            "{} was already imported (batch {}, {} rows); nothing to do",
            args.file.display(),
            batch.id,
            batch.rows_done
        );
        return Ok(ExitStatus::Passed);
    }
    if batch.rows_done > 0 {
        eprintln!(
            "resuming batch {} after row {} ({} of {} rows done)",
            batch.id, batch.last_row, batch.rows_done, batch.total_rows
        );
    }
    let guard = args.guard.load()?;
    let templates: Vec<TemplateContent> = guard.validators().iter().map(Into::into).collect();
    let progress = ProgressBar::new(rows.len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_position(batch.rows_done as u64);
    let started = Instant::now();
    let (mut recorded, mut bad) = (0usize, 0usize);
    for row in rows.into_iter().filter(|r| r.line as i64 > batch.last_row) {
        let at = ImportRow {
            batch_id: batch.id,
            row: row.line as i64,
        };
        let outcome = row.text.and_then(|text| {
            guard
                .check(&text)
                .map(|v| (text, v))
                .map_err(|e| e.to_string())
        });
        match outcome {
            Ok((text, verdict)) => {
                runtime.block_on(store.record(&NewVerdict {
                    text: &text,
                    source: Source::Import,
                    user_id: args.user_id.as_deref(),
                    import: Some(at),
                    verdict: &verdict,
                    templates: &templates,
                }))?;
                recorded += 1;
            }
            Err(problem) => {
                runtime.block_on(store.skip_import_row(at))?;
                bad += 1;
                progress.suspend(|| eprintln!("line {}: {problem}", row.line));
            }
        }
        progress.inc(1);
    }
    let done = runtime.block_on(store.finish_import(batch.id))?;
    progress.finish_and_clear();
    eprintln!(
        "imported {recorded} messages ({bad} bad rows) into {} in {:.1} s; batch {} complete with {} of {} rows",
        store.path().display(),
        started.elapsed().as_secs_f64(),
        done.id,
        done.rows_done,
        done.total_rows
    );
    runtime.block_on(store.close());
    Ok(if bad > 0 {
        ExitStatus::InputError
    } else {
        ExitStatus::Passed
    })
}
