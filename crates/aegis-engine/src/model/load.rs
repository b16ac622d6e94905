//! Reading a Gemma 3 checkpoint (GGUF or safetensors) into the forward pass's layers, in the
//! weight format the device runs best.

use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};

use super::rope::Rope;
use super::safetensors_file::SafetensorsIndex;
use super::{Embedding, Gemma3, Layer, RmsNorm};
use crate::config::{hf_tensor_name, Gemma3Config};
use crate::error::{EngineError, Result};
use crate::source::WeightFiles;

/// How linear-layer weights are held in memory, and so which dtype activations run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// Keep the file's quantized blocks; matmuls dequantize on the fly (f32 activations).
    Quantized,
    /// Dequantize once at load to dense f32: more memory, faster prefill on CPU (GEMM instead of
    /// per-row quantized dot products). Measured and chosen for CPU; see the README.
    F32,
    /// Dense bfloat16 weights and activations: what GPU tensor cores run fastest, at half the
    /// memory of f32. Slow on CPU (no bf16 GEMM units); there it is only for agreement checks.
    Bf16,
}

impl WeightFormat {
    /// The format a device runs best: f32 GEMM on CPU, bf16 tensor cores on CUDA.
    pub fn best_for(device: &Device) -> Self {
        if device.is_cpu() {
            Self::F32
        } else {
            Self::Bf16
        }
    }

    /// The dtype hidden states, caches and dense weights take in this format.
    pub fn activation_dtype(self) -> DType {
        match self {
            Self::Quantized | Self::F32 => DType::F32,
            Self::Bf16 => DType::BF16,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Quantized => "quantized",
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
        }
    }
}

impl std::str::FromStr for WeightFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "quantized" | "q" => Ok(Self::Quantized),
            "f32" | "dense" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            other => Err(format!(
                "unknown weight format {other:?}: use f32, bf16, quantized or auto"
            )),
        }
    }
}

/// How an encoder holds its token embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingStorage {
    Dense(DType),
    /// ggml's Q8_0 blocks (32 values, one f16 scale): a quarter of f32's memory, rows dequantized
    /// as they are looked up.
    Q8_0,
}

/// Reads named tensors from either weight format, presenting GGUF names.
enum WeightReader {
    Gguf {
        content: gguf_file::Content,
        file: std::fs::File,
    },
    Safetensors {
        index: SafetensorsIndex,
        prefix: String,
    },
}

impl WeightReader {
    fn qtensor(&mut self, path: &Path, name: &str, device: &Device) -> Result<QTensor> {
        match self {
            Self::Gguf { content, file } => content
                .tensor(file, name, device)
                .map_err(|e| EngineError::invalid(path, format!("tensor {name}: {e}"))),
            Self::Safetensors { .. } => {
                let t = self.dense(path, name)?;
                Ok(QTensor::quantize(
                    &t,
                    candle_core::quantized::GgmlDType::F32,
                )?)
            }
        }
    }

    fn dense(&mut self, path: &Path, name: &str) -> Result<Tensor> {
        self.dense_on(path, name, DType::F32, &Device::Cpu)
    }

    fn norm(
        &mut self,
        path: &Path,
        name: &str,
        eps: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<RmsNorm> {
        let weight = match self {
            // GGUF conversion already folded Gemma's `1 + w` into the stored weight.
            Self::Gguf { .. } => self.qtensor(path, name, device)?.dequantize(device)?,
            Self::Safetensors { .. } => (self.dense(path, name)? + 1.0)?.to_device(device)?,
        };
        Ok(RmsNorm {
            weight: weight.to_dtype(dtype)?,
            eps: eps as f32,
        })
    }

    /// A weight as one dense tensor of `dtype` on `device`.
    fn dense_on(
        &mut self,
        path: &Path,
        name: &str,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        Ok(match self {
            Self::Gguf { .. } => self
                .qtensor(path, name, device)?
                .dequantize(device)?
                .to_dtype(dtype)?,
            // Read straight into `dtype`: never the whole file, nor a tensor twice, in memory.
            Self::Safetensors { index, prefix } => {
                let hf = format!("{prefix}{}", hf_tensor_name(name));
                if !index.contains(&hf) {
                    return Err(EngineError::invalid(path, format!("missing tensor {hf}")));
                }
                index.read(&hf, dtype, device)?
            }
        })
    }

    fn matrix(
        &mut self,
        path: &Path,
        name: &str,
        format: WeightFormat,
        device: &Device,
    ) -> Result<QMatMul> {
        match (format, &self) {
            (WeightFormat::Quantized, Self::Gguf { .. }) => {
                let blocks = self.qtensor(path, name, device)?;
                Ok(QMatMul::from_qtensor(with_a_simd_kernel(blocks, device)?)?)
            }
            // Safetensors hold no quantized blocks: "quantized" keeps them dense f32.
            _ => Ok(QMatMul::Tensor(self.dense_on(
                path,
                name,
                format.activation_dtype(),
                device,
            )?)),
        }
    }
}

impl Gemma3 {
    pub fn load(files: &WeightFiles, format: WeightFormat, device: &Device) -> Result<Self> {
        Self::load_with(files, format, None, device)
    }

    /// A bidirectional Gemma 3 encoder (EmbeddingGemma's backbone) from safetensors: layers in
    /// `format`, the 262,144-row embedding as `embedding` says. Only a few rows are read per
    /// message, so 8-bit storage quarters the largest tensor's memory for one rounding of its rows.
    pub fn load_encoder(
        files: &WeightFiles,
        format: WeightFormat,
        embedding: EmbeddingStorage,
        device: &Device,
    ) -> Result<Self> {
        let model = Self::load_with(files, format, Some(embedding), device)?;
        if !model.config.bidirectional {
            let path = match files {
                WeightFiles::Gguf(path) => path,
                WeightFiles::Safetensors { config, .. } => config,
            };
            return Err(EngineError::invalid(
                path,
                "not an encoder: its config.json does not set use_bidirectional_attention",
            ));
        }
        Ok(model)
    }

    fn load_with(
        files: &WeightFiles,
        format: WeightFormat,
        embedding: Option<EmbeddingStorage>,
        device: &Device,
    ) -> Result<Self> {
        match files {
            WeightFiles::Gguf(path) => {
                let mut file = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
                let content = gguf_file::Content::read(&mut file).map_err(|e| {
                    EngineError::invalid(path, format!("not a readable GGUF file: {e}"))
                })?;
                let config = Gemma3Config::from_gguf(path, &content)?;
                let synthetic = crate::synthetic::is_synthetic(&content);
                let reader = WeightReader::Gguf { content, file };
                let mut model = Self::from_reader(path, config, reader, format, embedding, device)?;
                model.synthetic = synthetic;
                Ok(model)
            }
            WeightFiles::Safetensors { config, shards } => {
                let cfg = Gemma3Config::from_hf_config(config)?;
                let index = SafetensorsIndex::open(shards)?;
                // Text-only checkpoints use `model.`; multimodal ones `language_model.model.`; a
                // bare text model (EmbeddingGemma's encoder) none.
                let prefix = ["model.", "language_model.model.", ""]
                    .into_iter()
                    .find(|p| index.contains(&format!("{p}embed_tokens.weight")))
                    .ok_or_else(|| {
                        EngineError::invalid(
                            config,
                            "no embed_tokens.weight in the safetensors files",
                        )
                    })?
                    .to_string();
                let reader = WeightReader::Safetensors { index, prefix };
                Self::from_reader(config, cfg, reader, format, embedding, device)
            }
        }
    }

    fn from_reader(
        path: &Path,
        config: Gemma3Config,
        mut reader: WeightReader,
        format: WeightFormat,
        embedding_storage: Option<EmbeddingStorage>,
        device: &Device,
    ) -> Result<Self> {
        let eps = config.rms_norm_eps;
        let dtype = format.activation_dtype();
        let (embedding, lm_head) = match &mut reader {
            // The embedding stays quantized whatever the format, except in bf16 (for devices
            // with memory to spare and tensor cores to feed): only a few rows are read per step,
            // and dequantizing 262,144 rows would cost far more memory than it saves.
            WeightReader::Gguf { .. } if format != WeightFormat::Bf16 => {
                let q = Arc::new(reader.qtensor(path, "token_embd.weight", device)?);
                (Embedding::Quantized(q.clone()), QMatMul::from_arc(q)?)
            }
            WeightReader::Safetensors { index, prefix }
                if embedding_storage == Some(EmbeddingStorage::Q8_0) =>
            {
                let name = format!("{prefix}embed_tokens.weight");
                let q = Arc::new(index.read_quantized(&name, GgmlDType::Q8_0, device)?);
                (Embedding::Quantized(q.clone()), QMatMul::from_arc(q)?)
            }
            _ => {
                let embedding_dtype = match embedding_storage {
                    Some(EmbeddingStorage::Dense(dtype)) => dtype,
                    _ => dtype,
                };
                let t = reader.dense_on(path, "token_embd.weight", embedding_dtype, device)?;
                (Embedding::Dense(t.clone()), QMatMul::Tensor(t))
            }
        };
        let mut layers = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let n = |kind: &str| format!("blk.{i}.{kind}.weight");
            let mut m = |kind: &str| reader.matrix(path, &n(kind), format, device);
            let (q_proj, k_proj, v_proj, o_proj) =
                (m("attn_q")?, m("attn_k")?, m("attn_v")?, m("attn_output")?);
            let (gate_proj, up_proj, down_proj) = (m("ffn_gate")?, m("ffn_up")?, m("ffn_down")?);
            let mut norm = |kind: &str| reader.norm(path, &n(kind), eps, dtype, device);
            layers.push(Layer {
                attn_norm: norm("attn_norm")?,
                q_norm: norm("attn_q_norm")?,
                k_norm: norm("attn_k_norm")?,
                post_attn_norm: norm("post_attention_norm")?,
                ffn_norm: norm("ffn_norm")?,
                post_ffn_norm: norm("post_ffw_norm")?,
                q_proj,
                k_proj,
                v_proj,
                o_proj,
                gate_proj,
                up_proj,
                down_proj,
                sliding: config.is_sliding(i),
            });
        }
        let final_norm = reader.norm(path, "output_norm.weight", eps, dtype, device)?;
        let rope = |base, scale| {
            Rope::new(
                base,
                scale,
                config.head_dim,
                config.context_length,
                device,
                dtype,
            )
        };
        Ok(Self {
            global_rope: rope(config.rope_global_base, config.rope_global_scale),
            local_rope: rope(config.rope_local_base, 1.0),
            config,
            embedding,
            lm_head,
            layers,
            final_norm,
            device: device.clone(),
            dtype,
            synthetic: false,
            padded_attention: !device.is_cpu(),
        })
    }
}

/// candle multiplies Q4_1, Q5_0 and Q5_1 blocks with scalar code on the CPU (it has SIMD kernels
/// for Q4_0, Q8_0 and the K-quants only), and llama.cpp's Q4_K_M stores most of Gemma 3 270M's
/// matrices as Q5_0 (640-wide rows take no 256-wide K-quant): that scalar loop was over half of
/// a prompt's time. Requantized once at load to Q8_0, whose AVX2 and NEON kernels exist, they
/// keep their values to within an eighth of their own rounding (5-bit steps on an 8-bit grid)
/// and take 8.5 bits a weight instead of 5.5 to 6.
fn with_a_simd_kernel(blocks: QTensor, device: &Device) -> Result<QTensor> {
    let scalar_only = matches!(
        blocks.dtype(),
        GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1
    );
    if !device.is_cpu() || !scalar_only {
        return Ok(blocks);
    }
    Ok(QTensor::quantize(
        &blocks.dequantize(device)?,
        GgmlDType::Q8_0,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_formats_parse_and_follow_the_device() {
        assert_eq!("bf16".parse(), Ok(WeightFormat::Bf16));
        // "dense" was the f32 format's name before bf16 existed; old settings keep working.
        assert_eq!("dense".parse(), Ok(WeightFormat::F32));
        assert_eq!("q".parse(), Ok(WeightFormat::Quantized));
        assert!("int8".parse::<WeightFormat>().is_err());
        assert_eq!(WeightFormat::best_for(&Device::Cpu), WeightFormat::F32);
        assert_eq!(WeightFormat::Bf16.activation_dtype(), DType::BF16);
        for format in [
            WeightFormat::F32,
            WeightFormat::Bf16,
            WeightFormat::Quantized,
        ] {
            assert_eq!(format.name().parse(), Ok(format));
        }
    }
}
