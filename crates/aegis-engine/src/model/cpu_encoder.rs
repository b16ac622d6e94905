//! A Gemma 3 encoder on the CPU without candle's per-op overhead: the layers' weights packed once
//! for `aegis-kernels`' matrix product (the CPU's fastest kind), and each layer run as four
//! products over buffers reused from layer to layer (q/k/v and gate/up each fused into one
//! product). On a short message candle's ~700 small ops cost three times their arithmetic; here
//! the products dominate.
//!
//! Numerics: on AVX-512 BF16 (and the portable kind) weights and the products' inputs are rounded
//! to bfloat16 (Gemma's training format), on AVX2 they stay f32; sums and everything between the
//! products stay f32. Embeddings land within about 1e-3 (cosine above 0.9999) of candle's f32
//! path; the tests bound it.

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use aegis_kernels::elementwise::{
    add_rms_norm, gelu_mul, rms_norm, rms_norm_in_place, rope, softmax,
};
use aegis_kernels::{matmul, KernelKind, Matrix};

use super::rope::Rope;
use super::{check_sequence, in_tap_order, Embedding, Gemma3, Output, RmsNorm};
use crate::config::Gemma3Config;
use crate::cost::sustained_gflops;
use crate::error::{EngineError, Result};

struct PackedLayer {
    attn_norm: Vec<f32>,
    /// q, k and v side by side: `[q heads | k heads | v heads]` per row.
    qkv: Matrix,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    o: Matrix,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    /// gate and up side by side.
    gate_up: Matrix,
    down: Matrix,
    post_ffn_norm: Vec<f32>,
    sliding: bool,
}

pub struct CpuEncoder {
    config: Gemma3Config,
    /// What runs attention's products, whose operands are made per message: never int8, whose
    /// per-row scales would quantize each key and value afresh for a small share of the work.
    attention_kernel: KernelKind,
    embedding: Embedding,
    layers: Vec<PackedLayer>,
    final_norm: RmsNorm,
    global_rope: Rope,
    local_rope: Rope,
    eps: f32,
}

fn dense(matrix: &QMatMul) -> Result<Vec<f32>> {
    let tensor = match matrix {
        QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.clone(),
        QMatMul::QTensor(q) => q.dequantize(&Device::Cpu)?,
    };
    Ok(tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?)
}

fn weights(norm: &RmsNorm) -> Result<Vec<f32>> {
    Ok(norm.weight.to_dtype(DType::F32)?.to_vec1()?)
}

/// Rows `[rows, width]` of `buffer` (row stride `stride`) starting at column `at`, copied out
/// contiguous.
fn columns(
    buffer: &[f32],
    rows: std::ops::Range<usize>,
    stride: usize,
    at: usize,
    width: usize,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for row in rows {
        out.extend_from_slice(&buffer[row * stride + at..row * stride + at + width]);
    }
    out
}

impl CpuEncoder {
    /// Packs a CPU encoder's layers for `kernel` (consuming it, one layer at a time, so the f32
    /// weights and the packed ones are never both held whole).
    pub fn pack(model: Gemma3, kernel: KernelKind) -> Result<Self> {
        if !model.device.is_cpu() || !model.config.bidirectional {
            return Err(EngineError::Unsupported(
                "packed kernels run a CPU encoder only",
            ));
        }
        let cfg = model.config.clone();
        let (hidden, ffn) = (cfg.hidden_size, cfg.intermediate_size);
        let (q_width, kv_width) = (
            cfg.num_heads * cfg.head_dim,
            cfg.num_kv_heads * cfg.head_dim,
        );
        let mut layers = Vec::with_capacity(model.layers.len());
        for layer in model.layers {
            let (q, k, v) = (
                dense(&layer.q_proj)?,
                dense(&layer.k_proj)?,
                dense(&layer.v_proj)?,
            );
            let (gate, up) = (dense(&layer.gate_proj)?, dense(&layer.up_proj)?);
            layers.push(PackedLayer {
                attn_norm: weights(&layer.attn_norm)?,
                qkv: Matrix::stacked(
                    kernel,
                    &[(&q, q_width), (&k, kv_width), (&v, kv_width)],
                    hidden,
                ),
                q_norm: weights(&layer.q_norm)?,
                k_norm: weights(&layer.k_norm)?,
                o: Matrix::from_rows(kernel, &dense(&layer.o_proj)?, hidden, q_width),
                post_attn_norm: weights(&layer.post_attn_norm)?,
                ffn_norm: weights(&layer.ffn_norm)?,
                gate_up: Matrix::stacked(kernel, &[(&gate, ffn), (&up, ffn)], hidden),
                down: Matrix::from_rows(kernel, &dense(&layer.down_proj)?, hidden, ffn),
                post_ffn_norm: weights(&layer.post_ffn_norm)?,
                sliding: layer.sliding,
            });
        }
        Ok(Self {
            eps: cfg.rms_norm_eps as f32,
            config: cfg,
            attention_kernel: kernel.for_attention(),
            embedding: model.embedding,
            layers,
            final_norm: model.final_norm,
            global_rope: model.global_rope,
            local_rope: model.local_rope,
        })
    }

    pub fn config(&self) -> &Gemma3Config {
        &self.config
    }

    /// As [`Gemma3::forward_independent_taps`]: the residual stream after each of `taps`, each
    /// `[total tokens, hidden]`, for sequences that each attend only to themselves.
    pub fn forward_independent_taps(
        &self,
        sequences: &[&[u32]],
        taps: &[usize],
    ) -> Result<Vec<Tensor>> {
        Output::Taps(taps).check(self.layers.len())?;
        let cfg = &self.config;
        let mut tokens = Vec::new();
        let mut positions = Vec::new();
        let mut spans = Vec::with_capacity(sequences.len());
        for sequence in sequences {
            check_sequence(sequence.len(), cfg.context_length)?;
            spans.push(tokens.len()..tokens.len() + sequence.len());
            tokens.extend_from_slice(sequence);
            positions.extend(0..sequence.len());
        }
        if spans.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let rows = tokens.len();
        let hidden = cfg.hidden_size;
        let ids = Tensor::new(tokens.as_slice(), &Device::Cpu)?;
        let scaled = (self.embedding.rows(&ids)?.to_dtype(DType::F32)? * (hidden as f64).sqrt())?;
        let mut x: Vec<f32> = scaled.flatten_all()?.to_vec1()?;
        let table = |rope: &Rope| -> Result<(Vec<f32>, Vec<f32>)> {
            let (cos, sin) = rope.at(&positions)?;
            Ok((cos.flatten_all()?.to_vec1()?, sin.flatten_all()?.to_vec1()?))
        };
        let (global, local) = (table(&self.global_rope)?, table(&self.local_rope)?);
        let depth = taps.iter().copied().max().unwrap_or(0);
        let mut scratch = Scratch::new(cfg, rows);
        let mut tapped = Vec::with_capacity(taps.len());
        for (index, layer) in self.layers.iter().take(depth).enumerate() {
            let rope_table = if layer.sliding { &local } else { &global };
            self.layer(layer, &mut x, &spans, rope_table, &mut scratch);
            if taps.contains(&(index + 1)) {
                tapped.push((
                    index + 1,
                    Tensor::from_vec(x.clone(), (rows, hidden), &Device::Cpu)?,
                ));
            }
        }
        in_tap_order(taps, &tapped, self.layers.len())
    }

    /// The rate the kernels sustain on a 512-row block through the first layer's gate and up
    /// projections, in GFLOP/s over about `duration`.
    pub fn matmul_gflops(&self, duration: std::time::Duration) -> f64 {
        let Some(layer) = self.layers.first() else {
            return 0.0;
        };
        let (rows, matrix) = (512, &layer.gate_up);
        let a: Vec<f32> = (0..rows * matrix.inputs())
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let mut c = vec![0f32; rows * matrix.outputs()];
        let flops = 2.0 * (rows * matrix.outputs() * matrix.inputs()) as f64;
        let product = || {
            let width = matrix.outputs();
            matmul(&a, rows, matrix.inputs(), matrix, &mut c, width, true);
            Ok(())
        };
        // The kernels cannot fail: a rate is always measured.
        sustained_gflops(duration, flops, product).unwrap_or(0.0)
    }

    /// The final norm of a residual stream after the last layer.
    pub fn final_normed(&self, residual: &Tensor) -> Result<Tensor> {
        self.final_norm.forward(residual)
    }

    fn layer(
        &self,
        layer: &PackedLayer,
        x: &mut [f32],
        spans: &[std::ops::Range<usize>],
        (cos, sin): &(Vec<f32>, Vec<f32>),
        s: &mut Scratch,
    ) {
        let cfg = &self.config;
        let (hidden, ffn, head_dim) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim);
        let (q_width, kv_width) = (cfg.num_heads * head_dim, cfg.num_kv_heads * head_dim);
        let qkv_width = q_width + 2 * kv_width;
        let rows = x.len() / hidden;

        rms_norm(x, &layer.attn_norm, self.eps, &mut s.normed);
        matmul(
            &s.normed, rows, hidden, &layer.qkv, &mut s.qkv, qkv_width, true,
        );
        let half = head_dim / 2;
        s.qkv
            .par_chunks_mut(qkv_width)
            .enumerate()
            .for_each(|(row, qkv)| {
                let (cos, sin) = (
                    &cos[row * half..(row + 1) * half],
                    &sin[row * half..(row + 1) * half],
                );
                let (q, kv) = qkv.split_at_mut(q_width);
                for head in q.chunks_exact_mut(head_dim) {
                    rms_norm_in_place(head, &layer.q_norm, self.eps);
                    rope(head, cos, sin);
                }
                for head in kv[..kv_width].chunks_exact_mut(head_dim) {
                    rms_norm_in_place(head, &layer.k_norm, self.eps);
                    rope(head, cos, sin);
                }
            });
        self.attention(layer, spans, s);
        matmul(
            &s.attended,
            rows,
            q_width,
            &layer.o,
            &mut s.projected,
            hidden,
            true,
        );
        add_rms_norm(x, &s.projected, &layer.post_attn_norm, self.eps);

        rms_norm(x, &layer.ffn_norm, self.eps, &mut s.normed);
        matmul(
            &s.normed,
            rows,
            hidden,
            &layer.gate_up,
            &mut s.gate_up,
            2 * ffn,
            true,
        );
        s.activated
            .par_chunks_mut(ffn)
            .zip(s.gate_up.par_chunks(2 * ffn))
            .for_each(|(out, gate_up)| {
                let (gate, up) = gate_up.split_at(ffn);
                gelu_mul(gate, up, out);
            });
        matmul(
            &s.activated,
            rows,
            ffn,
            &layer.down,
            &mut s.projected,
            hidden,
            true,
        );
        add_rms_norm(x, &s.projected, &layer.post_ffn_norm, self.eps);
    }

    /// Bidirectional attention of each sequence over itself (within the window on sliding
    /// layers) into `s.attended`. Many sequences run side by side, one thread each; a lone long
    /// one splits its products between threads instead.
    fn attention(&self, layer: &PackedLayer, spans: &[std::ops::Range<usize>], s: &mut Scratch) {
        let cfg = &self.config;
        let head_dim = cfg.head_dim;
        let q_width = cfg.num_heads * head_dim;
        let qkv_width = q_width + 2 * cfg.num_kv_heads * head_dim;
        let window = layer.sliding.then_some(cfg.sliding_window);
        let mut outputs: Vec<&mut [f32]> = Vec::with_capacity(spans.len());
        let mut rest = s.attended.as_mut_slice();
        for span in spans {
            let (this, tail) = rest.split_at_mut(span.len() * q_width);
            outputs.push(this);
            rest = tail;
        }
        let qkv = &s.qkv;
        let run = |(span, out): (&std::ops::Range<usize>, &mut &mut [f32]), parallel: bool| {
            self.attend(qkv, qkv_width, span.clone(), window, out, parallel);
        };
        if spans.len() == 1 {
            spans
                .iter()
                .zip(outputs.iter_mut())
                .for_each(|pair| run(pair, true));
        } else {
            spans
                .par_iter()
                .zip(outputs.par_iter_mut())
                .for_each(|pair| run(pair, false));
        }
    }

    /// One sequence's attention: per KV head, its query heads' rows stacked, scores against the
    /// keys, softmax, weighted values.
    fn attend(
        &self,
        qkv: &[f32],
        stride: usize,
        span: std::ops::Range<usize>,
        window: Option<usize>,
        out: &mut [f32],
        parallel: bool,
    ) {
        let cfg = &self.config;
        let (head_dim, n) = (cfg.head_dim, span.len());
        let q_width = cfg.num_heads * head_dim;
        let per_kv = cfg.num_heads / cfg.num_kv_heads;
        let scale = cfg.query_pre_attn_scalar.powf(-0.5) as f32;
        for group in 0..cfg.num_kv_heads {
            let keys = columns(
                qkv,
                span.clone(),
                stride,
                q_width + group * head_dim,
                head_dim,
            );
            let values = columns(
                qkv,
                span.clone(),
                stride,
                q_width + (cfg.num_kv_heads + group) * head_dim,
                head_dim,
            );
            for (rows, seen) in query_blocks(n, window) {
                let m = rows.len();
                let keys = Matrix::from_rows(
                    self.attention_kernel,
                    &keys[seen.start * head_dim..seen.end * head_dim],
                    seen.len(),
                    head_dim,
                );
                let values = Matrix::from_columns(
                    self.attention_kernel,
                    &values[seen.start * head_dim..seen.end * head_dim],
                    seen.len(),
                    head_dim,
                );
                let mut queries = Vec::with_capacity(per_kv * m * head_dim);
                for head in group * per_kv..(group + 1) * per_kv {
                    queries.extend(columns(
                        qkv,
                        span.start + rows.start..span.start + rows.end,
                        stride,
                        head * head_dim,
                        head_dim,
                    ));
                }
                let width = seen.len();
                let mut scores = vec![0f32; per_kv * m * width];
                matmul(
                    &queries,
                    per_kv * m,
                    head_dim,
                    &keys,
                    &mut scores,
                    width,
                    parallel,
                );
                for (row, scores) in scores.chunks_exact_mut(width).enumerate() {
                    let i = rows.start + row % m;
                    let visible = visible_keys(i, n, window);
                    let visible = visible.start - seen.start..visible.end - seen.start;
                    scores[..visible.start].fill(0.0);
                    scores[visible.end..].fill(0.0);
                    let visible = &mut scores[visible];
                    visible.iter_mut().for_each(|v| *v *= scale);
                    softmax(visible);
                }
                let mut weighted = vec![0f32; per_kv * m * head_dim];
                matmul(
                    &scores,
                    per_kv * m,
                    width,
                    &values,
                    &mut weighted,
                    head_dim,
                    parallel,
                );
                for (k, head) in (group * per_kv..(group + 1) * per_kv).enumerate() {
                    for (r, i) in rows.clone().enumerate() {
                        let from = &weighted[(k * m + r) * head_dim..(k * m + r + 1) * head_dim];
                        out[i * q_width + head * head_dim..i * q_width + (head + 1) * head_dim]
                            .copy_from_slice(from);
                    }
                }
            }
        }
    }
}

/// The keys query `i` of a sequence of `n` sees: those less than `window` away, or all.
fn visible_keys(i: usize, n: usize, window: Option<usize>) -> std::ops::Range<usize> {
    match window {
        Some(w) if n > w => (i + 1).saturating_sub(w)..(i + w).min(n),
        _ => 0..n,
    }
}

/// Queries a block of attention reads at once on a sliding layer.
const QUERY_BLOCK: usize = 128;

/// The blocks one sequence of `n` attends in: queries and the keys they may see. Where a
/// window cuts into the sequence, blocks of [`QUERY_BLOCK`] queries each read only the keys
/// within the window of one of them (a 1,000-token text on a layer of ±256 computes under half
/// of its scores); else one block of all. A block's first key is even, so keys pair up for the
/// bf16 kernels as they do over the whole sequence, and the weighted sums keep their bits.
fn query_blocks(
    n: usize,
    window: Option<usize>,
) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    match window {
        Some(w) if n > w => (0..n)
            .step_by(QUERY_BLOCK)
            .map(|first| {
                let end = (first + QUERY_BLOCK).min(n);
                let seen = ((first + 1).saturating_sub(w) & !1)..(end - 1 + w).min(n);
                (first..end, seen)
            })
            .collect(),
        _ => vec![(0..n, 0..n)],
    }
}

/// Buffers one pass reuses from layer to layer.
struct Scratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    activated: Vec<f32>,
}

impl Scratch {
    fn new(cfg: &Gemma3Config, rows: usize) -> Self {
        let (q, kv) = (
            cfg.num_heads * cfg.head_dim,
            cfg.num_kv_heads * cfg.head_dim,
        );
        Self {
            normed: vec![0.0; rows * cfg.hidden_size],
            qkv: vec![0.0; rows * (q + 2 * kv)],
            attended: vec![0.0; rows * q],
            projected: vec![0.0; rows * cfg.hidden_size],
            gate_up: vec![0.0; rows * 2 * cfg.intermediate_size],
            activated: vec![0.0; rows * cfg.intermediate_size],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_blocks_cover_every_query_and_the_whole_window_of_each() {
        for (n, window) in [
            (10, None),
            (300, Some(257)),
            (959, Some(257)),
            (1618, Some(257)),
        ] {
            let blocks = query_blocks(n, window);
            let queries: Vec<usize> = blocks.iter().flat_map(|(rows, _)| rows.clone()).collect();
            assert_eq!(queries, (0..n).collect::<Vec<_>>(), "{n} {window:?}");
            for (rows, seen) in &blocks {
                assert_eq!(seen.start % 2, 0, "keys pair up as over the whole sequence");
                for i in rows.clone() {
                    let visible = visible_keys(i, n, window);
                    assert!(seen.start <= visible.start && visible.end <= seen.end);
                }
            }
            if let Some(w) = window {
                // Each block reads at most its own queries and a window either side.
                assert!(blocks
                    .iter()
                    .all(|(rows, seen)| seen.len() <= rows.len() + 2 * w));
            }
        }
    }
}
