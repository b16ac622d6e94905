//! Sentence encoders: a second model, beside the decoder, whose only job is to turn a message
//! into one vector for learned heads to read. EmbeddingGemma-300M is the one we ship support for:
//! a multilingual Gemma 3 encoder, so a head trained on English abuse can recognise Indonesian.

mod embedding_gemma;
mod source;

pub use embedding_gemma::EmbeddingGemma;
pub use source::{default_encoder_dir, resolve_encoder, EncoderSpec, ENCODER_DIR_ENV};

use crate::error::Result;

/// What a head trained on an encoder records, and a report shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EncoderInfo {
    /// `embeddinggemma-300m`, or the hub id / folder name it came from.
    pub id: String,
    /// sha256 of the weight files (transformer and projections): heads bind to exactly these.
    pub content_hash: String,
    /// The task prompt put before every message (the model card's, for classification).
    pub prompt: String,
    /// Length of the embedding.
    pub dimensions: usize,
    /// Longest input, in tokens (prompt and message together).
    pub context_length: usize,
    pub device: String,
    /// How the weights are held (`f32 layers, Q8_0 embedding` on CPU): embeddings differ in
    /// their last digits between storages, so cached features are keyed by it.
    pub weight_format: String,
}

/// Turns messages into embeddings. The message is data: it never becomes a control token.
pub trait SentenceEncoder: Send + Sync {
    fn info(&self) -> &EncoderInfo;

    /// One embedding per text, in order; one text's error (too long, say) does not fail the others.
    fn embed_batch(&self, texts: &[&str]) -> Vec<Result<Vec<f32>>>;

    /// How many tokens embedding `text` computes (task prompt and special tokens included): the
    /// bench's measure of the encoder's work.
    fn count_tokens(&self, text: &str) -> Result<usize>;
}
