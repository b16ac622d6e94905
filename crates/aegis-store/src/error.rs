use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the history database {path} is locked by another program; close it or try again")]
    Locked { path: PathBuf },
    #[error(
        "the history database {path} is read-only; make it writable or choose another with --db"
    )]
    ReadOnly { path: PathBuf },
    #[error("the history database {path} is damaged or not a SQLite database ({message}); move it aside to start a new one, it was left untouched")]
    Corrupted { path: PathBuf, message: String },
    #[error("the history database {path} was written by a newer AEGIS (schema version {version}); upgrade AEGIS to open it")]
    NewerSchema { path: PathBuf, version: i64 },
    #[error("cannot open the history database {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("history database {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{validator} already has {limit} proposed examples waiting for a reviewer; accept or remove some first")]
    TooManyPending { validator: String, limit: usize },
    #[error("export failed: {0}")]
    Export(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// SQLite's primary result codes that name a state of the file rather than a bug.
pub(crate) fn classify(path: &std::path::Path, error: sqlx::Error) -> StoreError {
    let path = path.to_path_buf();
    if let sqlx::Error::Database(db) = &error {
        let primary = db
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .map(|c| c & 0xff);
        match primary {
            Some(5) | Some(6) => return StoreError::Locked { path },
            Some(8) => return StoreError::ReadOnly { path },
            Some(11) | Some(26) => {
                return StoreError::Corrupted {
                    path,
                    message: db.message().to_string(),
                }
            }
            _ => {}
        }
    }
    StoreError::Sql {
        path,
        source: error,
    }
}
