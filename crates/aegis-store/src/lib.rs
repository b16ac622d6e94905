//! Verdict history in SQLite or PostgreSQL: every message checked, its verdict and per-validator results, the
//! template text behind them, reviewers' decisions, resumable imports, the labelled examples
//! validators are taught with and every head applied to them.
//!
//! One writer connection (SQLite allows one writer; queuing in the pool beats busy retries) and a
//! small pool of readers, in WAL mode so reading never blocks recording.

mod agreement;
mod database;
mod error;
mod eval_runs;
mod examples;
mod export;
mod filter;
mod head_versions;
mod imports;
mod open;
mod query;
mod queue;
mod record;
mod reviewed;
mod reviews;
mod sql;
mod team;
mod template_saves;
mod time;

pub use agreement::{Kappa, PairAgreement, ReviewerAgreement, ValidatorAgreement};
pub use database::Database;
pub use error::{Result, StoreError};
pub use eval_runs::{EvalRunSummary, StoredEvalRun};
pub use examples::{Added, ExampleOrigin, NewExample, StoredExample, MAX_PENDING_PER_VALIDATOR};
pub use export::ExportFormat;
pub use filter::{HistoryFilter, ScoreRange};
pub use head_versions::{content_hash, HeadVersion, NewHeadVersion};
pub use imports::{ImportBatch, ValidatorTally};
pub use open::{Store, StoreOptions};
pub use query::{
    Cursor, DailyCount, HistoryPage, HistoryRow, StoredResult, TemplateRecord, VerdictDetail,
};
pub use queue::{QueuePolicy, ReviewQueue};
pub use record::{ImportRow, NewVerdict, Source, TemplateContent};
pub use reviewed::ReviewedExample;
pub use reviews::{Decision, NewReview, Review};
pub use team::{AuditEntry, Member, MemberRole};
pub use template_saves::TemplateSave;
pub use time::{format_millis, now_millis, parse_day};
