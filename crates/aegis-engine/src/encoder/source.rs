//! Where the encoder's folder comes from: the default cache (`scripts/setup-encoder.sh`), a local
//! sentence-transformers folder, or a Hugging Face hub repository (`google/embeddinggemma-300m`).

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::source::{
    cached_model_dir, cached_snapshot, download_snapshot, hub_cache_dir, HubOptions, ModelSpec,
};

/// Environment variable that overrides the default encoder folder.
pub const ENCODER_DIR_ENV: &str = "AEGIS_ENCODER_DIR";

/// The hub repository real users fetch (gated: the Gemma licence must be accepted).
const HUB_REPO: &str = "google/embeddinggemma-300m";

/// Which encoder the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncoderSpec {
    /// `embeddinggemma`: the default folder, else the hub repository.
    EmbeddingGemma,
    /// A folder on disk or a hub id.
    Named(ModelSpec),
}

impl EncoderSpec {
    pub fn parse(raw: &str) -> Result<Self> {
        match raw.trim() {
            "embeddinggemma" | "embeddinggemma-300m" => Ok(Self::EmbeddingGemma),
            other => Ok(Self::Named(ModelSpec::parse(other)?)),
        }
    }
}

/// The folder `scripts/setup-encoder.sh` fills.
pub fn default_encoder_dir() -> PathBuf {
    cached_model_dir(ENCODER_DIR_ENV, "embeddinggemma-300m")
}

/// The sentence-transformers folder for `spec`, downloading it from the hub when asked and not
/// cached.
pub fn resolve_encoder(spec: &EncoderSpec, hub: &HubOptions) -> Result<PathBuf> {
    match spec {
        EncoderSpec::EmbeddingGemma => {
            let dir = default_encoder_dir();
            if dir.join("modules.json").is_file() {
                return Ok(dir);
            }
            if hub.offline {
                return Err(EngineError::ModelNotFound(format!(
                    "EmbeddingGemma is not in {}: run scripts/setup-encoder.sh, or name {HUB_REPO} with HF_TOKEN set",
                    dir.display()
                )));
            }
            resolve_hub(HUB_REPO, None, hub)
        }
        EncoderSpec::Named(ModelSpec::Default) => {
            resolve_encoder(&EncoderSpec::EmbeddingGemma, hub)
        }
        EncoderSpec::Named(ModelSpec::Local(path)) => {
            if path.join("modules.json").is_file() {
                Ok(path.clone())
            } else {
                Err(EngineError::invalid(
                    path,
                    "not a sentence-transformers folder (no modules.json)",
                ))
            }
        }
        EncoderSpec::Named(ModelSpec::Hub { repo, revision }) => {
            resolve_hub(repo, revision.as_deref(), hub)
        }
    }
}

fn resolve_hub(repo: &str, revision: Option<&str>, hub: &HubOptions) -> Result<PathBuf> {
    let cache_dir = hub_cache_dir(hub);
    if let Some(snapshot) = cached_snapshot(&cache_dir, repo, revision.unwrap_or("main")) {
        if snapshot.join("modules.json").is_file() {
            return Ok(snapshot);
        }
    }
    if hub.offline {
        return Err(EngineError::ModelNotFound(format!(
            "{repo} is not in the Hugging Face cache at {} and offline mode is on",
            cache_dir.display()
        )));
    }
    download_snapshot(repo, revision, &cache_dir, hub, choose_encoder_files)
}

/// A sentence-transformers folder is its JSON configuration and safetensors weights, the modules'
/// subfolders included; notebooks, ONNX exports and the SentencePiece model are not needed.
fn choose_encoder_files(files: &[String]) -> std::result::Result<Vec<String>, String> {
    if !files.iter().any(|f| f == "modules.json") {
        return Err(format!(
            "no modules.json among {} files: not a sentence-transformers model",
            files.len()
        ));
    }
    Ok(files
        .iter()
        .filter(|f| {
            let path = Path::new(f.as_str());
            let top_or_module = path.components().count() <= 2 && !f.starts_with("onnx");
            top_or_module && (f.ends_with(".json") || f.ends_with(".safetensors"))
        })
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_a_sentence_transformers_folder_from_a_hub_listing() {
        let listing: Vec<String> = [
            "README.md",
            "config.json",
            "model.safetensors",
            "modules.json",
            "tokenizer.json",
            "tokenizer.model",
            "1_Pooling/config.json",
            "2_Dense/config.json",
            "2_Dense/model.safetensors",
            "onnx/model.onnx",
            "onnx/config.json",
            "notebook.ipynb",
        ]
        .map(String::from)
        .to_vec();
        let picked = choose_encoder_files(&listing).expect("a sentence-transformers repo");
        assert!(picked.contains(&"2_Dense/model.safetensors".to_string()));
        assert!(picked.contains(&"tokenizer.json".to_string()));
        assert!(!picked
            .iter()
            .any(|f| f.starts_with("onnx") || f.ends_with(".ipynb")));
        assert!(choose_encoder_files(&["config.json".to_string()]).is_err());
    }

    #[test]
    fn names_parse_to_the_encoder_they_mean() -> Result<()> {
        assert_eq!(
            EncoderSpec::parse("embeddinggemma")?,
            EncoderSpec::EmbeddingGemma
        );
        assert_eq!(
            EncoderSpec::parse("google/embeddinggemma-300m")?,
            EncoderSpec::Named(ModelSpec::Hub {
                repo: "google/embeddinggemma-300m".into(),
                revision: None
            })
        );
        Ok(())
    }
}
