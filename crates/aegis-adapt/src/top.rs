//! The encoder's upper layers, pooling and projections as a function candle can differentiate,
//! with a low-rank update beside each projection. The frozen products are a custom op whose
//! backward gives only the input's gradient: candle's own matmul would also compute the gradient
//! of every frozen weight, a third of the work, and throw it away.

use std::collections::BTreeMap;
use std::sync::Arc;

use aegis_engine::{
    rope_table, EmbeddingGemma, EncoderAdapter, Gemma3Config, LayerWeights, LowRankUpdate,
    Projection, SplitMix64,
};
use aegis_kernels::{KernelKind, Matrix};
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Shape, Tensor, Var, D};

use crate::error::Result;

/// How the frozen products are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Products {
    /// candle's f32 GEMM: the encoder's reference arithmetic, for checking.
    Exact,
    /// The packed kernels the encoder runs on at inference (bf16 where the CPU has AVX-512 BF16,
    /// three to five times the f32 rate; f32 on AVX2; candle's f32 elsewhere), forward and
    /// backward.
    Fast,
}

/// `x · Wᵀ` with `W` constant.
struct FrozenLinear {
    /// `[out, in]`
    weight: Tensor,
    /// `[in, out]`, contiguous, for the forward product.
    transposed: Tensor,
    /// `W` packed for `x · Wᵀ` and for the gradient `g · W`, when the kernels run the products.
    packed: Option<(Arc<Matrix>, Arc<Matrix>)>,
}

impl FrozenLinear {
    fn new(weight: &Tensor, products: Products) -> Result<Self> {
        let kind = KernelKind::detect();
        let packed = if products == Products::Fast && kind != KernelKind::Portable {
            let (out, inp) = weight.dims2()?;
            let values: Vec<f32> = weight.flatten_all()?.to_vec1()?;
            Some((
                Arc::new(Matrix::from_rows(kind, &values, out, inp)),
                Arc::new(Matrix::from_columns(kind, &values, out, inp)),
            ))
        } else {
            None
        };
        Ok(Self {
            weight: weight.clone(),
            transposed: weight.t()?.contiguous()?,
            packed,
        })
    }
}

/// `rows` rows of `input` times a packed matrix.
fn packed_product(input: &[f32], matrix: &Matrix) -> Vec<f32> {
    let rows = input.len() / matrix.inputs();
    let mut output = vec![0f32; rows * matrix.outputs()];
    aegis_kernels::matmul(
        input,
        rows,
        matrix.inputs(),
        matrix,
        &mut output,
        matrix.outputs(),
        true,
    );
    output
}

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<&'a [f32]> {
    let (start, end) = layout.contiguous_offsets().ok_or_else(|| {
        candle_core::Error::Msg("a frozen product takes a contiguous input".into())
    })?;
    Ok(&storage.as_slice::<f32>()?[start..end])
}

/// Output shape: the input's with its last dimension replaced.
fn with_last(shape: &Shape, last: usize) -> Shape {
    let mut dims = shape.dims().to_vec();
    if let Some(d) = dims.last_mut() {
        *d = last;
    }
    Shape::from(dims)
}

impl CustomOp1 for FrozenLinear {
    fn name(&self) -> &'static str {
        "frozen-linear"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let input = contiguous_f32(storage, layout)?;
        if let Some((forward, _)) = &self.packed {
            let output = packed_product(input, forward);
            return Ok((
                CpuStorage::F32(output),
                with_last(layout.shape(), forward.outputs()),
            ));
        }
        let input = Tensor::from_slice(input, layout.shape(), &Device::Cpu)?;
        let output = input.matmul(&self.transposed)?;
        let shape = output.shape().clone();
        Ok((CpuStorage::F32(output.flatten_all()?.to_vec1()?), shape))
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        match &self.packed {
            Some((_, backward)) => {
                let grad = grad.contiguous()?;
                let values: Vec<f32> = grad.flatten_all()?.to_vec1()?;
                let output = packed_product(&values, backward);
                let shape = with_last(grad.shape(), backward.outputs());
                Ok(Some(Tensor::from_vec(output, shape, &Device::Cpu)?))
            }
            None => Ok(Some(grad.matmul(&self.weight)?)),
        }
    }
}

type FrozenOp = Arc<Box<dyn CustomOp1 + Send + Sync>>;

/// A projection's trainable low-rank update.
struct Update {
    /// `[rank, in]`, random at the start.
    down: Var,
    /// `[out, rank]`, zero at the start: training begins at the plain encoder.
    up: Var,
}

struct AdaptedLayer {
    index: usize,
    weights: LayerWeights,
    frozen: BTreeMap<Projection, FrozenOp>,
    updates: BTreeMap<Projection, Update>,
}

/// What shapes a training run's adaptation.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterShape {
    /// The adapted layers are this one (counted from 0) and every one above it.
    pub first_layer: usize,
    pub rank: usize,
    /// The update is `alpha / rank · up · down`.
    pub alpha: f64,
    pub projections: Vec<Projection>,
}

pub struct AdaptedTop {
    shape: AdapterShape,
    config: Gemma3Config,
    layers: Vec<AdaptedLayer>,
    final_norm: Tensor,
    /// Projections after pooling, transposed (`[in, out]`).
    dense: Vec<Tensor>,
    normalize: bool,
    /// cos and sin per position for global and sliding layers, `[positions, head_dim / 2]`.
    global_rope: (Tensor, Tensor),
    local_rope: (Tensor, Tensor),
}

impl AdaptedTop {
    /// The upper layers of `encoder` (loaded with exact arithmetic), their updates started at
    /// zero; `seed` draws the down-projections.
    pub fn new(
        encoder: &EmbeddingGemma,
        shape: AdapterShape,
        products: Products,
        positions: usize,
        seed: u64,
    ) -> Result<Self> {
        let config = encoder.config().clone();
        let mut random = SplitMix64::new(seed);
        let mut layers = Vec::new();
        for index in shape.first_layer..config.num_layers {
            let weights = encoder.layer_weights(index)?;
            let mut frozen = BTreeMap::new();
            for (which, weight) in &weights.projections {
                let op: FrozenOp = Arc::new(Box::new(FrozenLinear::new(weight, products)?));
                frozen.insert(*which, op);
            }
            let mut updates = BTreeMap::new();
            for &which in &shape.projections {
                let (out, inp) = weights.projection(which).dims2()?;
                // Uniform with the variance that keeps the input's scale in each rank's sum.
                let bound = (3.0 / inp as f32).sqrt();
                let values: Vec<f32> = (0..shape.rank * inp)
                    .map(|_| random.next_symmetric() * bound)
                    .collect();
                let down = Tensor::from_vec(values, (shape.rank, inp), &Device::Cpu)?;
                let up = Tensor::zeros((out, shape.rank), DType::F32, &Device::Cpu)?;
                updates.insert(
                    which,
                    Update {
                        down: Var::from_tensor(&down)?,
                        up: Var::from_tensor(&up)?,
                    },
                );
            }
            layers.push(AdaptedLayer {
                index,
                weights,
                frozen,
                updates,
            });
        }
        let (dense, normalize) = encoder.projections();
        let dense = dense
            .iter()
            .map(|w| Ok(w.to_dtype(DType::F32)?.t()?.contiguous()?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            global_rope: rope_table(
                config.rope_global_base,
                config.rope_global_scale,
                config.head_dim,
                positions,
                &Device::Cpu,
            )?,
            local_rope: rope_table(
                config.rope_local_base,
                1.0,
                config.head_dim,
                positions,
                &Device::Cpu,
            )?,
            final_norm: encoder.final_norm_weight()?,
            dense,
            normalize,
            layers,
            config,
            shape,
        })
    }

    /// Length of the sentence embedding.
    pub fn output_dimensions(&self) -> usize {
        self.dense
            .last()
            .map_or(self.config.hidden_size, |w| w.dims()[1])
    }

    pub fn shape(&self) -> &AdapterShape {
        &self.shape
    }

    pub fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|l| l.updates.values())
            .flat_map(|p| [p.down.clone(), p.up.clone()])
            .collect()
    }

    /// The adapter as the engine loads it.
    pub fn to_adapter(&self, base_hash: String) -> Result<EncoderAdapter> {
        let mut updates = BTreeMap::new();
        for layer in &self.layers {
            for (&which, p) in &layer.updates {
                updates.insert(
                    (layer.index, which),
                    LowRankUpdate {
                        down: p.down.as_tensor().detach(),
                        up: p.up.as_tensor().detach(),
                    },
                );
            }
        }
        Ok(EncoderAdapter {
            scale: self.scale(),
            base_hash,
            updates,
        })
    }

    fn scale(&self) -> f64 {
        self.shape.alpha / self.shape.rank as f64
    }

    /// The sentence embeddings of sequences whose states after the layer below the first adapted
    /// one are `states` (`[total tokens, hidden]`, the sequences' rows in order, `lengths` each).
    pub fn forward(&self, states: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let mut xs = states.clone();
        for layer in &self.layers {
            xs = self.layer(layer, &xs, lengths)?;
        }
        let xs = rms_norm(&xs, &self.final_norm, self.config.rms_norm_eps)?;
        let mut means = Vec::with_capacity(lengths.len());
        let mut at = 0;
        for &len in lengths {
            means.push(xs.narrow(0, at, len)?.mean_keepdim(0)?);
            at += len;
        }
        let mut x = Tensor::cat(&means, 0)?;
        for weight in &self.dense {
            x = x.matmul(weight)?;
        }
        if self.normalize {
            let norm = x.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?;
            x = x.broadcast_div(&(norm + 1e-12)?)?;
        }
        Ok(x)
    }

    fn linear(&self, layer: &AdaptedLayer, which: Projection, xs: &Tensor) -> Result<Tensor> {
        let frozen = xs.apply_op1_arc(layer.frozen[&which].clone())?;
        Ok(match layer.updates.get(&which) {
            Some(update) => {
                let low = xs
                    .matmul(&update.down.as_tensor().t()?)?
                    .matmul(&update.up.as_tensor().t()?)?;
                (frozen + (low * self.scale())?)?
            }
            None => frozen,
        })
    }

    fn layer(&self, layer: &AdaptedLayer, xs: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let cfg = &self.config;
        let w = &layer.weights;
        let eps = cfg.rms_norm_eps;
        let h = rms_norm(xs, &w.attn_norm, eps)?;
        let q = self.linear(layer, Projection::Query, &h)?;
        let k = self.linear(layer, Projection::Key, &h)?;
        let v = self.linear(layer, Projection::Value, &h)?;
        let (cos, sin) = if w.sliding {
            &self.local_rope
        } else {
            &self.global_rope
        };
        let (hq, hkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
        let per_kv = hq / hkv;
        let scale = cfg.query_pre_attn_scalar.powf(-0.5);
        let mut outputs = Vec::with_capacity(lengths.len());
        let mut at = 0;
        for &len in lengths {
            // [len, heads*hd] -> [heads, len, hd]
            let split = |t: &Tensor, heads: usize| -> Result<Tensor> {
                Ok(t.narrow(0, at, len)?
                    .reshape((len, heads, hd))?
                    .transpose(0, 1)?
                    .contiguous()?)
            };
            let (cos, sin) = (cos.narrow(0, 0, len)?, sin.narrow(0, 0, len)?);
            let q = rope(&rms_norm(&split(&q, hq)?, &w.q_norm, eps)?, &cos, &sin)?;
            let k = rope(&rms_norm(&split(&k, hkv)?, &w.k_norm, eps)?, &cos, &sin)?;
            let v = split(&v, hkv)?;
            // Grouped-query attention: each KV head's queries folded into rows.
            let q = q.reshape((hkv, per_kv * len, hd))?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
            let out = probs.matmul(&v)?; // [hkv, per_kv*len, hd]
            outputs.push(
                out.reshape((hq, len, hd))?
                    .transpose(0, 1)?
                    .contiguous()?
                    .reshape((len, hq * hd))?,
            );
            at += len;
        }
        let attended = Tensor::cat(&outputs, 0)?;
        let attended = self.linear(layer, Projection::Output, &attended)?;
        let xs = (xs + rms_norm(&attended, &w.post_attn_norm, eps)?)?;
        let h = rms_norm(&xs, &w.ffn_norm, eps)?;
        let gate = self.linear(layer, Projection::Gate, &h)?.gelu()?;
        let up = self.linear(layer, Projection::Up, &h)?;
        let down = self.linear(layer, Projection::Down, &(gate * up)?)?;
        Ok((xs + rms_norm(&down, &w.post_ffn_norm, eps)?)?)
    }
}

/// RMS norm over the last dimension, from differentiable ops (candle's fused one has no backward).
fn rms_norm(xs: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let mean_square = xs.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(xs
        .broadcast_div(&(mean_square + eps)?.sqrt()?)?
        .broadcast_mul(weight)?)
}

/// Rotate-half RoPE on `[heads, len, hd]` with `[len, hd / 2]` tables (candle's has no backward).
fn rope(xs: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let half = xs.dim(D::Minus1)? / 2;
    let first = xs.narrow(D::Minus1, 0, half)?;
    let second = xs.narrow(D::Minus1, half, half)?;
    let rotated_first = (first.broadcast_mul(cos)? - second.broadcast_mul(sin)?)?;
    let rotated_second = (second.broadcast_mul(cos)? + first.broadcast_mul(sin)?)?;
    Ok(Tensor::cat(&[rotated_first, rotated_second], D::Minus1)?)
}
