//! Flags every model-using command shares, resolved once into a loaded guard.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use aegis_engine::{
    resolve_encoder, DeviceChoice, DownloadReport, EmbeddingGemma, EncoderSpec, GemmaEngine,
    HubOptions, LanguageModel, LoadOptions, ModelRequest, ResolvedModel, SentenceEncoder,
};
use aegis_guard::{find_prompts_dir, Guard, GuardError, RejectionMode};
use aegis_remote::RemoteModel;
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
    /// Never reach the Hugging Face hub; use only local files and the HF cache (as does
    /// HF_HUB_OFFLINE=1).
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, clap::Args)]
pub struct GuardArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A shared inference server to run the guard's model on instead of loading one here:
    /// llama.cpp's `llama-server` or vLLM, e.g. http://gpu-box:8000. Prompts are still rendered
    /// and tokenised here; learned heads cannot run on it, so the prompts decide.
    #[arg(long, env = "AEGIS_BACKEND")]
    pub backend: Option<String>,
    /// What learned heads read: `decoder` (the model's hidden states), `embeddinggemma`
    /// (EmbeddingGemma-300M's sentence embedding, from scripts/setup-encoder.sh or the hub), a
    /// sentence-transformers folder, or a hub id such as google/embeddinggemma-300m. Heads
    /// trained on another encoder are refused with a warning.
    #[arg(long, env = "AEGIS_ENCODER", default_value = "decoder")]
    pub encoder: String,
    #[arg(skip)]
    loaded_encoder: LoadedEncoder,
    /// Folder of validator templates; else AEGIS_PROMPTS, else ./prompt_guard, else beside
    /// the executable.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Have the model write the rejection message (falls back to the templated one).
    #[arg(long)]
    pub generate_rejection: bool,
}

/// The encoder once loaded (`GuardArgs::load_encoder`).
#[derive(Default)]
struct LoadedEncoder(OnceLock<Option<Arc<dyn SentenceEncoder>>>);

impl std::fmt::Debug for LoadedEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = self
            .0
            .get()
            .map(|e| e.as_ref().map(|e| e.info().id.clone()));
        f.debug_tuple("LoadedEncoder").field(&id).finish()
    }
}

impl ModelArgs {
    pub fn load(&self) -> Result<GemmaEngine> {
        Ok(self.load_with_files(false)?.0)
    }

    /// The engine and the files it was loaded from. `beside_encoder`: a sentence encoder shares
    /// the memory (see `LoadOptions::beside_encoder`).
    pub fn load_with_files(&self, beside_encoder: bool) -> Result<(GemmaEngine, ResolvedModel)> {
        let started = Instant::now();
        let mut request = self.request()?;
        request.options.beside_encoder = beside_encoder;
        let loaded = request
            .load()
            .with_context(|| format!("loading {}", request.model))?;
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "model ready"
        );
        Ok(loaded)
    }

    /// What the flags ask for, as the engine's one model request.
    pub fn request(&self) -> Result<ModelRequest> {
        let mut request =
            ModelRequest::new(&self.model).with_device_and_weights(&self.device, &self.weights)?;
        request.options.max_context = self.max_context;
        request.offline = self.offline;
        request.download = DownloadReport::TerminalBar;
        Ok(request)
    }
}

impl GuardArgs {
    /// The templates folder (see `find_prompts_dir` for where it is looked for).
    pub fn prompts_dir(&self) -> Result<PathBuf> {
        Ok(find_prompts_dir(self.prompts.as_deref(), None)?)
    }

    pub fn load(&self) -> Result<Guard> {
        // The folder first: a missing one should not wait for the model to load.
        let prompts = self.prompts_dir()?;
        let model: Arc<dyn LanguageModel> = match &self.backend {
            Some(url) => Arc::new(
                RemoteModel::connect_with_cached_tokenizer(url)
                    .with_context(|| format!("connecting to the model server at {url}"))?,
            ),
            None => Arc::new(self.model.load_with_files(self.encoder_chosen())?.0),
        };
        self.guard_on(model, &prompts)
    }

    /// Whether heads read a sentence encoder rather than the model's hidden states.
    pub fn encoder_chosen(&self) -> bool {
        self.encoder != "decoder"
    }

    /// The sentence encoder `--encoder` names, loaded once however many guards use it (`aegis
    /// eval --compare` builds two); `None` for the decoder's hidden states.
    pub fn load_encoder(&self) -> Result<Option<Arc<dyn SentenceEncoder>>> {
        if let Some(loaded) = self.loaded_encoder.0.get() {
            return Ok(loaded.clone());
        }
        let loaded = self.read_encoder()?;
        Ok(self.loaded_encoder.0.get_or_init(|| loaded).clone())
    }

    fn read_encoder(&self) -> Result<Option<Arc<dyn SentenceEncoder>>> {
        if !self.encoder_chosen() {
            return Ok(None);
        }
        let spec = EncoderSpec::parse(&self.encoder)?;
        let hub = HubOptions {
            offline: self.model.offline,
            progress: true,
            ..HubOptions::default()
        };
        let folder = resolve_encoder(&spec, &hub)
            .with_context(|| format!("finding the encoder {:?}", self.encoder))?;
        let device: DeviceChoice = self.model.device.parse()?;
        let encoder = EmbeddingGemma::load(&folder, device)
            .with_context(|| format!("loading the encoder in {}", folder.display()))?;
        Ok(Some(Arc::new(encoder)))
    }

    /// A guard from the templates in `dir` on an already loaded model (one model can serve
    /// several template sets, as `aegis eval --compare` does).
    pub fn guard_on(&self, model: Arc<dyn LanguageModel>, dir: &Path) -> Result<Guard> {
        let encoder = self.load_encoder()?;
        // Heads on an encoder run here whatever serves the model.
        let heads_unavailable =
            aegis_guard::heads_unavailable(model.info()).filter(|_| encoder.is_none());
        let (guard, problems) = Guard::from_dir_with_encoder(model, encoder, dir)?;
        if let Some(reason) = &heads_unavailable {
            eprintln!("note: {reason}; each validator's prompt decides");
        }
        for problem in problems {
            match problem {
                // Said once above for every head.
                GuardError::HeadRefused { .. } if heads_unavailable.is_some() => {}
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
