//! The real server on 127.0.0.1:0 with the real model and a real SQLite history; requests whose
//! answer needs no verdict go through the router alone, on a fake model; `remote` puts the model
//! on a real llama.cpp server.

mod api;
mod bad_input;
mod common;
mod completions;
mod conversations;
mod fake;
mod feedback;
mod metrics;
mod remote;
mod verdicts;
