//! Errors the console reports, and the `{kind, message}` shape they reach the UI in.

use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{message}")]
    Template {
        key: String,
        message: String,
        /// 1-based line of the file, when the problem has one.
        line: Option<u32>,
    },
    #[error("no verdict {0} in history")]
    NotFound(i64),
    #[error(transparent)]
    Guard(#[from] aegis_guard::GuardError),
    #[error(transparent)]
    Worker(#[from] aegis_server::WorkerError),
    #[error(transparent)]
    Store(#[from] aegis_store::StoreError),
    #[error(transparent)]
    Read(#[from] aegis_import::ReadError),
    #[error(transparent)]
    Import(#[from] aegis_import::ImportError),
    #[error(transparent)]
    Dataset(#[from] aegis_eval::EvalError),
}

/// What a command's caller receives on failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CommandError {
    /// A stable word the UI can branch on: invalid, template, loading, busy, model, store, file,
    /// not_found, io.
    pub kind: String,
    pub message: String,
    /// For template errors: the line to mark in the editor.
    pub line: Option<u32>,
}

impl From<ConsoleError> for CommandError {
    fn from(error: ConsoleError) -> Self {
        use aegis_guard::GuardError;
        use aegis_server::WorkerError;
        let kind = match &error {
            ConsoleError::Invalid(_) => "invalid",
            ConsoleError::Io { .. } => "io",
            ConsoleError::Template { .. } => "template",
            ConsoleError::NotFound(_) => "not_found",
            ConsoleError::Guard(GuardError::EmptyText | GuardError::TooLong { .. }) => "invalid",
            ConsoleError::Guard(GuardError::Template { .. }) => "template",
            ConsoleError::Guard(_) => "model",
            ConsoleError::Worker(WorkerError::Loading) => "loading",
            ConsoleError::Worker(WorkerError::Busy(_)) => "busy",
            ConsoleError::Worker(WorkerError::Guard(
                GuardError::EmptyText | GuardError::TooLong { .. },
            )) => "invalid",
            ConsoleError::Worker(_) => "model",
            ConsoleError::Store(_) => "store",
            ConsoleError::Read(_) => "file",
            ConsoleError::Import(_) => "import",
            ConsoleError::Dataset(_) => "file",
        };
        let line = match &error {
            ConsoleError::Template { line, .. } => *line,
            _ => None,
        };
        Self {
            kind: kind.into(),
            message: error.to_string(),
            line,
        }
    }
}
