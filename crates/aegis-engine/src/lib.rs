//! Gemma 3 on candle: where the model comes from, how text becomes tokens, the forward pass,
//! and scoring and generation behind the `LanguageModel` trait. Knows nothing of policies.

mod agreement;
mod chat_format;
mod config;
mod cost;
mod encoder;
mod engine;
mod error;
mod hash;
mod language_model;
mod load_options;
mod model;
mod packing;
mod prefix_cache;
mod random;
mod request;
mod source;
mod synthetic;
#[cfg(feature = "test-support")]
pub mod testing;
mod tokenizer;

/// The CPU kernels the encoder may run on, for naming them (`aegis bench`).
pub use aegis_kernels::KernelKind;
pub use agreement::{check_devices, AgreementReport, LogitAgreement, Side};
pub use chat_format::{ChatFormat, Speaker};
pub use config::Gemma3Config;
pub use cost::ComputePlan;
pub use encoder::write_bf16_copy;
pub use encoder::{
    default_encoder_dir, encoder_tokens, resolve_encoder, EmbeddingGemma, EncoderAdapter,
    EncoderArithmetic, EncoderInfo, EncoderOutput, EncoderReading, EncoderSpec, LowRankUpdate,
    Projection, SentenceEncoder, CLASSIFICATION_PROMPT,
};
pub use engine::GemmaEngine;
pub use error::{EngineError, Result};
pub use hash::file_sha256;
pub use language_model::{
    two_way_probability, whole_answer, Encoding, LanguageModel, ModelInfo, Prompt, Scored, Scores,
    SYNTHETIC_WARNING,
};
pub use load_options::{DeviceChoice, LoadOptions};
pub use model::{rope_table, Gemma3, KvCache, LayerWeights, WeightFormat};
pub use prefix_cache::PrefixCacheStats;
pub use random::SplitMix64;
pub use request::{DownloadReport, ModelRequest};
pub use source::{
    default_model_dir, resolve, DownloadListener, DownloadProgress, HubOptions, ModelSpec,
    ResolvedModel, WeightFiles,
};
pub use synthetic::{synthetic_storage, write_synthetic_gguf, GemmaShape, SyntheticSpec};
pub use tokenizer::{EncodedPrompt, GemmaTokenizer, Segment};
