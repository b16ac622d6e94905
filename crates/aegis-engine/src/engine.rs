//! The engine's public face: a `LanguageModel` that scores yes/no prompts and generates text,
//! and `GemmaEngine`, which implements it on a local Gemma 3.

use std::time::Instant;

use std::ops::Range;

use candle_core::{DType, Device, Tensor};

use crate::error::{EngineError, Result};
use crate::model::{two_way_probability, Gemma3, KvCache, WeightFormat};
use crate::source::{ResolvedModel, WeightFiles};
use crate::tokenizer::{EncodedPrompt, GemmaTokenizer, Segment};

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
}

/// Anything that can answer the guard's questions: the local Gemma, or (later) a remote server.
pub trait LanguageModel: Send + Sync {
    fn info(&self) -> &ModelInfo;

    /// Tokens the user's text takes on its own, for error messages and limits.
    fn count_user_tokens(&self, text: &str) -> Result<usize>;

    /// Tokens a whole prompt takes.
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> Result<usize>;

    /// P(Yes) at the end of each prompt (softmax over the logits of the `Yes` and `No` tokens),
    /// with the hidden states learned heads read, from the same forward pass.
    fn score(&self, prompts: &[Prompt]) -> Result<Scores>;

    /// Greedy decoding after `prompt`, up to `max_tokens`, stopping at the end of the model's turn.
    /// Each new piece of text is passed to `on_text` as it is produced.
    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<String>;
}

/// One prompt's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// P(Yes) against No, in (0, 1).
    pub p_yes: f32,
    /// Time from the start of the call until this answer was ready (shared work included).
    pub elapsed_ms: f64,
    /// Final (normed) hidden state at the prompt's last position, where the answer is read:
    /// conditioned on the message and on this prompt's policy text.
    pub answer_hidden: Vec<f32>,
}

/// The answers to a set of prompts about one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    /// One per prompt, in order.
    pub answers: Vec<Scored>,
    /// Mean final hidden state over the first prompt's user-text tokens (empty if it has none).
    /// When every prompt opens with the same text and message, this is shared by all of them.
    pub message_mean: Vec<f32>,
}

/// Which device to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA when compiled in and a GPU is present, else CPU.
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| EngineError::UnknownDevice(other.to_string())),
        }
    }
}

impl DeviceChoice {
    pub fn open(self) -> Result<Device> {
        Ok(match self {
            Self::Cpu => Device::Cpu,
            Self::Cuda(n) => Device::new_cuda(n)?,
            Self::Auto if candle_core::utils::cuda_is_available() => Device::new_cuda(0)?,
            Self::Auto => Device::Cpu,
        })
    }
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub device: DeviceChoice,
    pub weight_format: WeightFormat,
    /// Cap on prompt length in tokens; the model's own context when larger is never exceeded.
    pub max_context: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            device: DeviceChoice::Auto,
            weight_format: WeightFormat::default(),
            // Attention here is computed densely; 4,096 tokens keeps one request's scratch memory
            // in the low hundreds of MiB on CPU while covering any chat message.
            max_context: 4096,
        }
    }
}

pub struct GemmaEngine {
    model: Gemma3,
    tokenizer: GemmaTokenizer,
    info: ModelInfo,
    yes_id: u32,
    no_id: u32,
}

impl std::fmt::Debug for GemmaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmaEngine")
            .field("info", &self.info)
            .finish()
    }
}

impl GemmaEngine {
    pub fn load(resolved: &ResolvedModel, options: &LoadOptions) -> Result<Self> {
        let started = Instant::now();
        let device = options.device.open()?;
        let tokenizer = GemmaTokenizer::from_file(&resolved.tokenizer)?;
        let model = Gemma3::load(&resolved.weights, options.weight_format, &device)?;
        let content_hash = match &resolved.weights {
            WeightFiles::Gguf(path) => crate::hash::file_sha256(path)?,
            WeightFiles::Safetensors { shards, .. } => crate::hash::files_sha256(shards)?,
        };
        let answer_id = |token: &str| {
            tokenizer
                .token_id(token)
                .ok_or_else(|| EngineError::Tokenizer {
                    path: resolved.tokenizer.clone(),
                    message: format!("has no {token:?} token to score answers with"),
                })
        };
        let (yes_id, no_id) = (answer_id("Yes")?, answer_id("No")?);
        let info = ModelInfo {
            id: resolved.id.clone(),
            content_hash,
            device: device_name(&device),
            weight_format: format!("{:?}", options.weight_format).to_lowercase(),
            context_length: options.max_context.min(model.config().context_length),
        };
        tracing::info!(model = %info.id, device = %info.device, elapsed_ms = started.elapsed().as_millis() as u64, "model loaded");
        Ok(Self {
            model,
            tokenizer,
            info,
            yes_id,
            no_id,
        })
    }

    pub fn tokenizer(&self) -> &GemmaTokenizer {
        &self.tokenizer
    }

    pub fn model(&self) -> &Gemma3 {
        &self.model
    }

    fn encode_checked(&self, prompt: &[Segment]) -> Result<EncodedPrompt> {
        let encoded = self.tokenizer.encode_prompt_with_spans(prompt)?;
        if encoded.ids.len() > self.info.context_length {
            return Err(EngineError::ContextExceeded {
                prompt_tokens: encoded.ids.len(),
                limit: self.info.context_length,
            });
        }
        Ok(encoded)
    }

    /// Last-position logits over the whole vocabulary for raw token ids (reference checks).
    pub fn last_logits(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let hidden = self.model.forward(ids, &mut KvCache::default())?;
        self.model.logits(&Gemma3::last_row(&hidden)?)
    }

    /// Last-position logits of chosen tokens only, through the exact path scoring uses.
    pub fn last_logits_for(&self, ids: &[u32], tokens: &[u32]) -> Result<Vec<f32>> {
        let hidden = self.model.forward(ids, &mut KvCache::default())?;
        self.model.logits_for(&Gemma3::last_row(&hidden)?, tokens)
    }

    /// Greedy continuation of raw token ids, `steps` tokens, no stop tokens (reference checks).
    pub fn greedy_ids(&self, ids: &[u32], steps: usize) -> Result<Vec<u32>> {
        let mut cache = KvCache::default();
        let mut out = Vec::with_capacity(steps);
        let mut next_input = ids.to_vec();
        for _ in 0..steps {
            let hidden = self.model.forward(&next_input, &mut cache)?;
            let next = argmax(&self.model.logits(&Gemma3::last_row(&hidden)?)?);
            out.push(next);
            next_input = vec![next];
        }
        Ok(out)
    }
}

fn argmax(values: &[f32]) -> u32 {
    values
        .iter()
        .enumerate()
        .fold((0usize, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 {
                (i, v)
            } else {
                best
            }
        })
        .0 as u32
}

fn device_name(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".to_string(),
        Device::Cuda(_) => "cuda".to_string(),
        Device::Metal(_) => "metal".to_string(),
    }
}

/// Mean of the rows of `hidden` (`[len, hidden]`) inside `spans`; empty when they cover nothing.
fn mean_rows(hidden: &Tensor, spans: &[Range<usize>]) -> Result<Vec<f32>> {
    let positions: Vec<u32> = spans
        .iter()
        .flat_map(|s| s.clone())
        .map(|p| p as u32)
        .collect();
    if positions.is_empty() {
        return Ok(Vec::new());
    }
    let index = Tensor::new(positions.as_slice(), hidden.device())?;
    let rows = hidden.index_select(&index, 0)?.to_dtype(DType::F32)?;
    Ok(rows.mean(0)?.to_vec1()?)
}

/// Length of the token prefix all sequences share, leaving each at least one token of its own
/// (the answer position must be computed per prompt).
fn shared_prefix_len(seqs: &[&[u32]]) -> usize {
    let Some(first) = seqs.first() else { return 0 };
    let mut len = seqs
        .iter()
        .map(|s| s.len().saturating_sub(1))
        .min()
        .unwrap_or(0);
    for seq in &seqs[1..] {
        len = len.min(first.iter().zip(*seq).take_while(|(a, b)| a == b).count());
    }
    len
}

impl LanguageModel for GemmaEngine {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn count_user_tokens(&self, text: &str) -> Result<usize> {
        self.tokenizer.count_user_tokens(text)
    }

    fn count_prompt_tokens(&self, prompt: &[Segment]) -> Result<usize> {
        Ok(self.tokenizer.encode_prompt(prompt)?.len())
    }

    fn score(&self, prompts: &[Prompt]) -> Result<Scores> {
        let started = Instant::now();
        let encoded = prompts
            .iter()
            .map(|p| self.encode_checked(p))
            .collect::<Result<Vec<_>>>()?;
        let seqs: Vec<&[u32]> = encoded.iter().map(|e| e.ids.as_slice()).collect();
        // The validators' prompts share their opening (preamble and message): compute it once.
        let shared = shared_prefix_len(&seqs);
        let mut base = KvCache::default();
        let shared_hidden = if shared > 0 {
            Some(self.model.forward(&seqs[0][..shared], &mut base)?)
        } else {
            None
        };
        let mut message_mean = Vec::new();
        let mut answers = Vec::with_capacity(seqs.len());
        for (i, seq) in seqs.iter().enumerate() {
            let mut cache = base.clone();
            let hidden = self.model.forward(&seq[shared..], &mut cache)?;
            let answer = Gemma3::last_row(&hidden)?;
            let logits = self.model.logits_for(&answer, &[self.yes_id, self.no_id])?;
            if i == 0 {
                let whole = match &shared_hidden {
                    Some(prefix) => Tensor::cat(&[prefix, &hidden], 0)?,
                    None => hidden.clone(),
                };
                message_mean = mean_rows(&whole, &encoded[0].user_spans)?;
            }
            answers.push(Scored {
                p_yes: two_way_probability(logits[0], logits[1]),
                elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
                answer_hidden: answer.to_dtype(DType::F32)?.to_vec1()?,
            });
        }
        Ok(Scores {
            answers,
            message_mean,
        })
    }

    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<String> {
        let ids = self.encode_checked(prompt)?.ids;
        let stops = self.tokenizer.stop_ids();
        let mut cache = KvCache::default();
        let mut generated: Vec<u32> = Vec::new();
        let mut emitted = 0usize;
        let mut text = String::new();
        let mut input = ids;
        while generated.len() < max_tokens && cache.len() + input.len() <= self.info.context_length
        {
            let hidden = self.model.forward(&input, &mut cache)?;
            let next = argmax(&self.model.logits(&Gemma3::last_row(&hidden)?)?);
            if stops.contains(&next) {
                break;
            }
            generated.push(next);
            text = self.tokenizer.decode(&generated)?;
            // Hold back a trailing partial UTF-8 sequence until the next token completes it.
            if !text.ends_with('\u{FFFD}') && text.len() > emitted {
                if let Some(fresh) = text.get(emitted..) {
                    on_text(fresh);
                }
                emitted = text.len();
            }
            input = vec![next];
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefix_leaves_every_prompt_a_token() {
        assert_eq!(shared_prefix_len(&[&[1, 2, 3, 4], &[1, 2, 3, 5]]), 3);
        assert_eq!(shared_prefix_len(&[&[1, 2, 3], &[1, 2, 3]]), 2);
        assert_eq!(shared_prefix_len(&[&[1, 2], &[3]]), 0);
        assert_eq!(shared_prefix_len(&[&[7, 8, 9]]), 2);
        assert_eq!(shared_prefix_len(&[]), 0);
    }

    #[test]
    fn mean_rows_averages_only_the_spans() -> Result<()> {
        let hidden = Tensor::new(
            &[[1f32, 10.], [2., 20.], [3., 30.], [4., 40.]],
            &Device::Cpu,
        )?;
        assert_eq!(mean_rows(&hidden, &[1..2, 3..4])?, vec![3.0, 30.0]);
        assert!(mean_rows(&hidden, &[])?.is_empty());
        Ok(())
    }

    #[test]
    fn parses_devices() {
        assert_eq!("cpu".parse::<DeviceChoice>().ok(), Some(DeviceChoice::Cpu));
        assert_eq!(
            "cuda:1".parse::<DeviceChoice>().ok(),
            Some(DeviceChoice::Cuda(1))
        );
        assert!("tpu".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[0.1, 3.0, 3.0, -1.0]), 1);
    }
}
