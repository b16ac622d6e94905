//! `aegis model`: fetch a model ahead of time, or show what a model name resolves to.

use aegis_engine::LanguageModel;
use anyhow::Result;

use crate::options::ModelArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// Resolve (downloading from the hub if needed), load, and print the model's details.
    Info {
        #[command(flatten)]
        model: ModelArgs,
    },
}

pub fn run(command: ModelCommand) -> Result<ExitStatus> {
    match command {
        ModelCommand::Info { model } => {
            let engine = model.load()?;
            println!("{}", serde_json::to_string_pretty(engine.info())?);
            Ok(ExitStatus::Passed)
        }
    }
}
