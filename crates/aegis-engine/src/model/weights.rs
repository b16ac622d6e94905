//! A layer's weights as plain tensors, out of the model and back in: what training an adapter
//! reads (the frozen upper layers, run with gradients outside the engine) and what loading one
//! changes (a low-rank update added to a projection before the layers are packed).

use candle_core::quantized::QMatMul;
use candle_core::{DType, Tensor};

use super::{Gemma3, Layer};
use crate::encoder::Projection;
use crate::error::{EngineError, Result};

/// One layer's weights in f32: projections `[out, in]`, norms with Gemma's `1 + w` folded in.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub attn_norm: Tensor,
    pub q_norm: Tensor,
    pub k_norm: Tensor,
    pub post_attn_norm: Tensor,
    pub ffn_norm: Tensor,
    pub post_ffn_norm: Tensor,
    pub projections: Vec<(Projection, Tensor)>,
    /// Sliding-window attention (local RoPE base) rather than global.
    pub sliding: bool,
}

impl LayerWeights {
    pub fn projection(&self, which: Projection) -> &Tensor {
        &self
            .projections
            .iter()
            .find(|(p, _)| *p == which)
            .expect("every projection is exported")
            .1
    }
}

fn projection_of(layer: &mut Layer, which: Projection) -> &mut QMatMul {
    match which {
        Projection::Query => &mut layer.q_proj,
        Projection::Key => &mut layer.k_proj,
        Projection::Value => &mut layer.v_proj,
        Projection::Output => &mut layer.o_proj,
        Projection::Gate => &mut layer.gate_proj,
        Projection::Up => &mut layer.up_proj,
        Projection::Down => &mut layer.down_proj,
    }
}

fn dense(matrix: &QMatMul) -> Result<Tensor> {
    match matrix {
        QMatMul::Tensor(t) | QMatMul::TensorF16(t) => Ok(t.to_dtype(DType::F32)?),
        QMatMul::QTensor(q) => Ok(q.dequantize(&candle_core::Device::Cpu)?),
    }
}

impl Gemma3 {
    /// Layer `index`'s weights (0 = the first), copied to f32.
    pub fn layer_weights(&self, index: usize) -> Result<LayerWeights> {
        let layers = self.layers.len();
        let layer = self.layers.get(index).ok_or(EngineError::UnknownLayer {
            layer: index + 1,
            layers,
        })?;
        let norm = |n: &super::RmsNorm| n.weight.to_dtype(DType::F32);
        let mut projections = Vec::with_capacity(Projection::ALL.len());
        for which in Projection::ALL {
            let matrix = match which {
                Projection::Query => &layer.q_proj,
                Projection::Key => &layer.k_proj,
                Projection::Value => &layer.v_proj,
                Projection::Output => &layer.o_proj,
                Projection::Gate => &layer.gate_proj,
                Projection::Up => &layer.up_proj,
                Projection::Down => &layer.down_proj,
            };
            projections.push((which, dense(matrix)?));
        }
        Ok(LayerWeights {
            attn_norm: norm(&layer.attn_norm)?,
            q_norm: norm(&layer.q_norm)?,
            k_norm: norm(&layer.k_norm)?,
            post_attn_norm: norm(&layer.post_attn_norm)?,
            ffn_norm: norm(&layer.ffn_norm)?,
            post_ffn_norm: norm(&layer.post_ffn_norm)?,
            projections,
            sliding: layer.sliding,
        })
    }

    /// The final norm's weight (`1 + w` folded in), f32.
    pub fn final_norm_weight(&self) -> Result<Tensor> {
        Ok(self.final_norm.weight.to_dtype(DType::F32)?)
    }

    /// Adds `delta` (`[out, in]`) to one projection of layer `index`: how an adapter is merged.
    /// Only dense weights can take it (an encoder's safetensors layers always are).
    pub fn add_to_projection(
        &mut self,
        index: usize,
        which: Projection,
        delta: &Tensor,
    ) -> Result<()> {
        let layers = self.layers.len();
        let layer = self
            .layers
            .get_mut(index)
            .ok_or(EngineError::UnknownLayer {
                layer: index + 1,
                layers,
            })?;
        let matrix = projection_of(layer, which);
        let QMatMul::Tensor(weight) = matrix else {
            return Err(EngineError::Unsupported("an adapter on quantized weights"));
        };
        if weight.dims() != delta.dims() {
            return Err(EngineError::Candle(candle_core::Error::Msg(format!(
                "layer {} {}: the adapter's update is {:?}, the weight {:?}",
                index,
                which.name(),
                delta.dims(),
                weight.dims()
            ))));
        }
        let merged = (weight.to_dtype(DType::F32)? + delta.to_device(weight.device())?)?
            .to_dtype(weight.dtype())?;
        *matrix = QMatMul::Tensor(merged);
        Ok(())
    }
}
