//! A copy of a sentence-transformers encoder folder with the transformer's weights rounded to
//! bfloat16: half the bytes (EmbeddingGemma's 1.2 GB becomes 0.6 GB), and on a GPU the very
//! weights it runs anyway (it rounds f32 to bf16 the same way, to nearest even, at load). Its
//! files hash otherwise, so heads trained on the original read it once its embeddings of their
//! probe texts match what they recorded (the runtime's fingerprint check).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use crate::error::{EngineError, Result};

/// The transformer's weights: the only file rounded. The modules' projections (`2_Dense/…`) are
/// small and loaded in f32, so they are copied as they are.
const TRANSFORMER_WEIGHTS: &str = "model.safetensors";

/// Writes the copy of `from` into `to` (created; an existing folder with weights in it is
/// refused, so nothing is overwritten). Returns the files written.
pub fn write_bf16_copy(from: &Path, to: &Path) -> Result<Vec<PathBuf>> {
    if !from.join("modules.json").is_file() {
        return Err(EngineError::invalid(
            from,
            "not a sentence-transformers folder (no modules.json)",
        ));
    }
    if to.join(TRANSFORMER_WEIGHTS).exists() {
        return Err(EngineError::invalid(
            to,
            "already holds weights; name an empty or new folder",
        ));
    }
    let mut written = Vec::new();
    for relative in folder_files(from)? {
        let target = to.join(&relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| EngineError::io(parent, e))?;
        }
        let source = from.join(&relative);
        if relative == Path::new(TRANSFORMER_WEIGHTS) {
            write_rounded(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| EngineError::io(&source, e))?;
        }
        written.push(target);
    }
    Ok(written)
}

/// The folder's files and its modules' (one level down), relative, in a stable order.
fn folder_files(folder: &Path) -> Result<Vec<PathBuf>> {
    let list = |dir: &Path| -> Result<Vec<std::fs::DirEntry>> {
        let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io(dir, e))?;
        entries
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| EngineError::io(dir, e))
    };
    let mut files = Vec::new();
    for entry in list(folder)? {
        let path = entry.path();
        if path.is_dir() {
            for inner in list(&path)? {
                if inner.path().is_file() {
                    files.push(PathBuf::from(entry.file_name()).join(inner.file_name()));
                }
            }
        } else if path.is_file() {
            files.push(PathBuf::from(entry.file_name()));
        }
    }
    files.sort();
    Ok(files)
}

fn write_rounded(source: &Path, target: &Path) -> Result<()> {
    let tensors = candle_core::safetensors::load(source, &Device::Cpu)
        .map_err(|e| EngineError::invalid(source, e.to_string()))?;
    let rounded = tensors
        .into_iter()
        .map(|(name, tensor)| {
            let tensor = match tensor.dtype() {
                DType::F32 | DType::F64 | DType::F16 => tensor.to_dtype(DType::BF16)?,
                _ => tensor,
            };
            Ok((name, tensor))
        })
        .collect::<Result<HashMap<String, Tensor>>>()?;
    candle_core::safetensors::save(&rounded, target)
        .map_err(|e| EngineError::invalid(target, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder_with(weights: &[(&str, Tensor)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("modules.json"), "[]").unwrap();
        std::fs::create_dir(dir.path().join("2_Dense")).unwrap();
        let dense: HashMap<String, Tensor> = [(
            "linear.weight".to_string(),
            Tensor::new(&[[0.1f32, 0.2]], &Device::Cpu).unwrap(),
        )]
        .into();
        candle_core::safetensors::save(&dense, dir.path().join("2_Dense/model.safetensors"))
            .unwrap();
        let weights: HashMap<String, Tensor> = weights
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        candle_core::safetensors::save(&weights, dir.path().join(TRANSFORMER_WEIGHTS)).unwrap();
        dir
    }

    #[test]
    fn rounds_the_transformer_to_nearest_even_and_copies_the_rest_as_they_are() {
        // 1 + 2^-8 is halfway between two bf16 values: it rounds to the even one, 1.0; one ulp of
        // f32 above the halfway point rounds up.
        let halfway = 1.0f32 + 2f32.powi(-8);
        let above = f32::from_bits(halfway.to_bits() + 1);
        let from = folder_with(&[(
            "layers.0.weight",
            Tensor::new(&[halfway, above, -2.5], &Device::Cpu).unwrap(),
        )]);
        let to = tempfile::tempdir().unwrap();
        let written = write_bf16_copy(from.path(), &to.path().join("copy")).unwrap();
        assert_eq!(written.len(), 3, "{written:?}");
        let copy = to.path().join("copy");
        let rounded = candle_core::safetensors::load(copy.join(TRANSFORMER_WEIGHTS), &Device::Cpu)
            .unwrap()
            .remove("layers.0.weight")
            .unwrap();
        assert_eq!(rounded.dtype(), DType::BF16);
        let values: Vec<f32> = rounded.to_dtype(DType::F32).unwrap().to_vec1().unwrap();
        assert_eq!(values, [1.0, 1.0 + 2f32.powi(-7), -2.5]);
        assert_eq!(
            std::fs::read(copy.join("2_Dense/model.safetensors")).unwrap(),
            std::fs::read(from.path().join("2_Dense/model.safetensors")).unwrap()
        );
        assert!(copy.join("modules.json").is_file());
    }

    #[test]
    fn refuses_a_folder_that_is_not_an_encoder_and_never_overwrites_weights() {
        let empty = tempfile::tempdir().unwrap();
        let error = write_bf16_copy(empty.path(), &empty.path().join("copy")).unwrap_err();
        assert!(error.to_string().contains("no modules.json"), "{error}");
        let from = folder_with(&[("w", Tensor::new(&[1f32], &Device::Cpu).unwrap())]);
        let error = write_bf16_copy(from.path(), from.path()).unwrap_err();
        assert!(
            error.to_string().contains("already holds weights"),
            "{error}"
        );
    }
}
