//! Synthetic Gemma 3 models: GGUF files with the exact tensor names, shapes and metadata of a real
//! Gemma 3 size and seeded random weights. They exist to measure speed and check devices agree
//! where the real weights cannot be had; their answers are noise, and every report that loads one
//! says so (`ModelInfo::synthetic`).

use std::io::{BufWriter, Write};
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use crate::error::{EngineError, Result};
use crate::random::SplitMix64;

/// Metadata key that marks a synthetic file; the engine reads it back at load.
pub const SYNTHETIC_KEY: &str = "aegis.synthetic";

/// Gemma 3's vocabulary: every size shares the tokenizer, so the embedding always has this many rows.
pub const GEMMA3_VOCAB: usize = 262_144;

/// The hyper-parameters a Gemma 3 size is made of (from the released `config.json` files).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmaShape {
    pub name: &'static str,
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub sliding_window: usize,
    pub context_length: usize,
    /// Linear RoPE scaling on global layers (4B and larger).
    pub rope_scale: Option<f32>,
}

impl GemmaShape {
    pub const ALL: [GemmaShape; 6] = [
        GemmaShape::tiny(),
        GemmaShape::sized("270m", 640, 2048, 18, 4, 1, 256, 512, 32_768, None),
        GemmaShape::sized("1b", 1152, 6912, 26, 4, 1, 256, 512, 32_768, None),
        GemmaShape::sized("4b", 2560, 10_240, 34, 8, 4, 256, 1024, 131_072, Some(8.0)),
        GemmaShape::sized(
            "12b",
            3840,
            15_360,
            48,
            16,
            8,
            256,
            1024,
            131_072,
            Some(8.0),
        ),
        GemmaShape::sized(
            "27b",
            5376,
            21_504,
            62,
            32,
            16,
            128,
            1024,
            131_072,
            Some(8.0),
        ),
    ];

    /// Six layers (five sliding, one global), small enough for unit tests.
    pub const fn tiny() -> Self {
        Self::sized("tiny", 64, 128, 6, 2, 1, 32, 16, 2048, None)
    }

    #[allow(clippy::too_many_arguments)]
    const fn sized(
        name: &'static str,
        hidden: usize,
        intermediate: usize,
        layers: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        sliding_window: usize,
        context_length: usize,
        rope_scale: Option<f32>,
    ) -> Self {
        Self {
            name,
            hidden,
            intermediate,
            layers,
            heads,
            kv_heads,
            head_dim,
            sliding_window,
            context_length,
            rope_scale,
        }
    }

    pub fn named(name: &str) -> Result<Self> {
        let wanted = name.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|s| s.name == wanted)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|s| s.name).collect();
                EngineError::ModelNotFound(format!(
                    "no Gemma 3 shape {name:?}; known shapes: {}",
                    known.join(", ")
                ))
            })
    }

    /// Every tensor of the model, GGUF name and candle shape (rows = output features).
    pub fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        let (h, q, kv) = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
        );
        let mut out = vec![("token_embd.weight".to_string(), vec![GEMMA3_VOCAB, h])];
        for i in 0..self.layers {
            let n = |kind: &str| format!("blk.{i}.{kind}.weight");
            out.extend([
                (n("attn_norm"), vec![h]),
                (n("attn_q"), vec![q, h]),
                (n("attn_k"), vec![kv, h]),
                (n("attn_v"), vec![kv, h]),
                (n("attn_q_norm"), vec![self.head_dim]),
                (n("attn_k_norm"), vec![self.head_dim]),
                (n("attn_output"), vec![h, q]),
                (n("post_attention_norm"), vec![h]),
                (n("ffn_norm"), vec![h]),
                (n("ffn_gate"), vec![self.intermediate, h]),
                (n("ffn_up"), vec![self.intermediate, h]),
                (n("ffn_down"), vec![h, self.intermediate]),
                (n("post_ffw_norm"), vec![h]),
            ]);
        }
        out.push(("output_norm.weight".to_string(), vec![h]));
        out
    }

    /// Parameters in the model, the tied embedding counted once.
    pub fn parameters(&self) -> usize {
        self.tensors()
            .iter()
            .map(|(_, dims)| dims.iter().product::<usize>())
            .sum()
    }
}

/// What to write.
#[derive(Debug, Clone, Copy)]
pub struct SyntheticSpec {
    pub shape: GemmaShape,
    pub seed: u64,
    /// Storage of the matrices and the embedding; norms are always f32, as in real GGUF files.
    pub dtype: GgmlDType,
}

/// The GGUF storage type for a name the command line takes.
pub fn synthetic_storage(name: &str) -> Result<GgmlDType> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "bf16" => GgmlDType::BF16,
        "f16" => GgmlDType::F16,
        "f32" => GgmlDType::F32,
        "q8_0" => GgmlDType::Q8_0,
        "q4_0" => GgmlDType::Q4_0,
        "q4k" | "q4_k" => GgmlDType::Q4K,
        other => {
            return Err(EngineError::ModelNotFound(format!(
                "no storage type {other:?} for a synthetic model: use bf16, f16, f32, q8_0, q4_0 or q4k"
            )))
        }
    })
}

/// Writes a synthetic model to `path`. `on_tensor(done, total)` reports progress.
///
/// Weights are uniform with the standard deviation Gemma's initialiser uses (0.02), norms are
/// exactly one (GGUF stores Gemma's `1 + w`, and `w` starts at zero): activations then stay in the
/// range a trained model's do, so timings and numerical agreement are representative.
pub fn write_synthetic_gguf(
    path: &Path,
    spec: &SyntheticSpec,
    on_tensor: &mut dyn FnMut(usize, usize),
) -> Result<()> {
    let shape = &spec.shape;
    let layout = shape.tensors();
    let mut rng = SplitMix64::new(spec.seed);
    let mut tensors = Vec::with_capacity(layout.len());
    for (done, (name, dims)) in layout.iter().enumerate() {
        let count: usize = dims.iter().product();
        let is_norm = dims.len() == 1;
        let values: Vec<f32> = if is_norm {
            vec![1.0; count]
        } else {
            // Uniform on [-a, a] has standard deviation a / sqrt(3).
            let a = 0.02 * 3f32.sqrt();
            (0..count).map(|_| rng.next_symmetric() * a).collect()
        };
        let tensor = Tensor::from_vec(values, dims.as_slice(), &Device::Cpu)?;
        let dtype = if is_norm { GgmlDType::F32 } else { spec.dtype };
        let q = QTensor::quantize(&tensor, dtype).map_err(|e| {
            EngineError::invalid(path, format!("{name} as {dtype:?}: {e} (try --dtype bf16)"))
        })?;
        tensors.push((name.clone(), q));
        on_tensor(done + 1, layout.len());
    }

    let name = format!(
        "SYNTHETIC Gemma 3 {} shape, seed {}: random weights, verdicts mean nothing",
        shape.name, spec.seed
    );
    let mut metadata: Vec<(String, gguf_file::Value)> = vec![
        ("general.architecture".into(), text("gemma3")),
        ("general.name".into(), text(&name)),
        (SYNTHETIC_KEY.into(), gguf_file::Value::Bool(true)),
        (
            "aegis.synthetic.seed".into(),
            gguf_file::Value::U64(spec.seed),
        ),
        ("aegis.synthetic.shape".into(), text(shape.name)),
        ("gemma3.context_length".into(), u32v(shape.context_length)),
        ("gemma3.embedding_length".into(), u32v(shape.hidden)),
        ("gemma3.block_count".into(), u32v(shape.layers)),
        (
            "gemma3.feed_forward_length".into(),
            u32v(shape.intermediate),
        ),
        ("gemma3.attention.head_count".into(), u32v(shape.heads)),
        (
            "gemma3.attention.head_count_kv".into(),
            u32v(shape.kv_heads),
        ),
        ("gemma3.attention.key_length".into(), u32v(shape.head_dim)),
        ("gemma3.attention.value_length".into(), u32v(shape.head_dim)),
        (
            "gemma3.attention.sliding_window".into(),
            u32v(shape.sliding_window),
        ),
        (
            "gemma3.attention.layer_norm_rms_epsilon".into(),
            gguf_file::Value::F32(1e-6),
        ),
        ("gemma3.rope.freq_base".into(), gguf_file::Value::F32(1e6)),
    ];
    if let Some(factor) = shape.rope_scale {
        metadata.push(("gemma3.rope.scaling.type".into(), text("linear")));
        metadata.push((
            "gemma3.rope.scaling.factor".into(),
            gguf_file::Value::F32(factor),
        ));
    }

    let file = std::fs::File::create(path).map_err(|e| EngineError::io(path, e))?;
    let mut out = BufWriter::new(file);
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut out, &metadata, &tensors)
        .map_err(|e| EngineError::invalid(path, format!("writing GGUF: {e}")))?;
    out.flush().map_err(|e| EngineError::io(path, e))?;
    Ok(())
}

/// Whether a GGUF's metadata marks it synthetic.
pub(crate) fn is_synthetic(content: &gguf_file::Content) -> bool {
    matches!(
        content.metadata.get(SYNTHETIC_KEY),
        Some(gguf_file::Value::Bool(true))
    )
}

fn text(s: &str) -> gguf_file::Value {
    gguf_file::Value::String(s.to_string())
}

fn u32v(n: usize) -> gguf_file::Value {
    gguf_file::Value::U32(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_4b_shape_has_the_released_parameter_count() {
        // Gemma 3 4B's language model: 3.88 billion parameters with the tied embedding.
        let params = GemmaShape::named("4b").map(|s| s.parameters()).unwrap_or(0);
        assert!((3_850_000_000..3_900_000_000).contains(&params), "{params}");
        // The 270M: 268 million.
        let params = GemmaShape::named("270M")
            .map(|s| s.parameters())
            .unwrap_or(0);
        assert!((260_000_000..275_000_000).contains(&params), "{params}");
    }

    #[test]
    fn unknown_shapes_list_the_known_ones() {
        let err = GemmaShape::named("3b")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("270m, 1b, 4b"), "{err}");
    }

    #[test]
    fn one_seed_is_one_stream() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<f32> = (0..1000).map(|_| a.next_symmetric()).collect();
        assert!(xs.iter().all(|&x| (-1.0..1.0).contains(&x)));
        assert_eq!(
            xs,
            (0..1000).map(|_| b.next_symmetric()).collect::<Vec<_>>()
        );
        assert_ne!(xs[0], SplitMix64::new(8).next_symmetric());
    }
}
