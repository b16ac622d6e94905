//! Errors the console reports, and the kind the window branches on.

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
    /// A file the window asked to read that the console will not read.
    #[error("cannot read {path}: {why}")]
    Unreadable { path: PathBuf, why: String },
    #[error(transparent)]
    Guard(#[from] aegis_guard::GuardError),
    #[error(transparent)]
    Worker(#[from] aegis_runtime::WorkerError),
    #[error(transparent)]
    Store(#[from] aegis_store::StoreError),
    #[error(transparent)]
    Read(#[from] aegis_import::ReadError),
    #[error(transparent)]
    Import(#[from] aegis_import::ImportError),
    #[error(transparent)]
    Dataset(#[from] aegis_eval::EvalError),
    #[error(transparent)]
    Teach(#[from] aegis_teach::TeachError),
}

/// What kind of failure an error is: a stable word the window branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The input was refused (empty, too long, malformed); fix it and retry.
    Invalid,
    /// A template does not parse; `line` says where.
    Template,
    /// The model is still loading.
    Loading,
    /// The model's queue is full; retry shortly.
    Busy,
    /// The model server cannot be reached; retry when it is back.
    Unavailable,
    /// The model or guard failed.
    Model,
    Store,
    /// A file could not be read or is not a usable message file or dataset.
    File,
    Import,
    NotFound,
    Io,
    /// The work was cancelled as asked.
    Cancelled,
}

impl ConsoleError {
    pub fn kind(&self) -> ErrorKind {
        use aegis_guard::GuardError;
        use aegis_runtime::WorkerError;
        use aegis_teach::TeachError;
        match self {
            Self::Invalid(_) => ErrorKind::Invalid,
            Self::Io { .. } => ErrorKind::Io,
            Self::Template { .. } => ErrorKind::Template,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Guard(GuardError::EmptyText | GuardError::TooLong { .. }) => ErrorKind::Invalid,
            Self::Guard(GuardError::Template { .. }) => ErrorKind::Template,
            Self::Guard(GuardError::PromptsNotFound { .. }) => ErrorKind::NotFound,
            Self::Guard(_) => ErrorKind::Model,
            Self::Worker(WorkerError::Loading) => ErrorKind::Loading,
            Self::Worker(WorkerError::Busy(_)) => ErrorKind::Busy,
            Self::Worker(WorkerError::Guard(
                GuardError::EmptyText | GuardError::TooLong { .. },
            )) => ErrorKind::Invalid,
            Self::Worker(WorkerError::Guard(GuardError::Engine(
                aegis_engine::EngineError::BackendUnavailable { .. },
            ))) => ErrorKind::Unavailable,
            Self::Worker(_) => ErrorKind::Model,
            Self::Store(_) => ErrorKind::Store,
            Self::Read(_) | Self::Dataset(_) | Self::Unreadable { .. } => ErrorKind::File,
            Self::Import(_) => ErrorKind::Import,
            Self::Teach(e) => match e {
                TeachError::Read { .. } | TeachError::BadRow { .. } => ErrorKind::File,
                TeachError::Invalid(_) | TeachError::UnknownValidator(_) => ErrorKind::Invalid,
                TeachError::Cancelled => ErrorKind::Cancelled,
                TeachError::Store(_) => ErrorKind::Store,
                TeachError::Guard(_) | TeachError::Head(_) => ErrorKind::Model,
            },
        }
    }

    /// The 1-based template line the problem is on, when it has one.
    pub fn line(&self) -> Option<u32> {
        match self {
            Self::Template { line, .. } => *line,
            _ => None,
        }
    }
}
