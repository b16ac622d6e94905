//! Flags every model-using command shares, resolved once into a loaded guard.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aegis_engine::{
    resolve, DeviceChoice, GemmaEngine, HubOptions, LanguageModel, LoadOptions, ModelSpec,
    ResolvedModel, WeightFormat,
};
use aegis_guard::{Guard, GuardError, RejectionMode};
use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    /// Model: "default", a .gguf file, a directory (safetensors + config.json + tokenizer.json),
    /// or a Hugging Face repo id such as google/gemma-3-4b-it-qat-q4_0-gguf.
    #[arg(long, env = "AEGIS_MODEL", default_value = "default")]
    pub model: String,
    /// cpu, cuda, cuda:N, or auto (CUDA when built with it and present).
    #[arg(long, env = "AEGIS_DEVICE", default_value = "auto")]
    pub device: String,
    /// auto (f32 on CPU, bf16 on GPU), f32 (dequantize once; fastest on CPU), bf16 (GPU tensor
    /// cores) or quantized (the file's blocks; least memory).
    #[arg(long, env = "AEGIS_WEIGHTS", default_value = "auto")]
    pub weights: String,
    /// Longest prompt accepted, in tokens.
    #[arg(long, default_value_t = LoadOptions::default().max_context)]
    pub max_context: usize,
    /// Never reach the Hugging Face hub; use only local files and the HF cache.
    #[arg(long, env = "HF_HUB_OFFLINE")]
    pub offline: bool,
}

#[derive(Debug, clap::Args)]
pub struct GuardArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Folder of validator templates.
    #[arg(long, env = "AEGIS_PROMPTS")]
    pub prompts: Option<PathBuf>,
    /// Have the model write the rejection message (falls back to the templated one).
    #[arg(long)]
    pub generate_rejection: bool,
}

impl ModelArgs {
    pub fn load(&self) -> Result<GemmaEngine> {
        Ok(self.load_with_files()?.0)
    }

    /// The engine and the files it was loaded from.
    pub fn load_with_files(&self) -> Result<(GemmaEngine, ResolvedModel)> {
        let started = Instant::now();
        let resolved = self.resolve()?;
        let engine = GemmaEngine::load(&resolved, &self.load_options()?)
            .with_context(|| format!("loading {}", resolved.id))?;
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "model ready"
        );
        Ok((engine, resolved))
    }

    /// Where the model's files are (downloading them first if needed).
    pub fn resolve(&self) -> Result<ResolvedModel> {
        let spec = ModelSpec::parse(&self.model)?;
        let hub = HubOptions {
            offline: self.offline,
            progress: true,
            ..HubOptions::default()
        };
        Ok(resolve(&spec, &hub)?)
    }

    /// The device, weight format and limits the flags ask for.
    pub fn load_options(&self) -> Result<LoadOptions> {
        Ok(LoadOptions {
            device: self.device.parse::<DeviceChoice>()?,
            weight_format: match self.weights.as_str() {
                "auto" => None,
                other => Some(other.parse::<WeightFormat>().map_err(anyhow::Error::msg)?),
            },
            max_context: self.max_context,
            ..LoadOptions::default()
        })
    }
}

impl GuardArgs {
    /// The templates folder: the flag, else ./prompt_guard, else the one shipped in the source tree.
    pub fn prompts_dir(&self) -> PathBuf {
        if let Some(dir) = &self.prompts {
            return dir.clone();
        }
        let local = PathBuf::from("prompt_guard");
        if local.is_dir() {
            return local;
        }
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard")
    }

    pub fn load(&self) -> Result<Guard> {
        let engine = self.model.load()?;
        self.guard_on(Arc::new(engine), &self.prompts_dir())
    }

    /// A guard from the templates in `dir` on an already loaded model (one model can serve
    /// several template sets, as `aegis eval --compare` does).
    pub fn guard_on(&self, model: Arc<dyn LanguageModel>, dir: &Path) -> Result<Guard> {
        let (guard, problems) = Guard::from_dir(model, dir)?;
        for problem in problems {
            match problem {
                GuardError::HeadRefused { .. } => eprintln!("warning: {problem}"),
                _ => eprintln!("warning: template refused: {problem}"),
            }
        }
        let mode = if self.generate_rejection {
            RejectionMode::Generated { max_tokens: 48 }
        } else {
            RejectionMode::Templated
        };
        Ok(guard.with_rejection(mode))
    }
}
