//! What the fast path must compute, in tokens and FLOPs, and how fast this machine multiplies
//! matrices: together, the floor a benchmark compares its latency against.

use std::time::{Duration, Instant};

use candle_core::{DType, Tensor};

use crate::config::Gemma3Config;
use crate::engine::GemmaEngine;
use crate::error::Result;
use crate::language_model::Prompt;
use crate::model::Gemma3;
use crate::packing::PackedBatch;

/// The work of scoring one message's prompts with the template openings already cached.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ComputePlan {
    /// Tokens of all prompts together, as one-prompt-at-a-time scoring computes them.
    pub prompt_tokens: usize,
    /// Tokens the fast path computes: the unique tokens after the cached openings.
    pub computed_tokens: usize,
    /// Floating-point operations of those tokens: linear layers, attention over the keys each
    /// token sees, and the two answer rows of the output head.
    pub flops: f64,
}

impl GemmaEngine {
    /// The fast path's work for `prompts` with a warm prefix cache.
    pub fn plan(&self, prompts: &[Prompt]) -> Result<ComputePlan> {
        let plan = self.plan_packed(prompts, self.model().config().num_layers)?;
        Ok(ComputePlan {
            flops: plan.flops + answer_flops(self.model(), prompts.len()),
            ..plan
        })
    }

    /// The work of `encode_batch(prompts, layers)`: the same packing, through the deepest layer
    /// asked for only (the pass stops there), and no answer rows.
    pub fn plan_encoding(&self, prompts: &[Prompt], layers: &[usize]) -> Result<ComputePlan> {
        self.plan_packed(prompts, layers.iter().copied().max().unwrap_or(0))
    }

    /// `prompts` packed as the fast path packs them, through the first `depth` layers.
    fn plan_packed(&self, prompts: &[Prompt], depth: usize) -> Result<ComputePlan> {
        let encoded = prompts
            .iter()
            .map(|p| self.encode_checked(p))
            .collect::<Result<Vec<_>>>()?;
        let (batch, _) = self.pack(&encoded.iter().collect::<Vec<_>>());
        Ok(ComputePlan {
            prompt_tokens: encoded.iter().map(|e| e.ids.len()).sum(),
            computed_tokens: batch.len(),
            flops: token_flops(self.model(), &batch, depth),
        })
    }

    /// Sustained matrix-multiply rate in the model's dtype on its device, in GFLOP/s, over about
    /// `duration` on the model's own largest shape (a 512-row block through the FFN).
    pub fn matmul_gflops(&self, duration: Duration) -> Result<f64> {
        let cfg = self.model().config();
        let device = self.model().device();
        let rows = 512;
        let dtype = self.model().dtype();
        let a = Tensor::randn(0f32, 1.0, (rows, cfg.hidden_size), device)?.to_dtype(dtype)?;
        let b = Tensor::randn(0f32, 1.0, (cfg.hidden_size, cfg.intermediate_size), device)?
            .to_dtype(dtype)?;
        let flops = 2.0 * (rows * cfg.hidden_size * cfg.intermediate_size) as f64;
        sustained_gflops(duration, flops, || {
            // Reading one element back waits for the device to finish.
            a.matmul(&b)?
                .get(0)?
                .get(0)?
                .to_dtype(DType::F32)?
                .to_scalar::<f32>()?;
            Ok(())
        })
    }
}

/// GFLOP/s of `run` (`flops_per_run` each), repeated for at least `duration` and 3 runs after
/// one warm-up run.
pub(crate) fn sustained_gflops(
    duration: Duration,
    flops_per_run: f64,
    mut run: impl FnMut() -> Result<()>,
) -> Result<f64> {
    run()?;
    let started = Instant::now();
    let mut runs = 0u32;
    while started.elapsed() < duration || runs < 3 {
        run()?;
        runs += 1;
    }
    Ok(flops_per_run * f64::from(runs) / started.elapsed().as_secs_f64() / 1e9)
}

impl std::ops::Add for ComputePlan {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            computed_tokens: self.computed_tokens + other.computed_tokens,
            flops: self.flops + other.flops,
        }
    }
}

/// Linear-layer and attention FLOPs of a packed batch through its first `depth` layers: each token
/// sees its position's keys (up to the window on sliding layers).
fn token_flops(model: &Gemma3, batch: &PackedBatch, depth: usize) -> f64 {
    let cfg = model.config();
    let (linear_per_layer, attention_per_key) = per_token_flops(model.config());
    let mut flops = 0.0;
    for &position in &batch.positions {
        for layer in 0..depth.min(cfg.num_layers) {
            let keys = if cfg.is_sliding(layer) {
                (position + 1).min(cfg.sliding_window)
            } else {
                position + 1
            };
            flops += linear_per_layer + attention_per_key * keys as f64;
        }
    }
    flops
}

/// Per token and layer: the linear layers' FLOPs, and attention's per key seen.
fn per_token_flops(cfg: &Gemma3Config) -> (f64, f64) {
    let (hidden, ffn) = (cfg.hidden_size as f64, cfg.intermediate_size as f64);
    let (q, kv) = (
        (cfg.num_heads * cfg.head_dim) as f64,
        (cfg.num_kv_heads * cfg.head_dim) as f64,
    );
    let linear = 2.0 * (hidden * q * 2.0 + hidden * kv * 2.0 + 3.0 * hidden * ffn);
    // Scores and weighted values: 2 products of head_dim per query head and key.
    (linear, 4.0 * q)
}

/// FLOPs of an encoder reading `tokens` tokens through its first `depth` layers: every token
/// sees every other (bidirectional), within the window on sliding layers.
pub(crate) fn encoder_flops(cfg: &Gemma3Config, tokens: usize, depth: usize) -> f64 {
    let (linear_per_layer, attention_per_key) = per_token_flops(cfg);
    let mut flops = 0.0;
    for layer in 0..depth.min(cfg.num_layers) {
        let keys: usize = (0..tokens)
            .map(|i| {
                if cfg.is_sliding(layer) {
                    let w = cfg.sliding_window;
                    (i + w).min(tokens) - i.saturating_sub(w - 1)
                } else {
                    tokens
                }
            })
            .sum();
        flops += linear_per_layer * tokens as f64 + attention_per_key * keys as f64;
    }
    flops
}

fn answer_flops(model: &Gemma3, answers: usize) -> f64 {
    2.0 * 2.0 * model.config().hidden_size as f64 * answers as f64
}
