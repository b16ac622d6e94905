//! The `{kind, message, line}` shape a command's error reaches the window in.

use aegis_app::error::{ConsoleError, ErrorKind};
use serde::Serialize;

/// What a command's caller receives on failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CommandError {
    pub kind: ErrorKind,
    pub message: String,
    /// For template errors: the line to mark in the editor.
    pub line: Option<u32>,
}

impl From<ConsoleError> for CommandError {
    fn from(error: ConsoleError) -> Self {
        Self {
            kind: error.kind(),
            line: error.line(),
            message: error.to_string(),
        }
    }
}
