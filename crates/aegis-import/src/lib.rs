//! Files of messages through the guard into history: reading TXT, CSV and JSONL with a line
//! number per row, and an import loop that records every verdict, resumes where an earlier run
//! stopped, reports progress and stops cleanly when cancelled. The CLI and the desktop app share
//! it; each brings its own way of running the guard.

mod read;
mod run;

pub use read::{csv_columns, read_rows, MessageFile, ReadError, Row};
pub use run::{
    check_on_worker, import_file, CheckFailure, ImportError, ImportProgress, ImportSummary,
    RowChecked,
};
