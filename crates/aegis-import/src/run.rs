use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_engine::EngineError;
use aegis_guard::{GuardError, GuardInput, Verdict};
use aegis_runtime::{Worker, WorkerError};
use aegis_store::{
    ImportBatch, ImportRow, NewVerdict, Source, Store, TemplateContent, ValidatorTally,
};
use futures_util::{stream, FutureExt, StreamExt};
use serde::Serialize;

use crate::read::{MessageFile, Row};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Store(#[from] aegis_store::StoreError),
    /// The guard cannot go on (the model stopped); rows done so far are kept and a rerun resumes.
    #[error("the import stopped at line {line}: {message}")]
    Stopped { line: u64, message: String },
}

/// A row the guard checked: its verdict and the templates that produced it.
pub type RowChecked = (Verdict, Arc<[TemplateContent]>);

/// Why a row has no verdict.
#[derive(Debug, Clone)]
pub enum CheckFailure {
    /// The row itself is unusable (too long for the model, say): skipped, the import goes on.
    BadRow(String),
    /// The guard cannot go on: the import stops and can be resumed.
    Fatal(String),
    /// The model server cannot be reached now: the import pauses and tries the row again.
    Unavailable(String),
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ImportProgress {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub batch_id: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub total_rows: u64,
    /// Rows handled, including those an earlier run did.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub rows_done: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub recorded: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub bad_rows: u64,
    /// Rows handled by this run per second.
    pub rows_per_second: f64,
    pub eta_seconds: Option<f64>,
    /// Why the import is waiting, while the model server cannot be reached; `None` while it runs.
    pub paused: Option<String>,
    /// The last unusable row: its line and why.
    #[cfg_attr(feature = "ts", ts(type = "[number, string] | null"))]
    pub last_problem: Option<(u64, String)>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ImportSummary {
    pub progress: ImportProgress,
    /// Every row is handled.
    pub complete: bool,
    pub cancelled: bool,
    /// The file was imported before; nothing was run.
    pub already_done: bool,
    pub tallies: Vec<ValidatorTally>,
}

/// The one way an import checks a row on the model worker, in the app and the CLI alike: it
/// waits for the model and for room in the queue. A row the guard refuses (empty, too long) is
/// skipped; a model server that cannot be reached pauses the import until it answers again;
/// anything else (the engine failed, the model stopped) stops the import, and a rerun resumes
/// it, rather than recording a failure for every row after.
pub async fn check_on_worker(
    worker: &Worker,
    input: GuardInput,
) -> Result<RowChecked, CheckFailure> {
    match worker.check_waiting(input, None).await {
        Ok(checked) => Ok((checked.verdict, checked.templates)),
        Err(WorkerError::Guard(GuardError::Engine(e @ EngineError::BackendUnavailable { .. }))) => {
            Err(CheckFailure::Unavailable(e.to_string()))
        }
        Err(WorkerError::Guard(GuardError::Engine(e))) => Err(CheckFailure::Fatal(e.to_string())),
        Err(WorkerError::Guard(e)) => Err(CheckFailure::BadRow(e.to_string())),
        // That row alone failed; the worker caught it and goes on.
        Err(e @ WorkerError::Panicked(_)) => Err(CheckFailure::BadRow(e.to_string())),
        Err(e) => Err(CheckFailure::Fatal(e.to_string())),
    }
}

/// Rows being checked at once: enough for the model worker to fill a batch from one import.
const CHECKS_IN_FLIGHT: usize = 16;

/// Runs every row of `file` not yet handled through `check` and records it, in row order.
/// Progress is reported after every row; `cancel` is honoured between rows, and whatever was
/// recorded stays recorded, so the next call with the same file resumes after it.
pub async fn import_file<C, F>(
    store: &Store,
    file: &MessageFile,
    user_id: Option<&str>,
    mut check: C,
    mut on_progress: impl FnMut(&ImportProgress),
    cancel: &AtomicBool,
) -> Result<ImportSummary, ImportError>
where
    C: FnMut(GuardInput) -> F,
    F: Future<Output = Result<RowChecked, CheckFailure>>,
{
    let batch = store
        .begin_import(&file.file_name, &file.identity, file.rows.len() as i64)
        .await?;
    let mut progress = initial_progress(&batch);
    if batch.is_done() {
        return summary(store, progress, true, false, true).await;
    }
    if batch.rows_done > 0 {
        tracing::info!(
            batch = batch.id,
            after_line = batch.last_row,
            "resuming an import"
        );
    }
    on_progress(&progress);
    let started = Instant::now();
    let done_before = progress.rows_done;
    // Up to CHECKS_IN_FLIGHT rows are checked at once, so a batching checker (the model worker)
    // gets batches; results still arrive, and are recorded, in row order. The stream owns its
    // rows: closures over borrowed rows make the future not general enough to be `Send`
    // (rust-lang/rust#102211), which a Tauri command needs.
    let mut last_position = batch.last_row;
    let mut pause = FIRST_PAUSE;
    // Each pass streams the rows after the last one handled; a pass ends early when the model
    // server cannot be reached, and the next starts again at the row that could not be checked.
    loop {
        let pending: Vec<Row> = file
            .rows
            .iter()
            .filter(|row| row.position as i64 > last_position)
            .cloned()
            .collect();
        let mut outcomes = stream::iter(pending)
            .map(
                |Row {
                     line,
                     position,
                     input,
                 }| {
                    let checking = input.map(|input| {
                        let text = input.text().to_string();
                        (text, check(input))
                    });
                    async move {
                        let outcome = match checking {
                            Ok((text, checking)) => checking.await.map(|checked| (text, checked)),
                            Err(problem) => Err(CheckFailure::BadRow(problem)),
                        };
                        (line, position, outcome)
                    }
                },
            )
            .buffered(CHECKS_IN_FLIGHT);
        let mut unavailable = None;
        let mut unrecorded = Unrecorded::default();
        loop {
            let next = match outcomes.next().now_or_never() {
                Some(ready) => ready,
                None => {
                    // The checker has nothing ready: record what is in hand while it works.
                    unrecorded.record(store, user_id).await?;
                    outcomes.next().await
                }
            };
            let Some((line, position, outcome)) = next else {
                break;
            };
            if cancel.load(Ordering::Relaxed) {
                unrecorded.record(store, user_id).await?;
                return summary(store, progress, false, true, false).await;
            }
            let at = ImportRow {
                batch_id: batch.id,
                row: position as i64,
            };
            let outcome = match outcome {
                Ok(checked) => Ok(checked),
                Err(CheckFailure::BadRow(problem)) => Err(problem),
                Err(CheckFailure::Unavailable(message)) => {
                    unavailable = Some(message);
                    break;
                }
                Err(CheckFailure::Fatal(message)) => {
                    unrecorded.record(store, user_id).await?;
                    return Err(ImportError::Stopped { line, message });
                }
            };
            match outcome {
                Ok((text, checked)) => {
                    unrecorded.rows.push((text, checked, at));
                    if unrecorded.rows.len() >= RECORDED_TOGETHER {
                        unrecorded.record(store, user_id).await?;
                    }
                    progress.recorded += 1;
                }
                Err(problem) => {
                    // Rows are handled in order: the rows before this one are recorded first.
                    unrecorded.record(store, user_id).await?;
                    store.skip_import_row(at).await?;
                    progress.bad_rows += 1;
                    progress.last_problem = Some((line, problem));
                }
            }
            last_position = position as i64;
            pause = FIRST_PAUSE;
            progress.paused = None;
            progress.rows_done += 1;
            let this_run = (progress.rows_done - done_before) as f64;
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            progress.rows_per_second = this_run / seconds;
            progress.eta_seconds = Some(
                (progress.total_rows.saturating_sub(progress.rows_done)) as f64
                    / progress.rows_per_second.max(1e-9),
            );
            on_progress(&progress);
        }
        unrecorded.record(store, user_id).await?;
        // The rows still in flight are abandoned with the stream: none was recorded.
        drop(outcomes);
        let Some(message) = unavailable else { break };
        tracing::warn!(batch = batch.id, after_row = last_position, pause_s = pause.as_secs(), %message, "import paused: the model server cannot be reached");
        progress.paused = Some(message);
        on_progress(&progress);
        if wait_unless_cancelled(pause, cancel).await {
            return summary(store, progress, false, true, false).await;
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
    store.finish_import(batch.id).await?;
    summary(store, progress, true, false, false).await
}

/// Rows recorded in one transaction at most: enough that a commit's wait for the disk (and, on
/// PostgreSQL, the server) is shared, few enough that a crash re-checks little on resume.
const RECORDED_TOGETHER: usize = 64;

/// Checked rows not yet in history, in row order. They are recorded together when the checker
/// has nothing else ready (so a slow model sees each row recorded as it comes), when
/// `RECORDED_TOGETHER` have gathered, and before anything else is written or the run ends.
#[derive(Default)]
struct Unrecorded {
    rows: Vec<(String, RowChecked, ImportRow)>,
}

impl Unrecorded {
    async fn record(&mut self, store: &Store, user_id: Option<&str>) -> Result<(), ImportError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let verdicts: Vec<NewVerdict<'_>> = self
            .rows
            .iter()
            .map(|(text, (verdict, templates), at)| NewVerdict {
                text,
                source: Source::Import,
                user_id,
                import: Some(*at),
                verdict,
                templates,
            })
            .collect();
        store.record_many(&verdicts).await?;
        self.rows.clear();
        Ok(())
    }
}

fn initial_progress(batch: &ImportBatch) -> ImportProgress {
    ImportProgress {
        batch_id: batch.id,
        total_rows: batch.total_rows.max(0) as u64,
        rows_done: batch.rows_done.max(0) as u64,
        recorded: 0,
        bad_rows: 0,
        rows_per_second: 0.0,
        eta_seconds: None,
        paused: None,
        last_problem: None,
    }
}

/// The first pause after the model server stops answering, doubled each time it still does not,
/// up to the longest.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Waits `pause`, looking at `cancel` often enough that a cancelled import stops promptly.
/// True if it was cancelled.
async fn wait_unless_cancelled(pause: Duration, cancel: &AtomicBool) -> bool {
    let step = Duration::from_millis(100);
    let deadline = Instant::now() + pause;
    while Instant::now() < deadline {
        if cancel.load(Ordering::Relaxed) {
            return true;
        }
        tokio::time::sleep(step).await;
    }
    cancel.load(Ordering::Relaxed)
}

async fn summary(
    store: &Store,
    progress: ImportProgress,
    complete: bool,
    cancelled: bool,
    already_done: bool,
) -> Result<ImportSummary, ImportError> {
    let tallies = store.import_tally(progress.batch_id).await?;
    Ok(ImportSummary {
        progress,
        complete,
        cancelled,
        already_done,
        tallies,
    })
}
