//! `GemmaEngine`: the `LanguageModel` on a local Gemma 3, scoring yes/no prompts in packed
//! batches over cached template openings, encoding user text for learned heads, generating text.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use candle_core::{DType, Tensor};

use crate::error::{EngineError, Result};
use crate::language_model::two_way_probability;
use crate::language_model::{
    Encoding, LanguageModel, ModelInfo, Prompt, Scored, Scores, SYNTHETIC_WARNING,
};
use crate::load_options::LoadOptions;
use crate::model::{Gemma3, KvCache, Output, WeightFormat};
use crate::packing::{PackRequest, PackedBatch};
use crate::prefix_cache::{PrefixCache, PrefixCacheStats};
use crate::source::{ResolvedModel, WeightFiles};
use crate::tokenizer::{EncodedPrompt, GemmaTokenizer, Segment};

pub struct GemmaEngine {
    model: Gemma3,
    weight_format: WeightFormat,
    tokenizer: GemmaTokenizer,
    info: ModelInfo,
    yes_id: u32,
    no_id: u32,
    prefix_cache: Mutex<PrefixCache>,
}

/// Pack rows per forward step on the CPU: bounds the attention scratch memory of long prompts,
/// while keeping matrix products large enough to run near the machine's GEMM rate.
const PACK_CHUNK: usize = 512;
/// On a GPU a step costs launches whatever its rows, and the padded layout bounds its scratch by
/// the widest prompt: 32 short messages' four prompts (about 4,000 rows) run as one step.
const GPU_PACK_CHUNK: usize = 8192;

/// Template openings shorter than this are recomputed rather than cached.
const MIN_CACHED_OPENING: usize = 8;

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
        let (device, device_name) = options.device.open()?;
        // Beside an encoder on CPU, f32 layers would take the pair past 1.5 GiB (README).
        let weight_format = options.weight_format.unwrap_or_else(|| {
            if options.beside_encoder && device.is_cpu() {
                WeightFormat::Quantized
            } else {
                WeightFormat::best_for(&device)
            }
        });
        let tokenizer = GemmaTokenizer::from_file(&resolved.tokenizer)?;
        let model = Gemma3::load(&resolved.weights, weight_format, &device)?;
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
        let cache_bytes = options.prefix_cache_bytes.unwrap_or_else(|| {
            crate::prefix_cache::default_capacity_bytes(
                model.config(),
                weight_format.activation_dtype().size_in_bytes(),
                !device.is_cpu(),
            )
        });
        let info = ModelInfo {
            id: resolved.id.clone(),
            content_hash,
            device: device_name,
            weight_format: weight_format.name().to_string(),
            context_length: options.max_context.min(model.config().context_length),
            layers: model.config().num_layers,
            synthetic: model.is_synthetic(),
            chat_format: crate::ChatFormat::Gemma,
        };
        if info.synthetic {
            tracing::warn!(model = %info.id, "{SYNTHETIC_WARNING}");
        }
        tracing::info!(model = %info.id, device = %info.device, elapsed_ms = started.elapsed().as_millis() as u64, "model loaded");
        Ok(Self {
            model,
            weight_format,
            tokenizer,
            info,
            yes_id,
            no_id,
            prefix_cache: Mutex::new(PrefixCache::new(cache_bytes)),
        })
    }

    pub fn tokenizer(&self) -> &GemmaTokenizer {
        &self.tokenizer
    }

    pub fn model(&self) -> &Gemma3 {
        &self.model
    }

    /// The format the weights were loaded in (the option's, or the device's best).
    pub fn weight_format(&self) -> WeightFormat {
        self.weight_format
    }

    pub(crate) fn encode_checked(&self, prompt: &[Segment]) -> Result<EncodedPrompt> {
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

pub(crate) fn argmax(values: &[f32]) -> u32 {
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

/// Mean of the rows of `hidden` (`[len, hidden]`) at `rows`; empty when there are none.
fn mean_rows(hidden: &Tensor, rows: &[u32]) -> Result<Vec<f32>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let index = Tensor::new(rows, hidden.device())?;
    let picked = hidden.index_select(&index, 0)?.to_dtype(DType::F32)?;
    Ok(picked.mean(0)?.to_vec1()?)
}

/// Where a prompt's static opening ends: the template text before the user's first token (never
/// the whole prompt: the answer position is computed per request). 0 when too short to cache.
fn opening_len(prompt: &EncodedPrompt) -> usize {
    let last = prompt.ids.len().saturating_sub(1);
    let end = prompt
        .user_spans
        .first()
        .map_or(last, |span| span.start)
        .min(last);
    if end >= MIN_CACHED_OPENING {
        end
    } else {
        0
    }
}

fn common_prefix_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl GemmaEngine {
    fn prefix_cache(&self) -> MutexGuard<'_, PrefixCache> {
        self.prefix_cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keys and values for each opening: from the cross-request cache, or computed (sharing
    /// work between openings of this call that begin alike) and then cached.
    fn contexts_for(&self, openings: &[&[u32]]) -> Result<Vec<KvCache>> {
        let mut cache = self.prefix_cache();
        let mut computed: Vec<(&[u32], KvCache)> = Vec::new();
        let mut contexts = Vec::with_capacity(openings.len());
        for &opening in openings {
            if let Some(kv) = cache.get(opening) {
                contexts.push(kv);
                continue;
            }
            let nearest = computed
                .iter()
                .map(|(tokens, kv)| (common_prefix_len(tokens, opening), kv))
                .max_by_key(|(shared, _)| *shared)
                .filter(|(shared, _)| *shared > 0);
            let kv = match nearest {
                Some((shared, kv)) => {
                    let mut kv = kv.truncated(shared)?;
                    if shared < opening.len() {
                        self.model.forward(&opening[shared..], &mut kv)?;
                    }
                    kv
                }
                None => {
                    let mut kv = KvCache::default();
                    self.model.forward(opening, &mut kv)?;
                    kv
                }
            };
            cache.insert(opening.to_vec(), kv.clone());
            computed.push((opening, kv.clone()));
            contexts.push(kv);
        }
        Ok(contexts)
    }

    fn pack_chunk(&self) -> usize {
        if self.model.device().is_cpu() {
            PACK_CHUNK
        } else {
            GPU_PACK_CHUNK
        }
    }

    /// The token trie of `prompts` after their static openings, and those openings (what the
    /// batch's contexts must hold, in the order the batch refers to them).
    pub(crate) fn pack<'a>(&self, prompts: &[&'a EncodedPrompt]) -> (PackedBatch, Vec<&'a [u32]>) {
        let mut opening_index: HashMap<&[u32], usize> = HashMap::new();
        let mut openings: Vec<&[u32]> = Vec::new();
        let mut requests = Vec::with_capacity(prompts.len());
        for prompt in prompts {
            let opened = opening_len(prompt);
            let context = (opened > 0).then(|| {
                let opening = &prompt.ids[..opened];
                let index = *opening_index.entry(opening).or_insert_with(|| {
                    openings.push(opening);
                    openings.len() - 1
                });
                (index, opened)
            });
            requests.push(PackRequest {
                context,
                rest: &prompt.ids[opened..],
            });
        }
        (PackedBatch::build(&requests), openings)
    }

    /// The fast path: every prompt of every message in one packed forward after the cached
    /// openings. Shared tokens (a message common to all validators, say) are computed once.
    fn score_encoded(
        &self,
        messages: &[Vec<EncodedPrompt>],
        started: Instant,
    ) -> Result<Vec<Scores>> {
        let prompts: Vec<&EncodedPrompt> = messages.iter().flatten().collect();
        if prompts.is_empty() {
            // Messages with no prompts (every validator decided by its head) have no answers.
            return Ok(messages.iter().map(|_| Scores::default()).collect());
        }
        let (batch, openings) = self.pack(&prompts);
        let contexts = self.contexts_for(&openings)?;
        let hidden = self
            .model
            .forward_packed(&batch, &contexts, self.pack_chunk(), Output::Final)?
            .remove(0);

        let answer_rows: Vec<u32> = batch
            .rows
            .iter()
            .map(|rows| rows.last().copied().unwrap_or(0) as u32)
            .collect();
        let answer_hidden =
            hidden.index_select(&Tensor::new(answer_rows.as_slice(), hidden.device())?, 0)?;
        let logits = self
            .model
            .logits_for_rows(&answer_hidden, &[self.yes_id, self.no_id])?;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;

        let mut answers = logits.into_iter();
        Ok(messages
            .iter()
            .map(|prompts| Scores {
                answers: answers
                    .by_ref()
                    .take(prompts.len())
                    .map(|logits| Scored {
                        p_yes: two_way_probability(logits[0], logits[1]),
                        elapsed_ms,
                    })
                    .collect(),
            })
            .collect())
    }

    /// Every prompt in one packed forward up to the deepest of `layers`; per prompt, the mean
    /// over its user tokens after each layer.
    fn encode_encoded(&self, prompts: &[EncodedPrompt], layers: &[usize]) -> Result<Vec<Encoding>> {
        let started = Instant::now();
        let refs: Vec<&EncodedPrompt> = prompts.iter().collect();
        let (batch, openings) = self.pack(&refs);
        let contexts = self.contexts_for(&openings)?;
        let tapped = self.model.forward_packed(
            &batch,
            &contexts,
            self.pack_chunk(),
            Output::Taps(layers),
        )?;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        prompts
            .iter()
            .zip(&batch.rows)
            .map(|(prompt, rows)| {
                let opened = opening_len(prompt);
                let user_rows: Vec<u32> = prompt
                    .user_spans
                    .iter()
                    .flat_map(|span| span.clone())
                    .map(|position| rows[position - opened] as u32)
                    .collect();
                Ok(Encoding {
                    layers: layers.to_vec(),
                    means: tapped
                        .iter()
                        .map(|hidden| mean_rows(hidden, &user_rows))
                        .collect::<Result<_>>()?,
                    elapsed_ms,
                })
            })
            .collect()
    }

    /// `encode_batch` the plain way: each prompt alone through every layer from an empty cache.
    /// The reference the packed path must equal.
    pub fn encode_separately(&self, prompt: &[Segment], layers: &[usize]) -> Result<Encoding> {
        let started = Instant::now();
        let encoded = self.encode_checked(prompt)?;
        let rows: Vec<u32> = encoded
            .user_spans
            .iter()
            .flat_map(|span| span.clone())
            .map(|p| p as u32)
            .collect();
        let mut means = Vec::with_capacity(layers.len());
        for &layer in layers {
            let hidden = self
                .model
                .forward_taps(&encoded.ids, std::slice::from_ref(&layer))?
                .remove(0);
            means.push(mean_rows(&hidden, &rows)?);
        }
        Ok(Encoding {
            layers: layers.to_vec(),
            means,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The plain path: one forward per prompt from an empty cache, nothing shared or cached. The
    /// reference the fast path must equal, and a baseline for benchmarks.
    pub fn score_separately(&self, prompts: &[Prompt]) -> Result<Scores> {
        let started = Instant::now();
        let mut answers = Vec::with_capacity(prompts.len());
        for prompt in prompts {
            let encoded = self.encode_checked(prompt)?;
            let hidden = self.model.forward(&encoded.ids, &mut KvCache::default())?;
            let answer = Gemma3::last_row(&hidden)?;
            let logits = self.model.logits_for(&answer, &[self.yes_id, self.no_id])?;
            answers.push(Scored {
                p_yes: two_way_probability(logits[0], logits[1]),
                elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
            });
        }
        Ok(Scores { answers })
    }
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
        self.score_batch(std::slice::from_ref(&prompts.to_vec()))
            .pop()
            .unwrap_or(Err(EngineError::EmptyPrompt))
    }

    fn score_batch(&self, messages: &[Vec<Prompt>]) -> Vec<Result<Scores>> {
        let started = Instant::now();
        let encoded = messages
            .iter()
            .map(|prompts| prompts.iter().map(|p| self.encode_checked(p)).collect())
            .collect();
        batch_or_one_by_one(encoded, "messages", |batch| {
            self.score_encoded(batch, started)
        })
    }

    fn encode_batch(&self, prompts: &[Prompt], layers: &[usize]) -> Vec<Result<Encoding>> {
        let encoded = prompts.iter().map(|p| self.encode_checked(p)).collect();
        batch_or_one_by_one(encoded, "prompts", |batch| {
            self.encode_encoded(batch, layers)
        })
    }

    fn prefix_cache_stats(&self) -> Option<PrefixCacheStats> {
        Some(self.prefix_cache().stats())
    }

    fn clear_prefix_cache(&self) {
        self.prefix_cache().clear();
    }

    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> std::ops::ControlFlow<()>,
    ) -> Result<String> {
        let ids = self.encode_checked(prompt)?.ids;
        let stops = self.tokenizer.stop_ids();
        let mut cache = KvCache::default();
        // The prompt is read in chunks, and the caller asked between them (with no new text),
        // so one that has gone away stops a long prompt within a chunk, not after all of it.
        let mut hidden = None;
        for chunk in ids.chunks(PREFILL_CHUNK_TOKENS) {
            hidden = Some(self.model.forward(chunk, &mut cache)?);
            if on_text("").is_break() {
                return Ok(String::new());
            }
        }
        let mut hidden = hidden.ok_or(EngineError::EmptyPrompt)?;
        let mut generated: Vec<u32> = Vec::new();
        let mut emitted = 0usize;
        let mut text = String::new();
        while generated.len() < max_tokens {
            let next = argmax(&self.model.logits(&Gemma3::last_row(&hidden)?)?);
            if stops.contains(&next) {
                break;
            }
            generated.push(next);
            text = self.tokenizer.decode(&generated)?;
            // Hold back a trailing partial UTF-8 sequence until the next token completes it.
            let fresh = if !text.ends_with('\u{FFFD}') && text.len() > emitted {
                let fresh = text.get(emitted..).unwrap_or("");
                emitted = text.len();
                fresh
            } else {
                ""
            };
            if on_text(fresh).is_break() || cache.len() >= self.info.context_length {
                break;
            }
            hidden = self.model.forward(&[next], &mut cache)?;
        }
        Ok(text)
    }
}

/// Prompt tokens read per step when writing an answer: small enough that a cancelled answer stops
/// within a fraction of a second, large enough to keep the matrix products efficient.
const PREFILL_CHUNK_TOKENS: usize = 64;

/// Runs `run` once over every item that `prepared` holds, in item order, so the model sees one
/// batch. Items that failed to prepare keep their own error; should the batch fail as a whole,
/// each item is run on its own, so one bad item never costs the others their answers.
pub(crate) fn batch_or_one_by_one<P, T>(
    prepared: Vec<Result<P>>,
    what: &str,
    run: impl Fn(&[P]) -> Result<Vec<T>>,
) -> Vec<Result<T>> {
    let mut results: Vec<Option<Result<T>>> = Vec::with_capacity(prepared.len());
    let mut runnable = Vec::new();
    let mut batch = Vec::new();
    for (i, item) in prepared.into_iter().enumerate() {
        match item {
            Ok(item) => {
                results.push(None);
                runnable.push(i);
                batch.push(item);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    if !batch.is_empty() {
        match run(&batch) {
            Ok(outputs) => {
                for (&i, output) in runnable.iter().zip(outputs) {
                    results[i] = Some(Ok(output));
                }
            }
            Err(e) if runnable.len() > 1 => {
                tracing::warn!(error = %e, count = runnable.len(), "batched run over {what} failed; running them one at a time");
                for (&i, item) in runnable.iter().zip(batch) {
                    results[i] = Some(
                        run(std::slice::from_ref(&item))
                            .and_then(|mut out| out.pop().ok_or(EngineError::EmptyPrompt)),
                    );
                }
            }
            Err(e) => results[runnable[0]] = Some(Err(e)),
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Err(EngineError::EmptyPrompt)))
        .collect()
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn mean_rows_averages_only_the_chosen_rows() -> Result<()> {
        let hidden = Tensor::new(
            &[[1f32, 10.], [2., 20.], [3., 30.], [4., 40.]],
            &Device::Cpu,
        )?;
        assert_eq!(mean_rows(&hidden, &[1, 3])?, vec![3.0, 30.0]);
        assert!(mean_rows(&hidden, &[])?.is_empty());
        Ok(())
    }

    #[test]
    fn a_failed_batch_falls_back_to_one_at_a_time_and_keeps_each_error() {
        let prepared = vec![Ok(1), Err(EngineError::EmptyPrompt), Ok(-2), Ok(3)];
        // A batch holding a negative item fails as a whole, as a bad message can fail a pack.
        let run = |items: &[i32]| -> Result<Vec<i32>> {
            if items.iter().any(|&i| i < 0) {
                return Err(EngineError::Unsupported("negative"));
            }
            Ok(items.iter().map(|i| i * 10).collect())
        };
        let results = batch_or_one_by_one(prepared, "items", run);
        assert!(matches!(results[0], Ok(10)));
        assert!(matches!(results[1], Err(EngineError::EmptyPrompt)));
        assert!(matches!(
            results[2],
            Err(EngineError::Unsupported("negative"))
        ));
        assert!(matches!(results[3], Ok(30)));
        let whole = batch_or_one_by_one(vec![Ok(1), Ok(2)], "items", run);
        assert!(matches!(whole[..], [Ok(10), Ok(20)]));
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[0.1, 3.0, 3.0, -1.0]), 1);
    }
}
