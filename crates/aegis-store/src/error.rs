#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the history database {database} is locked by another program; close it or try again")]
    Locked { database: String },
    #[error(
        "the history database {database} is read-only; make it writable or choose another with --database"
    )]
    ReadOnly { database: String },
    #[error("the history database {database} is damaged or not a SQLite database ({message}); move it aside to start a new one, it was left untouched")]
    Corrupted { database: String, message: String },
    #[error("the history database {database} was written by a newer AEGIS (schema version {version}); upgrade AEGIS to open it")]
    NewerSchema { database: String, version: i64 },
    #[error("cannot open the history database {database}: {message}")]
    Open { database: String, message: String },
    #[error("history database {database}: {source}")]
    Sql {
        database: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{validator} already has {limit} proposed examples waiting for a reviewer; accept or remove some first")]
    TooManyPending { validator: String, limit: usize },
    /// Another reviewer holds or has decided the verdict, and it wants no more reviewers.
    #[error("verdict {verdict_id} is {detail}; take another one from the queue")]
    Taken { verdict_id: i64, detail: String },
    /// The actor's role does not allow the change (a team with members checks every change).
    #[error("{actor} is {held} and may not {doing}: that needs the {needed} role, which a team admin gives with `aegis team add`")]
    Forbidden {
        actor: String,
        held: String,
        doing: String,
        needed: &'static str,
    },
    #[error("export failed: {0}")]
    Export(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
