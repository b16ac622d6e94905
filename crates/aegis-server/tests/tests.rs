//! The real server on 127.0.0.1:0 with the real model and a real SQLite history.

mod api;
mod bad_input;
mod common;
mod verdicts;
