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
    /// A labelled file that cannot be read as labelled messages (the reader `aegis eval` uses).
    #[error(transparent)]
    Data(#[from] aegis_eval::EvalError),
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
            Self::Read { .. } | Self::Data(_) => ErrorKind::File,
            Self::Invalid(_) | Self::UnknownValidator(_) => ErrorKind::Invalid,
            Self::Cancelled => ErrorKind::Cancelled,
            Self::Store(aegis_store::StoreError::Forbidden { .. }) => ErrorKind::Forbidden,
            Self::Store(_) => ErrorKind::Store,
            Self::Guard(e) => e.kind(),
            Self::Head(_) => ErrorKind::Model,
        }
    }
}
