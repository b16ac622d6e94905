//! The sentence-transformers folder around EmbeddingGemma's layers: which modules follow them
//! (mean pooling, dense projections, normalisation), checked to be the ones this engine runs,
//! and the prompt the folder names for classification.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::error::{EngineError, Result};

/// The prompt `config_sentence_transformers.json` names for classification.
const TASK: &str = "Classification";

/// What the folder's modules add after the layers' mean pooling.
pub(super) struct SentenceModules {
    /// Dense projections, in order, as f32 `[out, in]`.
    pub(super) dense: Vec<Tensor>,
    /// Their weight files, which the encoder's content hash covers.
    pub(super) dense_files: Vec<PathBuf>,
    pub(super) normalize: bool,
    /// Put before each text (empty where the folder names none).
    pub(super) prompt: String,
}

impl SentenceModules {
    /// Reads `modules.json` and the modules' configs in `folder`; refuses what this engine does
    /// not run rather than computing another embedding than the folder's.
    pub(super) fn read(folder: &Path, device: &Device) -> Result<Self> {
        let modules: Vec<ModuleEntry> = read_json(&folder.join("modules.json"))?;
        let mut dense = Vec::new();
        let mut normalize = false;
        let mut pooled = false;
        let mut dense_files = Vec::new();
        for module in &modules {
            let dir = folder.join(&module.path);
            match module.kind.rsplit('.').next().unwrap_or_default() {
                "Transformer" if module.path.is_empty() => {}
                "Pooling" => {
                    let pooling: PoolingConfig = read_json(&dir.join("config.json"))?;
                    let only_mean = pooling.pooling_mode_mean_tokens
                        && !pooling.pooling_mode_cls_token
                        && !pooling.pooling_mode_max_tokens
                        && !pooling.pooling_mode_lasttoken;
                    if !only_mean || !pooling.include_prompt {
                        return Err(EngineError::invalid(
                            dir.join("config.json"),
                            "only mean pooling over every token (prompt included) is supported",
                        ));
                    }
                    pooled = true;
                }
                "Dense" => {
                    let config_path = dir.join("config.json");
                    let config: DenseConfig = read_json(&config_path)?;
                    if config.bias || !config.activation_function.ends_with("Identity") {
                        return Err(EngineError::invalid(
                            config_path,
                            "only dense layers without bias or activation are supported",
                        ));
                    }
                    let weights = dir.join("model.safetensors");
                    let weight = candle_core::safetensors::load(&weights, device)
                        .map_err(|e| EngineError::invalid(&weights, e.to_string()))?
                        .remove("linear.weight")
                        .ok_or_else(|| EngineError::invalid(&weights, "no linear.weight"))?
                        .to_dtype(DType::F32)?;
                    if weight.dims() != [config.out_features, config.in_features] {
                        return Err(EngineError::invalid(
                            &weights,
                            format!(
                                "linear.weight is {:?}, the config says {}x{}",
                                weight.dims(),
                                config.out_features,
                                config.in_features
                            ),
                        ));
                    }
                    dense_files.push(weights);
                    dense.push(weight);
                }
                "Normalize" => normalize = true,
                other => {
                    return Err(EngineError::invalid(
                        folder.join("modules.json"),
                        format!("module {other:?} at {:?} is not supported", module.path),
                    ))
                }
            }
        }
        if !pooled {
            return Err(EngineError::invalid(
                folder.join("modules.json"),
                "no pooling module: the encoder would not produce one vector per text",
            ));
        }
        let settings: SentenceTransformersConfig =
            read_json(&folder.join("config_sentence_transformers.json"))?;
        Ok(Self {
            dense,
            dense_files,
            normalize,
            prompt: settings.prompts.get(TASK).cloned().unwrap_or_default(),
        })
    }
}

#[derive(Deserialize)]
struct ModuleEntry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct PoolingConfig {
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
    #[serde(default = "yes")]
    include_prompt: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct DenseConfig {
    in_features: usize,
    out_features: usize,
    #[serde(default)]
    bias: bool,
    #[serde(default)]
    activation_function: String,
}

#[derive(Deserialize)]
struct SentenceTransformersConfig {
    #[serde(default)]
    prompts: std::collections::HashMap<String, String>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let raw = std::fs::read(path).map_err(|e| EngineError::io(path, e))?;
    serde_json::from_slice(&raw).map_err(|e| EngineError::invalid(path, e.to_string()))
}
