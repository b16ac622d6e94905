//! `aegis`: the headless twin of the desktop console.

#[cfg(feature = "lab")]
mod adapt;
mod bench;
mod check;
#[cfg(feature = "lab")]
mod cross_fit;
mod eval;
mod hidden_arg;
mod history_cmd;
mod import;
mod model_cmd;
mod options;
mod serve;
mod teach;
mod team;
#[cfg(feature = "lab")]
mod token_states;
mod train;
mod train_data;
mod train_reading;
mod train_report;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "aegis",
    version,
    about = "Check messages against spam, toxic, harassment and financial-advice policies with a local Gemma 3"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a message (or a file of messages) against every validator.
    Check(Box<check::CheckArgs>),
    /// Run a file of messages through the guard into history; resumes where it stopped.
    Import(Box<import::ImportArgs>),
    /// Browse, search, review, export and delete recorded verdicts.
    History(Box<history_cmd::HistoryArgs>),
    /// A shared history's members and roles, and the audit log of who did what.
    Team(Box<team::TeamArgs>),
    /// Serve the local HTTP API (/validate, /chat, /health, /v1/moderations).
    Serve(Box<serve::ServeArgs>),
    /// Measure validators against labelled messages: precision, recall, F1, ROC and PR AUC per
    /// validator and language; compare template sets; reports in JSON and HTML.
    Eval(Box<eval::EvalArgs>),
    /// Train validators' heads on labelled messages and report cross-validated quality.
    Train(Box<train::TrainArgs>),
    /// Adapt the encoder's upper layers to the validators (retrain the heads after). Research:
    /// built with the `lab` feature.
    #[cfg(feature = "lab")]
    Adapt(Box<adapt::AdaptArgs>),
    /// Write messages' token states after the encoder's last layer, for research on a learned
    /// pooling. Research: built with the `lab` feature.
    #[cfg(feature = "lab")]
    TokenStates(Box<token_states::TokenStatesArgs>),
    /// Labelled examples that teach a validator: add, list, import, remove.
    Examples(Box<teach::ExamplesArgs>),
    /// Versions of the heads applied to validators: list, revert.
    Heads(Box<teach::HeadsArgs>),
    /// Time verdicts: the original method, one prompt at a time, our fast path and llama.cpp.
    Bench(Box<bench::BenchArgs>),
    /// Model utilities.
    #[command(subcommand)]
    Model(model_cmd::ModelCommand),
}

/// Exit codes: 0 every message passed, 1 something failed a validator, 2 usage or input error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Passed = 0,
    Failed = 1,
    InputError = 2,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AEGIS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(*args),
        Command::Train(args) => train::run(*args),
        #[cfg(feature = "lab")]
        Command::Adapt(args) => adapt::run(*args),
        #[cfg(feature = "lab")]
        Command::TokenStates(args) => token_states::run(*args),
        Command::Eval(args) => eval::run(*args),
        Command::Serve(args) => serve::run(*args),
        Command::Import(args) => import::run(*args),
        Command::History(args) => history_cmd::run(*args),
        Command::Team(args) => team::run(*args),
        Command::Examples(args) => teach::run_examples(*args),
        Command::Heads(args) => teach::run_heads(*args),
        Command::Bench(args) => bench::run(*args),
        Command::Model(command) => model_cmd::run(command),
    };
    match result {
        Ok(status) => std::process::ExitCode::from(status as u8),
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(ExitStatus::InputError as u8)
        }
    }
}
