//! Gemma 3 hyper-parameters, read from GGUF metadata or a Hugging Face `config.json`.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file;

use crate::error::{EngineError, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct Gemma3Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    /// RoPE base on global layers (1e6).
    pub rope_global_base: f64,
    /// RoPE base on sliding-window layers (1e4; GGUF does not record it).
    pub rope_local_base: f64,
    /// Linear RoPE scaling on global layers (8 for the 4B, else 1).
    pub rope_global_scale: f64,
    /// Sliding-window layers see the keys less than this far from the query: behind it in a
    /// decoder, on either side in a bidirectional encoder.
    pub sliding_window: usize,
    /// Every `sliding_window_pattern`-th layer is global; the others use the window.
    pub sliding_window_pattern: usize,
    pub context_length: usize,
    /// Attention logits are scaled by `query_pre_attn_scalar^-0.5`.
    pub query_pre_attn_scalar: f64,
    /// Every position sees the positions after it too (EmbeddingGemma, an encoder): no causal
    /// mask, and sliding layers see the positions less than `sliding_window` away on either side.
    pub bidirectional: bool,
}

impl Gemma3Config {
    pub fn is_sliding(&self, layer: usize) -> bool {
        !(layer + 1).is_multiple_of(self.sliding_window_pattern)
    }

    pub fn from_gguf(path: &Path, content: &gguf_file::Content) -> Result<Self> {
        let md = &content.metadata;
        let arch = md
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if arch != "gemma3" {
            return Err(EngineError::invalid(
                path,
                format!("architecture is {arch:?}; only Gemma 3 (gemma3) models are supported"),
            ));
        }
        let get = |key: &str| -> Result<&gguf_file::Value> {
            md.get(&format!("gemma3.{key}")).ok_or_else(|| {
                EngineError::invalid(path, format!("GGUF metadata lacks gemma3.{key}"))
            })
        };
        let usize_of = |key: &str| -> Result<usize> {
            let v = get(key)?;
            v.to_u32()
                .map(|x| x as usize)
                .or_else(|_| v.to_u64().map(|x| x as usize))
                .map_err(|e| EngineError::invalid(path, format!("gemma3.{key}: {e}")))
        };
        let f64_of = |key: &str, default: f64| -> f64 {
            get(key)
                .ok()
                .and_then(|v| v.to_f32().ok())
                .map(f64::from)
                .unwrap_or(default)
        };
        let vocab_size = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| EngineError::invalid(path, "no token_embd.weight tensor"))?;
        let hidden_size = usize_of("embedding_length")?;
        let num_heads = usize_of("attention.head_count")?;
        let head_dim = usize_of("attention.key_length")?;
        let scaling_linear = get("rope.scaling.type")
            .ok()
            .and_then(|v| v.to_string().ok())
            .is_some_and(|t| t == "linear");
        let rope_global_scale = if scaling_linear {
            f64_of("rope.scaling.factor", 1.0)
        } else {
            1.0
        };
        Ok(Self {
            vocab_size,
            hidden_size,
            intermediate_size: usize_of("feed_forward_length")?,
            num_layers: usize_of("block_count")?,
            num_heads,
            num_kv_heads: usize_of("attention.head_count_kv")?,
            head_dim,
            rms_norm_eps: f64_of("attention.layer_norm_rms_epsilon", 1e-6),
            rope_global_base: f64_of("rope.freq_base", 1_000_000.0),
            rope_local_base: 10_000.0,
            rope_global_scale,
            sliding_window: usize_of("attention.sliding_window")?,
            sliding_window_pattern: 6,
            context_length: usize_of("context_length")?,
            query_pre_attn_scalar: query_pre_attn_scalar(hidden_size, num_heads, head_dim),
            bidirectional: false,
        })
    }

    /// Reads `config.json`; multimodal checkpoints (4B and up) nest the text model in `text_config`.
    pub fn from_hf_config(path: &Path) -> Result<Self> {
        let raw = std::fs::read(path).map_err(|e| EngineError::io(path, e))?;
        let root: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| EngineError::invalid(path, format!("not valid JSON: {e}")))?;
        let text = root.get("text_config").unwrap_or(&root);
        let num = |key: &str| text.get(key).and_then(|v| v.as_f64());
        let need = |key: &str| {
            num(key).ok_or_else(|| EngineError::invalid(path, format!("config.json lacks {key}")))
        };
        let hidden_size = need("hidden_size")? as usize;
        let num_heads = need("num_attention_heads")? as usize;
        let head_dim = num("head_dim").map(|v| v as usize).unwrap_or(256);
        let rope_global_scale = text
            .get("rope_scaling")
            .filter(|s| s.get("rope_type").and_then(|t| t.as_str()) == Some("linear"))
            .and_then(|s| s.get("factor"))
            .and_then(|f| f.as_f64())
            .unwrap_or(1.0);
        let bidirectional = text
            .get("use_bidirectional_attention")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        Ok(Self {
            vocab_size: num("vocab_size").map(|v| v as usize).unwrap_or(262_208),
            hidden_size,
            intermediate_size: need("intermediate_size")? as usize,
            num_layers: need("num_hidden_layers")? as usize,
            num_heads,
            num_kv_heads: need("num_key_value_heads")? as usize,
            head_dim,
            rms_norm_eps: num("rms_norm_eps").unwrap_or(1e-6),
            rope_global_base: num("rope_theta").unwrap_or(1_000_000.0),
            rope_local_base: num("rope_local_base_freq").unwrap_or(10_000.0),
            rope_global_scale,
            sliding_window: sliding_reach(
                num("sliding_window").map(|v| v as usize).unwrap_or(512),
                bidirectional,
            ),
            sliding_window_pattern: num("sliding_window_pattern")
                .or_else(|| num("_sliding_window_pattern"))
                .map(|v| v as usize)
                .unwrap_or(6),
            context_length: num("max_position_embeddings")
                .map(|v| v as usize)
                .unwrap_or(32_768),
            query_pre_attn_scalar: num("query_pre_attn_scalar")
                .unwrap_or_else(|| query_pre_attn_scalar(hidden_size, num_heads, head_dim)),
            bidirectional,
        })
    }
}

/// How far a sliding layer reaches for a `configured` window. A bidirectional model splits the
/// window between the two sides, so a query sees the keys at most half of it away (EmbeddingGemma:
/// 256 either side of 512, as `transformers` and llama.cpp read it); a causal one sees the whole
/// window behind it.
fn sliding_reach(configured: usize, bidirectional: bool) -> usize {
    if bidirectional {
        configured / 2 + 1
    } else {
        configured
    }
}

/// Gemma 3 27B scales attention by hidden/heads; every other size by the head dimension.
fn query_pre_attn_scalar(hidden_size: usize, num_heads: usize, head_dim: usize) -> f64 {
    if hidden_size == 5376 {
        (hidden_size / num_heads) as f64
    } else {
        head_dim as f64
    }
}

/// Maps GGUF tensor names to Hugging Face checkpoint names (without the model prefix).
pub(crate) fn hf_tensor_name(gguf_name: &str) -> String {
    let table: HashMap<&str, &str> = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("ffn_norm", "pre_feedforward_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("post_ffw_norm", "post_feedforward_layernorm"),
    ]
    .into_iter()
    .collect();
    match gguf_name {
        "token_embd.weight" => "embed_tokens.weight".to_string(),
        "output_norm.weight" => "norm.weight".to_string(),
        _ => {
            let mut parts = gguf_name.splitn(3, '.');
            let (blk, idx, rest) = (parts.next(), parts.next(), parts.next());
            match (blk, idx, rest.and_then(|r| r.strip_suffix(".weight"))) {
                (Some("blk"), Some(idx), Some(kind)) => {
                    let hf = table.get(kind).copied().unwrap_or(kind);
                    format!("layers.{idx}.{hf}.weight")
                }
                _ => gguf_name.to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_gguf_names_to_hf_names() {
        assert_eq!(
            hf_tensor_name("blk.3.attn_q.weight"),
            "layers.3.self_attn.q_proj.weight"
        );
        assert_eq!(
            hf_tensor_name("blk.17.post_ffw_norm.weight"),
            "layers.17.post_feedforward_layernorm.weight"
        );
        assert_eq!(hf_tensor_name("token_embd.weight"), "embed_tokens.weight");
    }

    #[test]
    fn reads_a_multimodal_hf_config_with_rope_scaling() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| EngineError::io("tempdir", e))?;
        let path = dir.path().join("config.json");
        let json = r#"{"architectures":["Gemma3ForConditionalGeneration"],
          "text_config":{"hidden_size":2560,"intermediate_size":10240,"num_hidden_layers":34,
          "num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"rope_theta":1000000.0,
          "rope_local_base_freq":10000.0,"rope_scaling":{"factor":8.0,"rope_type":"linear"},
          "sliding_window":1024,"query_pre_attn_scalar":256,"vocab_size":262208}}"#;
        std::fs::write(&path, json).map_err(|e| EngineError::io(&path, e))?;
        let config = Gemma3Config::from_hf_config(&path)?;
        assert_eq!(config.num_layers, 34);
        assert_eq!(config.rope_global_scale, 8.0);
        assert_eq!(config.sliding_window, 1024);
        assert!(config.is_sliding(0) && !config.is_sliding(5) && config.is_sliding(6));
        Ok(())
    }
}
