//! Each training text's embedding through the adapter that never trained on its source, kept for
//! the heads. Heads trained on an adapter's reading of its own training rows see features it has
//! memorised: they separate those rows perfectly and their thresholds collapse (issue "Read who
//! says it", candidate 1). Trained on out-of-fold readings instead, a head sees what the shipped
//! adapter makes of a text it has not seen, which is what every user's message is.
//!
//! On disk: a safetensors file with the texts' SHA-256 (`text_sha256`, n × 32 bytes), their
//! embeddings (`embeddings`, n × width, f32) and the run that made them in its metadata
//! (`aegis.cross_fit`: the adapter's shape and training settings and the data's hash, as JSON).

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use sha2::{Digest, Sha256};

use crate::error::{AdaptError, Result};

const METADATA_KEY: &str = "aegis.cross_fit";

/// Out-of-fold embeddings by text, and the cross-fit run that made them.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfFold {
    /// The run's settings as JSON; a head trained on these embeddings is only honest beside an
    /// adapter trained with the same settings on the same data.
    pub run: String,
    width: usize,
    by_text: HashMap<[u8; 32], Vec<f32>>,
}

fn text_key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl OutOfFold {
    pub fn new(run: String) -> Self {
        Self {
            run,
            width: 0,
            by_text: HashMap::new(),
        }
    }

    /// Records `text`'s embedding; every embedding has the first one's width.
    pub fn insert(&mut self, text: &str, embedding: Vec<f32>) -> Result<()> {
        if self.by_text.is_empty() {
            self.width = embedding.len();
        }
        if embedding.len() != self.width || self.width == 0 {
            return Err(AdaptError::Invalid(format!(
                "an embedding of width {} among ones of width {}",
                embedding.len(),
                self.width
            )));
        }
        self.by_text.insert(text_key(text), embedding);
        Ok(())
    }

    pub fn get(&self, text: &str) -> Option<&[f32]> {
        self.by_text.get(&text_key(text)).map(Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let invalid = |e: &dyn std::fmt::Display| AdaptError::Invalid(e.to_string());
        // Sorted by key, so the same embeddings give the same bytes.
        let mut rows: Vec<(&[u8; 32], &Vec<f32>)> = self.by_text.iter().collect();
        rows.sort_by_key(|(key, _)| **key);
        let keys: Vec<u8> = rows
            .iter()
            .flat_map(|(key, _)| key.iter().copied())
            .collect();
        let values: Vec<f32> = rows.iter().flat_map(|(_, e)| e.iter().copied()).collect();
        let keys = Tensor::from_vec(keys, (rows.len(), 32), &Device::Cpu)?;
        let values = Tensor::from_vec(values, (rows.len(), self.width), &Device::Cpu)?;
        let metadata = HashMap::from([(METADATA_KEY.to_string(), self.run.clone())]);
        let bytes = safetensors::serialize(
            [("text_sha256", &keys), ("embeddings", &values)],
            Some(metadata),
        )
        .map_err(|e| invalid(&e))?;
        aegis_files::write_atomically(path, &bytes).map_err(|e| invalid(&e))
    }

    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| AdaptError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |why: String| {
            AdaptError::Invalid(format!(
                "{} is not a file of out-of-fold embeddings: {why}",
                path.display()
            ))
        };
        let (_, header) =
            safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| invalid(e.to_string()))?;
        let run = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(METADATA_KEY))
            .cloned()
            .ok_or_else(|| invalid(format!("no {METADATA_KEY} in its metadata")))?;
        let mut tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)?;
        let (Some(keys), Some(values)) =
            (tensors.remove("text_sha256"), tensors.remove("embeddings"))
        else {
            return Err(invalid("it lacks text_sha256 or embeddings".into()));
        };
        let keys: Vec<Vec<u8>> = keys.to_vec2()?;
        let values: Vec<Vec<f32>> = values.to_vec2()?;
        if keys.len() != values.len() {
            return Err(invalid(format!(
                "{} keys for {} embeddings",
                keys.len(),
                values.len()
            )));
        }
        let mut read = Self::new(run);
        for (key, embedding) in keys.into_iter().zip(values) {
            let key: [u8; 32] = key
                .try_into()
                .map_err(|_| invalid("a key is not 32 bytes".into()))?;
            read.width = embedding.len();
            read.by_text.insert(key, embedding);
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_round_trip_through_the_file_with_their_run() {
        let mut written = OutOfFold::new(r#"{"rank":4}"#.into());
        written
            .insert("you are a pig", vec![0.5, -1.0, 2.0])
            .unwrap();
        written
            .insert("how do I report \"pig\"?", vec![0.0, 1.0, 0.25])
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oof.safetensors");
        written.write(&path).unwrap();
        let read = OutOfFold::read(&path).unwrap();
        assert_eq!(read, written);
        assert_eq!(read.get("you are a pig"), Some([0.5, -1.0, 2.0].as_slice()));
        assert_eq!(read.get("you are a cat"), None);
    }

    #[test]
    fn embeddings_of_another_width_and_other_files_are_refused() {
        let mut oof = OutOfFold::new("{}".into());
        oof.insert("a", vec![1.0, 2.0]).unwrap();
        assert!(oof.insert("b", vec![1.0]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not.safetensors");
        std::fs::write(&path, b"{}").unwrap();
        let error = OutOfFold::read(&path).unwrap_err().to_string();
        assert!(
            error.contains("not a file of out-of-fold embeddings"),
            "{error}"
        );
    }
}
