//! Our own Gemma 3 text forward pass on candle ops (see ARCHITECTURE.md, decision 3, for why not
//! candle-transformers'): GELU-tanh GeGLU, QK-norm, sliding-window attention on local layers,
//! per-layer-type RoPE, and a KV cache owned by the caller so prefixes can be snapshotted.

mod attention;
mod cpu_encoder;
mod kv_cache;
mod load;
mod packed;
mod rope;
mod safetensors_file;
mod weights;

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use attention::{attend_groups, Attend, AttentionGroup, Heads, KeySelect, PaddedBatch};
pub use cpu_encoder::CpuEncoder;
pub use kv_cache::KvCache;
pub use load::{EmbeddingStorage, WeightFormat};
pub use rope::rope_table;
use rope::Rope;
pub use weights::LayerWeights;

use crate::config::Gemma3Config;
use crate::error::{EngineError, Result};

/// The token embedding, also the (tied) output head.
enum Embedding {
    Quantized(Arc<QTensor>),
    Dense(Tensor),
}

impl Embedding {
    fn rows(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Quantized(q) => q.embedding(ids)?,
            Self::Dense(t) => t.index_select(ids, 0)?,
        })
    }
}

struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(
            &xs.contiguous()?,
            &self.weight,
            self.eps,
        )?)
    }
}

struct Layer {
    attn_norm: RmsNorm,
    q_proj: QMatMul,
    k_proj: QMatMul,
    v_proj: QMatMul,
    o_proj: QMatMul,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    post_attn_norm: RmsNorm,
    ffn_norm: RmsNorm,
    gate_proj: QMatMul,
    up_proj: QMatMul,
    down_proj: QMatMul,
    post_ffn_norm: RmsNorm,
    sliding: bool,
}

/// What a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output<'a> {
    /// The final-normed hidden state, what the output head reads.
    Final,
    /// The residual stream after each of these layers (1 = after the first layer), in this order.
    Taps(&'a [usize]),
}

impl Output<'_> {
    fn check(self, layers: usize) -> Result<()> {
        match self {
            Output::Taps(taps) => match taps.iter().find(|&&t| t == 0 || t > layers) {
                Some(&layer) => Err(EngineError::UnknownLayer { layer, layers }),
                None if taps.is_empty() => Err(EngineError::UnknownLayer { layer: 0, layers }),
                None => Ok(()),
            },
            Output::Final => Ok(()),
        }
    }
}

pub struct Gemma3 {
    config: Gemma3Config,
    embedding: Embedding,
    /// The tied output head as a matmul, for full logits (generation only).
    lm_head: QMatMul,
    layers: Vec<Layer>,
    final_norm: RmsNorm,
    /// Position tables for global-attention layers and for sliding-window ones.
    global_rope: Rope,
    local_rope: Rope,
    device: Device,
    /// Activations, caches and dense weights (see `WeightFormat::activation_dtype`).
    dtype: DType,
    /// Random weights written by `synthetic` (for speed and device checks only).
    synthetic: bool,
    /// Whether an encoder's batch attends in the padded layout (see `attention`): on a GPU,
    /// where launches cost more than the padding's arithmetic.
    padded_attention: bool,
}

impl Gemma3 {
    pub fn config(&self) -> &Gemma3Config {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether the weights are synthetic random ones (see `synthetic`): its answers are noise.
    pub fn is_synthetic(&self) -> bool {
        self.synthetic
    }

    /// Runs `tokens` after whatever `cache` already holds, appends them to it, and returns the
    /// final-normed hidden states of the new positions, shape `[tokens.len(), hidden]`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let cfg = &self.config;
        let (start, len) = (cache.len, tokens.len());
        let total = start + len;
        if total > cfg.context_length {
            return Err(EngineError::ContextExceeded {
                prompt_tokens: total,
                limit: cfg.context_length,
            });
        }
        if cache.layers.len() != self.layers.len() {
            cache.layers = vec![None; self.layers.len()];
        }
        let positions: Vec<usize> = (start..total).collect();
        let everything = AttentionGroup {
            rows: 0..len,
            fixed: vec![None; self.layers.len()],
            select: KeySelect::All,
            masks: (
                Some(self.mask(start, len, None)?),
                Some(self.mask(start, len, Some(cfg.sliding_window))?),
            ),
        };
        let hidden = self
            .run_layers(
                tokens,
                &positions,
                &Attend::Groups(vec![everything]),
                &mut cache.layers,
                Output::Final,
            )?
            .remove(0);
        cache.len = total;
        Ok(hidden)
    }

    /// The residual stream after each of `taps` for `tokens` from an empty cache, each
    /// `[tokens.len(), hidden]`: the plain reference for the packed path's taps.
    pub fn forward_taps(&self, tokens: &[u32], taps: &[usize]) -> Result<Vec<Tensor>> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        Output::Taps(taps).check(self.layers.len())?;
        let len = tokens.len();
        let everything = AttentionGroup {
            rows: 0..len,
            fixed: vec![None; self.layers.len()],
            select: KeySelect::All,
            masks: (
                Some(self.mask(0, len, None)?),
                Some(self.mask(0, len, Some(self.config.sliding_window))?),
            ),
        };
        let positions: Vec<usize> = (0..len).collect();
        let mut slots = vec![None; self.layers.len()];
        self.run_layers(
            tokens,
            &positions,
            &Attend::Groups(vec![everything]),
            &mut slots,
            Output::Taps(taps),
        )
    }

    /// The residual stream after each of `taps` (each `[total tokens, hidden]`, the sequences'
    /// rows in order) for several token sequences run side by side from empty caches, each
    /// attending only to itself; the pass stops after the deepest tap. The linear layers run once
    /// over every row, which is what makes a batch cheaper than its parts.
    pub fn forward_independent_taps(
        &self,
        sequences: &[&[u32]],
        taps: &[usize],
    ) -> Result<Vec<Tensor>> {
        let output = Output::Taps(taps);
        output.check(self.layers.len())?;
        let cfg = &self.config;
        if sequences.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let mut tokens = Vec::new();
        let mut positions = Vec::new();
        for sequence in sequences {
            check_sequence(sequence.len(), cfg.context_length)?;
            tokens.extend_from_slice(sequence);
            positions.extend(0..sequence.len());
        }
        let lengths: Vec<usize> = sequences.iter().map(|s| s.len()).collect();
        // On a GPU a batch costs launches: the padded layout attends in one product a bucket
        // (and the per-sequence masks below, each a copy to the device, are never made).
        let attend = if self.padded_attention && sequences.len() > 1 {
            Attend::Padded(PaddedBatch::independent(
                &lengths,
                cfg.sliding_window,
                &self.device,
                self.dtype,
            )?)
        } else {
            Attend::Groups(self.independent_groups(&lengths)?)
        };
        let mut slots = vec![None; self.layers.len()];
        self.run_layers(&tokens, &positions, &attend, &mut slots, output)
    }

    /// One attention group a sequence of `lengths` (rows one after another), each seeing only
    /// itself: bidirectional attention within a sequence hides nothing but what lies beyond the
    /// window, so a sequence no longer than the window needs no mask at all.
    fn independent_groups(&self, lengths: &[usize]) -> Result<Vec<AttentionGroup>> {
        let cfg = &self.config;
        let mut groups = Vec::with_capacity(lengths.len());
        let mut start = 0;
        for &len in lengths {
            let mask = |window: Option<usize>| -> Result<Option<Tensor>> {
                let unmasked = cfg.bidirectional && window.is_none_or(|w| len <= w);
                Ok(if unmasked {
                    None
                } else {
                    Some(self.mask(0, len, window)?)
                })
            };
            groups.push(AttentionGroup {
                rows: start..start + len,
                fixed: vec![None; self.layers.len()],
                select: if lengths.len() == 1 {
                    KeySelect::All
                } else {
                    KeySelect::Range(start..start + len)
                },
                masks: (mask(None)?, mask(Some(cfg.sliding_window))?),
            });
            start += len;
        }
        Ok(groups)
    }

    /// The layers over new `tokens` at `positions`. Each group of rows attends to its own keys
    /// (see `AttentionGroup`); `slots` are extended by the new keys. With `Output::Taps` the pass
    /// stops after the deepest tapped layer: the layers after it would change nothing asked for.
    fn run_layers(
        &self,
        tokens: &[u32],
        positions: &[usize],
        attend: &Attend,
        slots: &mut [Option<(Tensor, Tensor)>],
        output: Output<'_>,
    ) -> Result<Vec<Tensor>> {
        let cfg = &self.config;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut xs =
            (self.embedding.rows(&ids)?.to_dtype(self.dtype)? * (cfg.hidden_size as f64).sqrt())?;
        let global_rope = self.global_rope.at(positions)?;
        let local_rope = self.local_rope.at(positions)?;
        let depth = match output {
            Output::Final => self.layers.len(),
            Output::Taps(taps) => taps.iter().copied().max().unwrap_or(0),
        };
        let mut tapped: Vec<(usize, Tensor)> = Vec::new();
        for (index, (layer, slot)) in self
            .layers
            .iter()
            .zip(slots.iter_mut())
            .enumerate()
            .take(depth)
        {
            let rope = if layer.sliding {
                &local_rope
            } else {
                &global_rope
            };
            let residual = xs.clone();
            let h = layer.attn_norm.forward(&xs)?;
            let h = self.attention(layer, index, &h, rope, attend, slot)?;
            xs = (residual + layer.post_attn_norm.forward(&h)?)?;
            let residual = xs.clone();
            let h = layer.ffn_norm.forward(&xs)?;
            let gate = layer.gate_proj.forward(&h)?.gelu()?;
            let h = layer
                .down_proj
                .forward(&(gate * layer.up_proj.forward(&h)?)?)?;
            xs = (residual + layer.post_ffn_norm.forward(&h)?)?;
            if let Output::Taps(taps) = output {
                if taps.contains(&(index + 1)) {
                    tapped.push((index + 1, xs.clone()));
                }
            }
        }
        match output {
            Output::Final => Ok(vec![self.final_norm.forward(&xs)?]),
            Output::Taps(taps) => in_tap_order(taps, &tapped, self.layers.len()),
        }
    }

    fn attention(
        &self,
        layer: &Layer,
        layer_index: usize,
        xs: &Tensor,
        (cos, sin): &(Tensor, Tensor),
        attend: &Attend,
        slot: &mut Option<(Tensor, Tensor)>,
    ) -> Result<Tensor> {
        let cfg = &self.config;
        let (len, _) = xs.dims2()?;
        let (hq, hkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
        // [len, heads*hd] -> [1, heads, len, hd]
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((1, len, heads, hd))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(layer.q_proj.forward(xs)?, hq)?;
        let k = split(layer.k_proj.forward(xs)?, hkv)?;
        let v = split(layer.v_proj.forward(xs)?, hkv)?;
        let q = candle_nn::rotary_emb::rope(&layer.q_norm.forward(&q)?, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&layer.k_norm.forward(&k)?, cos, sin)?;

        let (k, v) = match slot.take() {
            Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?),
            None => (k, v),
        };
        *slot = Some((k.clone(), v.clone()));

        let heads = Heads {
            query: hq,
            kv: hkv,
            dim: hd,
            scale: cfg.query_pre_attn_scalar.powf(-0.5),
        };
        let out = match attend {
            Attend::Groups(groups) => {
                attend_groups(&heads, layer_index, layer.sliding, (&q, &k, &v), groups)?
            }
            Attend::Padded(batch) => {
                batch.attend(&heads, layer_index, layer.sliding, (&q, &k, &v))?
            }
        };
        Ok(layer.o_proj.forward(&out)?)
    }

    /// Additive mask `[len, start+len]`: causal, and on sliding layers only the last `window`
    /// positions (the query's own included) are visible. A bidirectional model (an encoder) sees
    /// every position, on sliding layers those less than `window` away on either side.
    fn mask(&self, start: usize, len: usize, window: Option<usize>) -> Result<Tensor> {
        let total = start + len;
        let bidirectional = self.config.bidirectional;
        let mut mask = Vec::with_capacity(len * total);
        for i in 0..len {
            let pos = start + i;
            for j in 0..total {
                let visible =
                    (bidirectional || j <= pos) && window.is_none_or(|w| pos.abs_diff(j) < w);
                mask.push(if visible { 0f32 } else { f32::NEG_INFINITY });
            }
        }
        Ok(Tensor::from_vec(mask, (len, total), &self.device)?.to_dtype(self.dtype)?)
    }

    /// The final norm applied to a residual stream after the last layer (`[rows, hidden]`): the
    /// final hidden states, from a tap at the last layer.
    pub fn final_normed(&self, residual: &Tensor) -> Result<Tensor> {
        self.final_norm.forward(residual)
    }

    /// Logits over the whole vocabulary for one hidden state `[hidden]`.
    pub fn logits(&self, hidden: &Tensor) -> Result<Vec<f32>> {
        let logits = self.lm_head.forward(&hidden.unsqueeze(0)?)?;
        Ok(logits.squeeze(0)?.to_dtype(DType::F32)?.to_vec1()?)
    }

    /// Logits of a few tokens only: the output head's rows for `ids` against one hidden state.
    /// Scoring needs two of 262,144 rows; computing all of them would dominate a short prompt.
    pub fn logits_for(&self, hidden: &Tensor, ids: &[u32]) -> Result<Vec<f32>> {
        Ok(self
            .logits_for_rows(&hidden.unsqueeze(0)?, ids)?
            .pop()
            .unwrap_or_default())
    }

    /// `logits_for` for each row of `hidden` (`[rows, hidden]`): `[rows][ids.len()]`.
    pub fn logits_for_rows(&self, hidden: &Tensor, ids: &[u32]) -> Result<Vec<Vec<f32>>> {
        // In f32 whatever the format: two dot products of 2,560 terms lose digits in bf16.
        let heads = self
            .embedding
            .rows(&Tensor::new(ids, &self.device)?)?
            .to_dtype(DType::F32)?; // [n, hidden]
        let logits = hidden.to_dtype(DType::F32)?.matmul(&heads.t()?)?; // [rows, n]
        Ok(logits.to_vec2()?)
    }

    /// The hidden state of the last position of a `[len, hidden]` block.
    pub fn last_row(hidden: &Tensor) -> Result<Tensor> {
        let len = hidden.dim(0)?;
        Ok(hidden.get(len - 1)?)
    }
}

/// A sequence an encoder reads on its own: not empty, within the context.
fn check_sequence(len: usize, limit: usize) -> Result<()> {
    if len == 0 {
        return Err(EngineError::EmptyPrompt);
    }
    if len > limit {
        return Err(EngineError::ContextExceeded {
            prompt_tokens: len,
            limit,
        });
    }
    Ok(())
}

/// The residual streams `tapped` (layer, stream) in the order `taps` asked for them.
fn in_tap_order(taps: &[usize], tapped: &[(usize, Tensor)], layers: usize) -> Result<Vec<Tensor>> {
    taps.iter()
        .map(|tap| {
            tapped
                .iter()
                .find(|(layer, _)| layer == tap)
                .map(|(_, t)| t.clone())
                .ok_or(EngineError::UnknownLayer {
                    layer: *tap,
                    layers,
                })
        })
        .collect()
}
