//! The guard's errors, and the one vocabulary of failure kinds every front end (the app's
//! window, the HTTP API, the CLI) branches on, so a kind is decided once, where the error is.

use std::path::PathBuf;

use serde::Serialize;

/// What kind of failure an error is: a stable word front ends branch on. Each crate's error
/// says its own kind (`GuardError::kind`, `WorkerError::kind`, ...); no front end maps variants.
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
    /// Another reviewer holds or has decided this; take another.
    Taken,
    /// The team's roles do not let this member do it; an admin can change their role.
    Forbidden,
}

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("{path}: {problem}")]
    Template {
        path: PathBuf,
        problem: String,
        /// The 1-based line of the file the problem is on, when it has one.
        line: Option<u32>,
    },
    #[error("cannot read the templates folder {path}: {source}")]
    TemplatesDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no validator templates folder: looked in {}; {hint}",
        list_paths(looked)
    )]
    PromptsNotFound { looked: Vec<PathBuf>, hint: String },
    #[error("no usable validator templates in {0}")]
    NoValidators(PathBuf),
    #[error("the text is empty: give a message to check")]
    EmptyText,
    /// A conversation the guard cannot read; `index` is the turn at fault, from 0.
    #[error("{}{problem}", turn_prefix(*index))]
    BadTurn {
        index: Option<usize>,
        problem: String,
    },
    #[error(
        "the text is too long: it is {message_tokens} tokens; with a validator's template around it the prompt is {prompt_tokens} tokens, over the model's context of {limit} tokens"
    )]
    TooLong {
        message_tokens: usize,
        prompt_tokens: usize,
        limit: usize,
    },
    #[error("{path}: head not used, the prompt's score decides: {reason}")]
    HeadRefused { path: PathBuf, reason: String },
    #[error("{path}: reading {reading:?} off, the head's own map decides: {reason}")]
    ReadingOff {
        path: PathBuf,
        reading: String,
        reason: String,
    },
    #[error("the {key} head could not score this message: {message}")]
    HeadFailed { key: String, message: String },
    #[error("training the {key} head failed: {message}")]
    Training { key: String, message: String },
    #[error(transparent)]
    Engine(#[from] aegis_engine::EngineError),
}

pub type Result<T, E = GuardError> = std::result::Result<T, E>;

impl GuardError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::EmptyText | Self::BadTurn { .. } | Self::TooLong { .. } => ErrorKind::Invalid,
            Self::Template { .. } | Self::NoValidators(_) => ErrorKind::Template,
            Self::PromptsNotFound { .. } => ErrorKind::NotFound,
            Self::TemplatesDir { .. } => ErrorKind::Io,
            Self::Engine(aegis_engine::EngineError::BackendUnavailable { .. }) => {
                ErrorKind::Unavailable
            }
            Self::HeadRefused { .. }
            | Self::ReadingOff { .. }
            | Self::HeadFailed { .. }
            | Self::Training { .. }
            | Self::Engine(_) => ErrorKind::Model,
        }
    }
}

fn turn_prefix(index: Option<usize>) -> String {
    index.map(|i| format!("turn {i}: ")).unwrap_or_default()
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_the_guard_refuses_is_invalid_not_a_model_failure() {
        let bad_turn = GuardError::BadTurn {
            index: Some(1),
            problem: "an empty turn".into(),
        };
        for error in [GuardError::EmptyText, bad_turn] {
            assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
        }
        let head = GuardError::HeadFailed {
            key: "spam".into(),
            message: "nan".into(),
        };
        assert_eq!(head.kind(), ErrorKind::Model);
    }
}
