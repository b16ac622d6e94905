//! The store on real SQLite files.

mod bad_states;
mod common;
mod history;
mod imports;
mod queue;
