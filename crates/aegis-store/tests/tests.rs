//! The store on real SQLite files.

mod bad_states;
mod common;
mod eval_runs;
mod history;
mod imports;
mod queue;
mod teaching;
