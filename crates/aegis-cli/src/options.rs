//! Flags every model-using command shares, resolved once into a loaded guard.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::history_cmd::{with_store, DbArgs};
use aegis_engine::{
    DownloadReport, GemmaEngine, LanguageModel, LoadOptions, ModelRequest, ResolvedModel,
    SentenceEncoder,
};
use aegis_guard::{find_prompts_dir, Guard, GuardError, RejectionMode};
use aegis_runtime::{BuiltGuard, GuardSetup, HeadsRead, ModelSource};
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
    /// and tokenised here; heads on a sentence encoder still run here, heads on the model's
    /// hidden states cannot (a server does not return them), so their prompts decide.
    #[arg(long, env = "AEGIS_BACKEND")]
    pub backend: Option<String>,
    /// What learned heads read: `embeddinggemma` (EmbeddingGemma-300M's sentence embedding,
    /// from scripts/setup-encoder.sh or the hub; the shipped heads in prompt_guard/heads/),
    /// `decoder` (the model's hidden states; no second download, heads in
    /// prompt_guard/heads/decoder/), a sentence-transformers folder, or a hub id such as
    /// google/embeddinggemma-300m. Heads trained on another encoder are refused with a warning.
    #[arg(long, env = "AEGIS_ENCODER", default_value = aegis_runtime::DEFAULT_HEADS_READ)]
    pub encoder: String,
    /// A shared server to take the heads' sentence embeddings from instead of running the
    /// encoder here: any OpenAI-compatible `/v1/embeddings` serving EmbeddingGemma (llama.cpp's
    /// `llama-server --embeddings`, vLLM, Text Embeddings Inference), e.g. http://gpu-box:8081.
    /// Accepted only when it embeds the heads' probe texts as they recorded.
    #[arg(long, env = "AEGIS_ENCODER_SERVER")]
    pub encoder_server: Option<String>,
    /// How the local encoder computes: `int8` (weights and inputs in int8 blocks on AVX-512
    /// VNNI or AVX-VNNI: 1.5 times as many messages a second on a Zen 4, embeddings within cosine
    /// 0.999 of f32 instead of 0.9999, the heads' verdicts measured unchanged), `precise` (bf16
    /// kernels on AMX tiles or AVX-512 BF16, f32 on AVX2), or `auto` (int8 where the CPU has
    /// VNNI, else precise; `aegis train` reads it as precise, so a head does not learn int8's
    /// rounding). The kinds differ in their last bits, so a head retrains bit for bit only on
    /// the same kind (its file names it). Cached features are kept apart by format and kind.
    #[arg(long, env = "AEGIS_ENCODER_WEIGHTS", default_value = "auto")]
    pub encoder_weights: String,
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

    /// What the flags ask for, as the one description every front end builds its guard from.
    pub fn setup(&self) -> Result<GuardSetup> {
        // The folder first: a missing one should not wait for the model to load.
        let prompts = self.prompts_dir()?;
        let model = match &self.backend {
            Some(url) => ModelSource::Server(url.clone()),
            None => ModelSource::Local(self.model.request()?),
        };
        Ok(GuardSetup {
            model,
            heads_read: HeadsRead::parse(&self.encoder)?
                .served_by(self.encoder_server.as_deref())?,
            encoder_arithmetic: self
                .encoder_weights
                .parse()
                .map_err(|e: String| anyhow::anyhow!(e))?,
            prompts,
            rejection: RejectionMode::chosen(self.generate_rejection),
            language: None,
        })
    }

    /// The guard, after finishing any apply a kill interrupted in its templates folder (`db`
    /// holds the version list that apply records into).
    pub fn load(&self, db: &DbArgs) -> Result<Guard> {
        let setup = self.setup()?;
        finish_interrupted_applies(db, &setup.prompts)?;
        let (model, encoder) = match self.loaded_encoder.0.get() {
            Some(encoder) => (setup.load_model()?, encoder.clone()),
            None => {
                let (model, encoder) = setup.load_model_and_encoder()?;
                let encoder = self.loaded_encoder.0.get_or_init(|| encoder).clone();
                (model, encoder)
            }
        };
        self.report(setup.guard_on(model, encoder, &setup.prompts)?)
    }

    /// Whether heads read a sentence encoder rather than the model's hidden states.
    pub fn encoder_chosen(&self) -> bool {
        self.encoder.trim() != "decoder" || self.encoder_server.is_some()
    }

    /// The sentence encoder `--encoder` names, loaded once however many guards use it (`aegis
    /// eval --compare` builds two); `None` for the decoder's hidden states.
    pub fn load_encoder(&self) -> Result<Option<Arc<dyn SentenceEncoder>>> {
        if let Some(loaded) = self.loaded_encoder.0.get() {
            return Ok(loaded.clone());
        }
        let loaded = self.setup()?.load_encoder()?;
        Ok(self.loaded_encoder.0.get_or_init(|| loaded).clone())
    }

    /// A guard from the templates in `dir` on an already loaded model (one model can serve
    /// several template sets, as `aegis eval --compare` does).
    pub fn guard_on(&self, model: Arc<dyn LanguageModel>, dir: &Path) -> Result<Guard> {
        let built = self.setup()?.guard_on(model, self.load_encoder()?, dir)?;
        self.report(built)
    }

    /// Says on stderr what the built guard could not use.
    fn report(&self, built: BuiltGuard) -> Result<Guard> {
        if let Some(reason) = &built.heads_unavailable {
            eprintln!("note: {reason}; each validator's prompt decides");
        }
        for problem in built.problems_to_report() {
            match problem {
                GuardError::HeadRefused { .. } | GuardError::ReadingOff { .. } => {
                    eprintln!("warning: {problem}")
                }
                _ => eprintln!("warning: template refused: {problem}"),
            }
        }
        Ok(built.guard)
    }
}

/// Finishes an apply a kill interrupted, before anything reads the heads or the version list
/// (see `aegis_teach::finish_interrupted_applies`). Opens the database only when there is one.
pub(crate) fn finish_interrupted_applies(db: &DbArgs, prompts: &Path) -> Result<()> {
    if aegis_teach::interrupted_applies(prompts)?.is_empty() {
        return Ok(());
    }
    let actor = db.actor();
    let finished = with_store(db, |store| async move {
        Ok(aegis_teach::finish_interrupted_applies(&store, &actor, prompts).await?)
    })?;
    report_finished(&finished);
    Ok(())
}

pub(crate) fn report_finished(finished: &[aegis_teach::Applied]) {
    for applied in finished {
        eprintln!(
            "note: finished applying {}'s head (version {}), which a kill or crash interrupted",
            applied.validator, applied.version
        );
    }
}
