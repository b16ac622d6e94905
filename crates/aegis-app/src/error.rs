//! Errors the console reports, and the kind the window branches on.

use std::path::PathBuf;

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

pub use aegis_guard::ErrorKind;

impl ConsoleError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::Invalid,
            Self::Io { .. } => ErrorKind::Io,
            Self::Template { .. } => ErrorKind::Template,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Guard(e) => e.kind(),
            Self::Worker(e) => e.kind(),
            Self::Store(aegis_store::StoreError::Taken { .. }) => ErrorKind::Taken,
            Self::Store(aegis_store::StoreError::Forbidden { .. }) => ErrorKind::Forbidden,
            Self::Store(_) => ErrorKind::Store,
            Self::Read(_) | Self::Dataset(_) | Self::Unreadable { .. } => ErrorKind::File,
            Self::Import(_) => ErrorKind::Import,
            Self::Teach(e) => e.kind(),
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
