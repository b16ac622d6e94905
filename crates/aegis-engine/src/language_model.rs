//! What the guard asks of a model, whatever runs it: the `LanguageModel` trait and the answers
//! it gives.

use std::ops::ControlFlow;

use crate::error::{EngineError, Result};
use crate::prefix_cache::PrefixCacheStats;
use crate::tokenizer::Segment;

/// A prompt as segments, so template text and user text keep their tokenisation rules.
pub type Prompt = Vec<Segment>;

/// What a verdict records about the model that produced it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelInfo {
    pub id: String,
    /// sha256 of the weight file(s).
    pub content_hash: String,
    pub device: String,
    pub weight_format: String,
    /// Longest prompt, in tokens, the engine accepts.
    pub context_length: usize,
    /// Transformer layers: hidden states can be read after any of 1 to this many.
    pub layers: usize,
    /// Seeded random weights (`aegis model synth`): good for timing, its verdicts mean nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub synthetic: bool,
    /// How the model marks chat turns: the guard's own prompts (answers, rejections, the
    /// heads' encoding) are rendered in it.
    pub chat_format: crate::ChatFormat,
}

/// What every report shows beside a synthetic model's results.
pub const SYNTHETIC_WARNING: &str =
    "SYNTHETIC MODEL: random weights for speed tests; its verdicts mean nothing";

/// Anything that can answer the guard's questions: the local Gemma, or a model server
/// (`aegis-remote`).
pub trait LanguageModel: Send + Sync {
    fn info(&self) -> &ModelInfo;

    /// Tokens the user's text takes on its own, for error messages and limits.
    fn count_user_tokens(&self, text: &str) -> Result<usize>;

    /// Tokens a whole prompt takes.
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> Result<usize>;

    /// P(Yes) at the end of each prompt (softmax over the logits of the `Yes` and `No` tokens).
    fn score(&self, prompts: &[Prompt]) -> Result<Scores>;

    /// `score` for several messages at once (each with its own prompts), in one batch where the
    /// model can: the worker drains concurrent requests into this. One message's error (too long,
    /// say) does not fail the others.
    fn score_batch(&self, messages: &[Vec<Prompt>]) -> Vec<Result<Scores>> {
        messages.iter().map(|prompts| self.score(prompts)).collect()
    }

    /// For each prompt, the mean over its user-text tokens of the hidden state after each of
    /// `layers` (1 = after the first layer): what learned heads read. One batched forward pass that
    /// stops after the deepest layer asked for. A backend without hidden states says so.
    fn encode_batch(&self, prompts: &[Prompt], layers: &[usize]) -> Vec<Result<Encoding>> {
        let _ = layers;
        prompts
            .iter()
            .map(|_| Err(EngineError::Unsupported("hidden states")))
            .collect()
    }

    /// Whether the model can answer now. A local model always can once loaded; a model server
    /// is asked, briefly, so `/health` can report one that went away. Blocking.
    fn probe(&self) -> Result<()> {
        Ok(())
    }

    /// The cross-request cache of template openings, for reports; `None` without one.
    fn prefix_cache_stats(&self) -> Option<PrefixCacheStats> {
        None
    }

    /// Drops cached template openings (templates changed; entries are keyed by their tokens, so
    /// this only frees memory sooner).
    fn clear_prefix_cache(&self) {}

    /// Greedy decoding after `prompt`, up to `max_tokens`, stopping at the end of the model's turn.
    /// Each new piece of text is passed to `on_text` as it is produced (an empty one while the
    /// prompt is still being read); its `Break` stops the generation there (the client went
    /// away), and the text so far is returned.
    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<String>;
}

/// An `on_text` for [`LanguageModel::generate`] that neither streams nor stops early.
pub fn whole_answer(_: &str) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// One prompt's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// P(Yes) against No, in (0, 1).
    pub p_yes: f32,
    /// Time from the start of the call until this answer was ready (shared work included).
    pub elapsed_ms: f64,
}

/// The answers to a set of prompts about one message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scores {
    /// One per prompt, in order.
    pub answers: Vec<Scored>,
}

/// A prompt's user text as the model reads it: the mean hidden state over its tokens after each
/// requested layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoding {
    /// The layers, as requested.
    pub layers: Vec<usize>,
    /// One mean per layer, in the order of `layers`.
    pub means: Vec<Vec<f32>>,
    pub elapsed_ms: f64,
}

impl Encoding {
    /// The mean after `layer`, if it was requested.
    pub fn layer(&self, layer: usize) -> Option<&[f32]> {
        let at = self.layers.iter().position(|&l| l == layer)?;
        self.means.get(at).map(Vec::as_slice)
    }
}

/// Softmax over two logits: P(first).
pub fn two_way_probability(first: f32, second: f32) -> f32 {
    let m = first.max(second);
    let (a, b) = ((first - m).exp(), (second - m).exp());
    a / (a + b)
}
