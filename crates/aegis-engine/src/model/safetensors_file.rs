//! Safetensors read one tensor at a time, straight into the dtype it will be held in.
//!
//! candle's `safetensors::load` reads the whole file and then converts every tensor, so loading
//! EmbeddingGemma's 1.2 GB of f32 peaked at over 3 GB beside the decoder. Here only the tensor
//! being read is in flight, and large ones are converted a slab of rows at a time into their final
//! buffer: the 805 MB f32 embedding becomes 403 MB of bf16 without ever being whole in f32.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor, WithDType};
use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{EngineError, Result};

/// Bytes read and converted per step of a large tensor.
const SLAB_BYTES: usize = 32 << 20;

#[derive(Debug, Clone, Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

/// Where every tensor of one or more shard files lies.
#[derive(Debug, Default)]
pub(crate) struct SafetensorsIndex {
    entries: HashMap<String, (PathBuf, u64, Entry)>,
}

impl SafetensorsIndex {
    pub(crate) fn open(shards: &[PathBuf]) -> Result<Self> {
        let mut entries = HashMap::new();
        for shard in shards {
            let invalid = |m: String| {
                EngineError::invalid(shard, format!("not a readable safetensors file: {m}"))
            };
            let mut file = File::open(shard).map_err(|e| EngineError::io(shard, e))?;
            let mut len = [0u8; 8];
            file.read_exact(&mut len)
                .map_err(|e| invalid(e.to_string()))?;
            let len = u64::from_le_bytes(len);
            if len > 100 << 20 {
                return Err(invalid(format!("a {len}-byte header")));
            }
            let mut header = vec![0u8; len as usize];
            file.read_exact(&mut header)
                .map_err(|e| invalid(e.to_string()))?;
            let mut map: HashMap<String, serde_json::Value> =
                serde_json::from_slice(&header).map_err(|e| invalid(e.to_string()))?;
            map.remove("__metadata__");
            for (name, value) in map {
                let entry: Entry =
                    serde_json::from_value(value).map_err(|e| invalid(format!("{name}: {e}")))?;
                entries.insert(name, (shard.clone(), 8 + len, entry));
            }
        }
        Ok(Self { entries })
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// Reads the matrix `name` into quantized blocks of `dtype`, a slab of rows at a time, so the
    /// full-precision matrix is never whole in memory.
    pub(crate) fn read_quantized(
        &self,
        name: &str,
        dtype: GgmlDType,
        device: &Device,
    ) -> Result<QTensor> {
        let (shard, data_start, entry) = self
            .entries
            .get(name)
            .ok_or_else(|| EngineError::ModelNotFound(format!("tensor {name}")))?;
        let &[rows, cols] = entry.shape.as_slice() else {
            return Err(EngineError::invalid(
                shard,
                format!("{name} is not a matrix: {:?}", entry.shape),
            ));
        };
        if cols % dtype.block_size() != 0 {
            return Err(EngineError::invalid(
                shard,
                format!("{name}'s rows of {cols} are not whole blocks of {dtype:?}"),
            ));
        }
        // Slabs quantized on rayon's threads, each into its own part of the blocks: quantizing
        // the encoder's 262,144-row embedding is about a second of scalar rounding on one core.
        let slab_rows = (SLAB_BYTES / (cols * 4)).max(1);
        let row_bytes = cols / dtype.block_size() * dtype.type_size();
        let mut blocks = vec![0u8; rows * row_bytes];
        blocks
            .par_chunks_mut(slab_rows * row_bytes)
            .enumerate()
            .try_for_each(|(slab, out)| -> Result<()> {
                let row = slab * slab_rows;
                let n = out.len() / row_bytes;
                let part = Entry {
                    dtype: entry.dtype.clone(),
                    shape: vec![n, cols],
                    data_offsets: (
                        entry.data_offsets.0 + row * cols * element_bytes(&entry.dtype),
                        entry.data_offsets.0 + (row + n) * cols * element_bytes(&entry.dtype),
                    ),
                };
                let slab = read_as::<f32>(shard, *data_start, &part)?;
                out.copy_from_slice(&QTensor::quantize(&slab, dtype)?.data()?);
                Ok(())
            })?;
        Ok(qtensor_from_ggml(dtype, &blocks, vec![rows, cols], device)?)
    }

    /// Reads `name` as `dtype` on `device`.
    pub(crate) fn read(&self, name: &str, dtype: DType, device: &Device) -> Result<Tensor> {
        let (shard, data_start, entry) = self
            .entries
            .get(name)
            .ok_or_else(|| EngineError::ModelNotFound(format!("tensor {name}")))?;
        let tensor = match dtype {
            DType::F32 => read_as::<f32>(shard, *data_start, entry)?,
            DType::BF16 => read_as::<half::bf16>(shard, *data_start, entry)?,
            DType::F16 => read_as::<half::f16>(shard, *data_start, entry)?,
            other => read_as::<f32>(shard, *data_start, entry)?.to_dtype(other)?,
        };
        Ok(tensor.to_device(device)?)
    }
}

fn element_bytes(stored: &str) -> usize {
    if stored == "F32" {
        4
    } else {
        2
    }
}

/// The tensor, converted slab by slab into one buffer of `T`.
fn read_as<T: WithDType>(shard: &Path, data_start: u64, entry: &Entry) -> Result<Tensor> {
    let invalid = |m: String| EngineError::invalid(shard, m);
    let stored = match entry.dtype.as_str() {
        "F32" => DType::F32,
        "BF16" => DType::BF16,
        "F16" => DType::F16,
        other => {
            return Err(invalid(format!(
                "tensors stored as {other} are not supported"
            )))
        }
    };
    let width = stored.size_in_bytes();
    let (start, end) = entry.data_offsets;
    let count: usize = entry.shape.iter().product();
    if end < start || end - start != count * width {
        return Err(invalid(format!(
            "a tensor's bytes ({}) do not match its shape {:?}",
            end.saturating_sub(start),
            entry.shape
        )));
    }
    let mut file = File::open(shard).map_err(|e| EngineError::io(shard, e))?;
    file.seek(SeekFrom::Start(data_start + start as u64))
        .map_err(|e| EngineError::io(shard, e))?;
    let mut values: Vec<T> = Vec::with_capacity(count);
    let slab = (SLAB_BYTES / width).max(1);
    let mut bytes = vec![0u8; slab.min(count) * width];
    let mut done = 0;
    while done < count {
        let n = slab.min(count - done);
        let chunk = &mut bytes[..n * width];
        file.read_exact(chunk)
            .map_err(|e| EngineError::io(shard, e))?;
        let part =
            Tensor::from_raw_buffer(chunk, stored, &[n], &Device::Cpu)?.to_dtype(T::DTYPE)?;
        values.extend(part.to_vec1::<T>()?);
        done += n;
    }
    Ok(Tensor::from_vec(
        values,
        entry.shape.as_slice(),
        &Device::Cpu,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tensors_one_at_a_time_in_the_dtype_asked_for() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| EngineError::io("tempdir", e))?;
        let path = dir.path().join("w.safetensors");
        let a = Tensor::new(&[[1f32, 2.5, -3.0], [4.0, 5.0, 6.0]], &Device::Cpu)?;
        let b = Tensor::new(&[7f32, 8.0], &Device::Cpu)?;
        candle_core::safetensors::save(
            &HashMap::from([("a".to_string(), a.clone()), ("b".to_string(), b)]),
            &path,
        )?;
        let index = SafetensorsIndex::open(std::slice::from_ref(&path))?;
        assert!(index.contains("a") && !index.contains("c"));
        let read = index.read("a", DType::F32, &Device::Cpu)?;
        assert_eq!(read.to_vec2::<f32>()?, a.to_vec2::<f32>()?);
        let bf16 = index.read("a", DType::BF16, &Device::Cpu)?;
        assert_eq!(bf16.dtype(), DType::BF16);
        assert_eq!(
            bf16.to_dtype(DType::F32)?.to_vec2::<f32>()?,
            a.to_vec2::<f32>()?
        );
        assert!(index.read("c", DType::F32, &Device::Cpu).is_err());
        // Quantized a slab at a time, the blocks are those of the whole matrix quantized at once.
        let wide = Tensor::arange(0f32, 64.0 * 3.0, &Device::Cpu)?.reshape((3, 64))?;
        candle_core::safetensors::save(&HashMap::from([("w".to_string(), wide.clone())]), &path)?;
        let index = SafetensorsIndex::open(&[path])?;
        let q = index.read_quantized("w", GgmlDType::Q8_0, &Device::Cpu)?;
        let whole = QTensor::quantize(&wide, GgmlDType::Q8_0)?;
        assert_eq!(q.data()?, whole.data()?);
        Ok(())
    }
}
