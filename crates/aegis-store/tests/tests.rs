//! The store on real SQLite files.

mod bad_states;
mod common;
mod conversations;
mod eval_runs;
mod export;
mod history;
mod imports;
mod queue;
mod retention;
mod review_queue;
mod teaching;
mod team;
