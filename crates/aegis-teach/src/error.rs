use std::path::PathBuf;

use aegis_guard::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum TeachError {
    #[error("cannot read or write {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} line {line}: not a labelled message ({{\"text\": ..., \"labels\": {{...}}}}): {message}")]
    BadRow {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("no validator template is called {0:?}")]
    UnknownValidator(String),
    #[error("{0}")]
    Invalid(String),
    #[error("training was cancelled")]
    Cancelled,
    #[error(transparent)]
    Guard(#[from] aegis_guard::GuardError),
    #[error(transparent)]
    Head(#[from] aegis_heads::HeadError),
    #[error(transparent)]
    Store(#[from] aegis_store::StoreError),
}

pub type Result<T, E = TeachError> = std::result::Result<T, E>;

impl TeachError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Read { .. } | Self::BadRow { .. } => ErrorKind::File,
            Self::Invalid(_) | Self::UnknownValidator(_) => ErrorKind::Invalid,
            Self::Cancelled => ErrorKind::Cancelled,
            Self::Store(_) => ErrorKind::Store,
            Self::Guard(e) => e.kind(),
            Self::Head(_) => ErrorKind::Model,
        }
    }
}
