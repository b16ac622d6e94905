//! Sentence encoders: a second model, beside the decoder, whose only job is to turn a message
//! into one vector for learned heads to read. EmbeddingGemma-300M is the one we ship support for:
//! a multilingual Gemma 3 encoder, so a head trained on English abuse can recognise Indonesian.

mod adapter;
mod arithmetic;
mod bf16_copy;
mod embedding_gemma;
mod sentence_modules;
mod source;

pub use adapter::{EncoderAdapter, LowRankUpdate, Projection};
pub use arithmetic::EncoderArithmetic;
pub use bf16_copy::write_bf16_copy;
pub use embedding_gemma::EmbeddingGemma;
pub use source::{default_encoder_dir, resolve_encoder, EncoderSpec};

use crate::cost::ComputePlan;
use crate::error::{EngineError, Result};
use crate::tokenizer::{GemmaTokenizer, Segment};

/// The task prompt EmbeddingGemma's model card names for classification, for an encoder that
/// cannot read it from the folder (one on a server): the console puts it before each message.
pub const CLASSIFICATION_PROMPT: &str = "task: classification | query: ";

/// The tokens an EmbeddingGemma encoder reads for `text`: `<bos>`, the encoder's task prompt, the
/// text as user text (control-token spellings stay text), `<eos>`; within its context.
pub fn encoder_tokens(
    tokenizer: &GemmaTokenizer,
    encoder: &EncoderInfo,
    text: &str,
) -> Result<Vec<u32>> {
    // The prompt ends in a space that the text's first word carries when the two are tokenised
    // as one string (`▁hello`, not `▁` then `hello`): give the space to the text.
    let prompt = encoder.prompt.trim_end();
    let gap = &encoder.prompt[prompt.len()..];
    let mut ids = tokenizer.encode_prompt(&[
        Segment::Template(prompt.to_string()),
        Segment::User(format!("{gap}{text}")),
    ])?;
    ids.push(tokenizer.eos_id());
    if ids.len() > encoder.context_length {
        return Err(EngineError::ContextExceeded {
            prompt_tokens: ids.len(),
            limit: encoder.context_length,
        });
    }
    Ok(ids)
}

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
    /// Transformer layers: a reading may stop after any of them (see [`EncoderReading`]).
    pub layers: usize,
    pub device: String,
    /// How the weights are held and run (`bf16 layers (avx512-bf16 kernels), Q8_0 embedding` on
    /// CPU): embeddings differ in their last digits between these, so cached features are keyed
    /// by it.
    pub weight_format: String,
    /// For an encoder on a server, whose weights cannot be hashed here: the `content_hash` of the
    /// weights it was shown to compute, by embedding the heads' probe texts as they recorded.
    pub matches_weights: Option<String>,
}

impl EncoderInfo {
    /// Records that this encoder was shown, by the heads' probe texts, to compute the encoder
    /// whose weights hash to `content_hash` (a server, or a bf16 copy of those weights): heads
    /// trained on those weights read it.
    pub fn accept_as(&mut self, content_hash: &str) {
        self.matches_weights = Some(content_hash.to_string());
    }
}

/// What to read of a message. A head may read the sentence embedding (every layer, pooling,
/// projections) or the mean of the residual stream after an earlier layer, which costs only the
/// layers up to it: the pass stops after the deepest layer asked for unless the embedding is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncoderReading {
    /// Layers whose mean over the input's tokens (task prompt included) is wanted, 1 = after the
    /// first; reported in this order.
    pub layers: Vec<usize>,
    pub embedding: bool,
    /// Each token's final state after the dense layers, for a head that pools them itself
    /// (`aegis_heads::AttentionPooling`).
    pub token_states: bool,
}

impl EncoderReading {
    /// The sentence embedding only.
    pub fn embedding() -> Self {
        Self {
            layers: Vec::new(),
            embedding: true,
            token_states: false,
        }
    }

    /// Means after `layers`, no embedding.
    pub fn layers(layers: Vec<usize>) -> Self {
        Self {
            layers,
            embedding: false,
            token_states: false,
        }
    }

    /// Layers the pass runs through for this reading on an encoder of `total` layers.
    pub fn depth(&self, total: usize) -> usize {
        if self.embedding || self.token_states {
            total
        } else {
            self.layers.iter().copied().max().unwrap_or(0)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty() && !self.embedding && !self.token_states
    }
}

/// One message read as an [`EncoderReading`] asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncoderOutput {
    /// The mean after each asked layer, in the reading's order.
    pub layer_means: Vec<Vec<f32>>,
    pub embedding: Option<Vec<f32>>,
    /// Each token's final state after the dense layers, row-major `[tokens, dimensions]`: the
    /// sentence embedding is their mean, normalised (the dense layers are linear).
    pub token_states: Option<Vec<f32>>,
}

/// Turns messages into embeddings. The message is data: it never becomes a control token.
pub trait SentenceEncoder: Send + Sync {
    fn info(&self) -> &EncoderInfo;

    /// Whether it can answer now: an encoder on a server may have gone away since it was
    /// connected. A local one always can.
    fn probe(&self) -> Result<()> {
        Ok(())
    }

    /// One reading per text, in order; one text's error (too long, say) does not fail the others.
    fn read_batch(&self, texts: &[&str], reading: &EncoderReading) -> Vec<Result<EncoderOutput>>;

    /// The sentence embedding of each text (see [`Self::read_batch`]).
    fn embed_batch(&self, texts: &[&str]) -> Vec<Result<Vec<f32>>> {
        self.read_batch(texts, &EncoderReading::embedding())
            .into_iter()
            .map(|read| read.map(|output| output.embedding.unwrap_or_default()))
            .collect()
    }

    /// The work of reading `text` as `reading` asks (task prompt and special tokens included):
    /// the bench's measure of the encoder's share of a verdict.
    fn plan(&self, text: &str, reading: &EncoderReading) -> Result<ComputePlan>;

    /// The rate its layers' matrix products sustain, in GFLOP/s over about `duration`, on its
    /// own feed-forward shape: the bench's floor for a verdict the encoder decides. `None` where
    /// it cannot be measured (a remote or fake encoder).
    fn matmul_gflops(&self, _duration: std::time::Duration) -> Option<f64> {
        None
    }
}
