use std::path::PathBuf;

/// Everything that can go wrong between a model name and a score.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("model not found: {0}")]
    ModelNotFound(String),
    #[error("{path}: {message}")]
    InvalidModel { path: PathBuf, message: String },
    #[error("downloading {repo} from the Hugging Face hub failed: {message}")]
    Download { repo: String, message: String },
    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("tokenizing failed: {0}")]
    Tokenize(String),
    #[error("user text produced control token id {id}; refusing to run it (prompt boundary)")]
    ControlTokenInUserText { id: u32 },
    #[error("the prompt is {prompt_tokens} tokens, over the model's context of {limit} tokens")]
    ContextExceeded { prompt_tokens: usize, limit: usize },
    #[error("no layer {layer}: the model has layers 1 to {layers}")]
    UnknownLayer { layer: usize, layers: usize },
    #[error("{0} is not available from this model backend")]
    Unsupported(&'static str),
    #[error("empty prompt")]
    EmptyPrompt,
    #[error("{0}")]
    UnknownWeightFormat(String),
    #[error("unknown device {0:?}: use auto, cpu, cuda or cuda:N")]
    UnknownDevice(String),
    #[error("this build has no GPU support: rebuild with `--features cuda` (scripts/build-cuda.sh) or use --device cpu")]
    CudaNotBuilt,
    #[error("GPU {0} (is the NVIDIA driver loaded and the index right? `nvidia-smi` lists GPUs)")]
    DeviceUnavailable(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the model server at {url}: {message}")]
    Backend { url: String, message: String },
    /// The model server cannot be reached or keeps failing (connection refused, timeouts, 5xx
    /// after retries): a later try may succeed, so callers wait rather than give up on the input.
    #[error("the model server at {url} is unavailable: {message}")]
    BackendUnavailable { url: String, message: String },
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl EngineError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::InvalidModel {
            path: path.into(),
            message: message.into(),
        }
    }
}
