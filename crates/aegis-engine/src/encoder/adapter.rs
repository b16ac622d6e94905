//! A low-rank adaptation of the encoder's upper layers (issue "Read who says it"): for each
//! adapted projection two thin matrices whose product, scaled, is added to the frozen weight when
//! the encoder loads. The adapted encoder then costs exactly what the plain one does, and the
//! file (a few hundred kilobytes) is what a retrain versions, not a copy of the model.
//!
//! The file is safetensors: `layers.{i}.{projection}.down` (`[rank, in]`) and `.up`
//! (`[out, rank]`) per adapted projection, `i` counted from 0, with the scale and the encoder it
//! was trained on in the metadata.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use crate::error::{EngineError, Result};

/// The linear maps of a Gemma 3 layer an adapter may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Projection {
    Query,
    Key,
    Value,
    Output,
    Gate,
    Up,
    Down,
}

impl Projection {
    pub const ALL: [Projection; 7] = [
        Self::Query,
        Self::Key,
        Self::Value,
        Self::Output,
        Self::Gate,
        Self::Up,
        Self::Down,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Query => "q",
            Self::Key => "k",
            Self::Value => "v",
            Self::Output => "o",
            Self::Gate => "gate",
            Self::Up => "up",
            Self::Down => "down",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One adapted projection: its weight becomes `weight + scale * up · down`.
#[derive(Debug, Clone)]
pub struct LowRankUpdate {
    /// `[rank, in]`
    pub down: Tensor,
    /// `[out, rank]`
    pub up: Tensor,
}

#[derive(Debug, Clone)]
pub struct EncoderAdapter {
    pub scale: f64,
    /// The content hash of the encoder it was trained on: an adapter read onto another encoder
    /// would add noise, so loading refuses it.
    pub base_hash: String,
    pub updates: BTreeMap<(usize, Projection), LowRankUpdate>,
}

const METADATA_KEY: &str = "aegis_encoder_adapter";

/// What the file says of itself, beside its tensors.
#[derive(serde::Serialize, serde::Deserialize)]
struct AdapterMetadata {
    scale: f64,
    /// sha256 of the plain encoder's weight files.
    base_hash: String,
}

impl EncoderAdapter {
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::io(path, e))?;
        Self::from_bytes(&bytes, path)
    }

    /// An adapter file's content; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        let invalid = |message: String| EngineError::invalid(path, message);
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes)
            .map_err(|e| invalid(format!("not a safetensors file: {e}")))?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let described: AdapterMetadata = metadata
            .get(METADATA_KEY)
            .and_then(|raw| serde_json::from_str(raw).ok())
            .filter(|m: &AdapterMetadata| m.scale.is_finite())
            .ok_or_else(|| invalid(format!("no {METADATA_KEY} in its metadata")))?;
        let AdapterMetadata { scale, base_hash } = described;
        let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)?;
        let mut halves: BTreeMap<(usize, Projection), (Option<Tensor>, Option<Tensor>)> =
            BTreeMap::new();
        for (name, tensor) in tensors {
            let parts: Vec<&str> = name.split('.').collect();
            let (layer, projection, half) = match parts.as_slice() {
                ["layers", layer, projection, half] => (
                    layer.parse::<usize>().ok(),
                    Projection::from_name(projection),
                    *half,
                ),
                _ => (None, None, ""),
            };
            let (Some(layer), Some(projection)) = (layer, projection) else {
                return Err(invalid(format!("unexpected tensor {name:?}")));
            };
            let slot = halves.entry((layer, projection)).or_default();
            let tensor = tensor.to_dtype(DType::F32)?;
            match half {
                "down" => slot.0 = Some(tensor),
                "up" => slot.1 = Some(tensor),
                _ => return Err(invalid(format!("unexpected tensor {name:?}"))),
            }
        }
        let mut updates = BTreeMap::new();
        for (key, halves) in halves {
            let (Some(down), Some(up)) = halves else {
                return Err(invalid(format!(
                    "layer {} {} has only one of down and up",
                    key.0,
                    key.1.name()
                )));
            };
            if down.dims().len() != 2 || up.dims().len() != 2 || up.dim(1)? != down.dim(0)? {
                return Err(invalid(format!(
                    "layer {} {}: down {:?} and up {:?} do not compose",
                    key.0,
                    key.1.name(),
                    down.dims(),
                    up.dims()
                )));
            }
            updates.insert(key, LowRankUpdate { down, up });
        }
        Ok(Self {
            scale,
            base_hash,
            updates,
        })
    }

    /// The file's bytes (written atomically by the caller).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut tensors: Vec<(String, &Tensor)> = Vec::new();
        for ((layer, projection), update) in &self.updates {
            let name = |half: &str| format!("layers.{layer}.{}.{half}", projection.name());
            tensors.push((name("down"), &update.down));
            tensors.push((name("up"), &update.up));
        }
        // One key: the format's metadata is a HashMap, whose order would change the bytes from
        // run to run, and a retrain must give the same file.
        let described = serde_json::to_string(&AdapterMetadata {
            scale: self.scale,
            base_hash: self.base_hash.clone(),
        })
        .map_err(|e| EngineError::Candle(candle_core::Error::Msg(e.to_string())))?;
        let metadata = HashMap::from([(METADATA_KEY.to_string(), described)]);
        safetensors::serialize(tensors, Some(metadata)).map_err(|e| {
            EngineError::Candle(candle_core::Error::Msg(format!(
                "writing the adapter failed: {e}"
            )))
        })
    }

    /// What the update adds to the frozen weight, `[out, in]`.
    pub fn delta(&self, update: &LowRankUpdate) -> Result<Tensor> {
        Ok((update.up.matmul(&update.down)? * self.scale)?)
    }

    /// The layers it changes, counted from 0.
    pub fn layers(&self) -> Vec<usize> {
        let mut layers: Vec<usize> = self.updates.keys().map(|(layer, _)| *layer).collect();
        layers.dedup();
        layers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adapter_reads_back_what_was_written() {
        let device = Device::Cpu;
        let down = Tensor::new(&[[1f32, 2., 3.], [4., 5., 6.]], &device).unwrap();
        let up = Tensor::new(&[[1f32, 0.], [0., 1.], [1., 1.], [0., 0.]], &device).unwrap();
        let adapter = EncoderAdapter {
            scale: 0.5,
            base_hash: "abc".into(),
            updates: BTreeMap::from([((22, Projection::Up), LowRankUpdate { down, up })]),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adapter.safetensors");
        std::fs::write(&path, adapter.to_bytes().unwrap()).unwrap();
        let back = EncoderAdapter::read(&path).unwrap();
        assert_eq!(back.scale, 0.5);
        assert_eq!(back.base_hash, "abc");
        assert_eq!(back.layers(), vec![22]);
        let update = &back.updates[&(22, Projection::Up)];
        let delta = back.delta(update).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(delta[2], vec![2.5, 3.5, 4.5]);
        assert_eq!(delta[3], vec![0., 0., 0.]);
    }

    #[test]
    fn a_file_that_is_not_an_adapter_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adapter.safetensors");
        std::fs::write(&path, b"not safetensors").unwrap();
        let error = EncoderAdapter::read(&path).unwrap_err().to_string();
        assert!(error.contains("not a safetensors file"), "{error}");
    }

    #[test]
    fn the_same_adapter_is_the_same_bytes() {
        let device = Device::Cpu;
        let adapter = EncoderAdapter {
            scale: 2.0,
            base_hash: "abc".into(),
            updates: BTreeMap::from([(
                (1, Projection::Query),
                LowRankUpdate {
                    down: Tensor::ones((1, 2), DType::F32, &device).unwrap(),
                    up: Tensor::ones((2, 1), DType::F32, &device).unwrap(),
                },
            )]),
        };
        assert_eq!(
            adapter.to_bytes().unwrap(),
            adapter.clone().to_bytes().unwrap()
        );
    }
}
