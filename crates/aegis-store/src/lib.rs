//! Verdict history in SQLite: every message checked, its verdict and per-validator results, the
//! template text behind them, reviewers' decisions, and resumable imports.
//!
//! One writer connection (SQLite allows one writer; queuing in the pool beats busy retries) and a
//! small pool of readers, in WAL mode so reading never blocks recording.

mod error;
mod eval_runs;
mod export;
mod filter;
mod imports;
mod open;
mod query;
mod queue;
mod record;
mod reviews;
mod time;

pub use error::{Result, StoreError};
pub use eval_runs::{EvalRunSummary, StoredEvalRun};
pub use export::ExportFormat;
pub use filter::{HistoryFilter, ScoreRange};
pub use imports::{ImportBatch, ValidatorTally};
pub use open::{Store, StoreOptions};
pub use query::{
    Cursor, DailyCount, HistoryPage, HistoryRow, StoredResult, TemplateRecord, VerdictDetail,
};
pub use queue::{ReviewQueue, TemplateSave};
pub use record::{ImportRow, NewVerdict, Source, TemplateContent};
pub use reviews::{review_labels, Decision, NewReview, Review, ReviewedExample};
pub use time::{format_millis, now_millis, parse_day};
