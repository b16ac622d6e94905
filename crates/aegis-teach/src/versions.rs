//! Applying a head as a version and reverting to one: the file written atomically where the guard
//! reads it, the bytes, metrics and training-data hash kept in history, and the threshold it was
//! tuned with written into the template, so a version is the head and the line it decides at.

use std::path::{Path, PathBuf};

use aegis_guard::{head_path, Validator};
use aegis_heads::{write_atomically, Head};
use aegis_store::{NewHeadVersion, Store};

use crate::error::{Result, TeachError};

/// Where a head was written and the version it became.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub validator: String,
    pub path: PathBuf,
    pub version: i64,
    /// The threshold written into the template, when the head carries one and it changed.
    pub threshold: Option<f64>,
}

/// Writes `head` where the guard reads it and records it as the validator's newest version.
pub async fn apply_head(
    store: &Store,
    templates_dir: &Path,
    validator: Option<&Validator>,
    head: &Head,
    note: &str,
) -> Result<Applied> {
    let bytes = head.to_bytes()?;
    let path = write_head_bytes(templates_dir, &bytes)?;
    let version = record_head_version(store, head, bytes, note).await?;
    let threshold = write_threshold(validator, head)?;
    Ok(Applied {
        validator: head.validator.clone(),
        path,
        version,
        threshold,
    })
}

/// Puts stored version `id` back bit for bit and records that as the newest version.
pub async fn revert_head(
    store: &Store,
    templates_dir: &Path,
    validators: &[Validator],
    id: i64,
) -> Result<Applied> {
    let Some((version, bytes)) = store.head_version(id).await? else {
        return Err(TeachError::Invalid(format!("no head version {id}")));
    };
    let head = Head::from_bytes(&bytes, Path::new("the stored head"))?;
    let path = write_head_bytes(templates_dir, &bytes)?;
    let new = store
        .save_head_version(&NewHeadVersion {
            validator: version.validator.clone(),
            content: bytes,
            data_sha256: version.data_sha256.clone(),
            metrics: version.metrics.clone(),
            note: format!("revert to version {id}"),
        })
        .await?;
    let validator = validators.iter().find(|v| v.key == head.validator);
    let threshold = write_threshold(validator, &head)?;
    Ok(Applied {
        validator: head.validator.clone(),
        path,
        version: new,
        threshold,
    })
}

/// Records a head already written as the validator's newest version.
pub async fn record_head_version(
    store: &Store,
    head: &Head,
    content: Vec<u8>,
    note: &str,
) -> Result<i64> {
    let metrics = serde_json::to_string(&head.training)
        .map_err(|e| TeachError::Invalid(format!("cannot describe the head: {e}")))?;
    Ok(store
        .save_head_version(&NewHeadVersion {
            validator: head.validator.clone(),
            content,
            data_sha256: head.training.data_sha256.clone(),
            metrics,
            note: note.to_string(),
        })
        .await?)
}

/// Writes a head's bytes where the guard reads that validator's head, after checking they are a
/// head: the file is exactly those bytes.
pub fn write_head_bytes(templates_dir: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let head = Head::from_bytes(bytes, Path::new("the stored head"))?;
    let path = head_path(
        templates_dir,
        &head.validator,
        !head.features.encoder.is_decoder(),
    );
    write_atomically(&path, bytes)?;
    Ok(path)
}

/// The template's threshold belongs to the heads on the sentence encoder (the default); heads on
/// the model's hidden states decide at the threshold their own file records.
fn write_threshold(validator: Option<&Validator>, head: &Head) -> Result<Option<f64>> {
    let (Some(validator), Some(threshold)) = (validator, head.training.threshold) else {
        return Ok(None);
    };
    if head.features.encoder.is_decoder()
        || (f64::from(validator.threshold) - threshold).abs() < 1e-4
    {
        return Ok(None);
    }
    let content = validator.content_with_threshold(threshold as f32)?;
    std::fs::write(&validator.path, content).map_err(|source| TeachError::Read {
        path: validator.path.clone(),
        source,
    })?;
    Ok(Some(threshold))
}
