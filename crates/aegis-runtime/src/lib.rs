//! The model's runtime, shared by the HTTP API, the desktop app, the CLI and the bench: one
//! thread owns the model; callers submit messages and await verdicts.

mod answer_gate;
mod bootstrap;
mod guarded_stream;
mod load;
mod record;
mod worker;

pub use answer_gate::{answer_gate, Gated, ANSWER_TOKENS};
pub use bootstrap::{
    BuiltGuard, GuardSetup, HeadsRead, ModelSource, SetupError, DEFAULT_HEADS_READ,
};
pub use guarded_stream::{guard_stream, Step, StreamCheck, StreamContext};
pub use load::{closed_loop, LoadRun};
pub use record::{check_and_record, Recorded, Submitter};

pub use worker::{Checked, LoadedGuard, ModelStatus, Worker, WorkerError};
