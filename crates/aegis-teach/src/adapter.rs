//! The encoder's adapter (`heads/encoder-adapter.safetensors`) as a version beside the heads: the
//! same history table under a key no validator can have, listed by `aegis heads versions
//! encoder-adapter` and put back by `aegis heads revert ID`. The heads trained on an adapted
//! encoder bind to its content hash, which covers the adapter, so reverting one means reverting
//! the heads trained with it too (a head that does not match is refused with that reason).
//!
//! One file changes, atomically, then the version is recorded (the same bytes twice are one
//! version). A kill between the two leaves a live adapter no version names;
//! [`record_live_adapter`], run with the other interrupted applies, records it.

use std::path::{Path, PathBuf};

use aegis_engine::EncoderAdapter;
use aegis_guard::{heads_dir, ENCODER_ADAPTER_FILE};
use aegis_store::{MemberRole, NewHeadVersion, Store};

use crate::applied::Applied;
use crate::error::{Result, TeachError};

/// The adapter's key in the versions table: a hyphen, which no validator key has.
pub const ADAPTER_VERSION_KEY: &str = "encoder-adapter";

/// Where the guard loads the encoder's adapter from, beside the heads.
pub fn adapter_path(templates_dir: &Path) -> PathBuf {
    heads_dir(templates_dir, true).join(ENCODER_ADAPTER_FILE)
}

/// What training an adapter records beside its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterRecord {
    pub data_sha256: String,
    /// Its training figures, as JSON.
    pub metrics: String,
    pub note: String,
    /// The member applying it (in a team, an author).
    pub applied_by: String,
}

/// Writes `bytes` (an adapter file) where the guard loads it and records it as the newest
/// adapter version.
pub async fn apply_adapter(
    store: &Store,
    templates_dir: &Path,
    bytes: &[u8],
    record: &AdapterRecord,
) -> Result<Applied> {
    store
        .require_role(
            &record.applied_by,
            MemberRole::Author,
            "apply encoder adapters",
        )
        .await?;
    let path = adapter_path(templates_dir);
    EncoderAdapter::from_bytes(bytes, &path)
        .map_err(|e| TeachError::Invalid(format!("not an encoder adapter: {e}")))?;
    aegis_files::write_atomically(&path, bytes).map_err(|e| TeachError::Read {
        path: e.path,
        source: e.source,
    })?;
    let version = store
        .save_head_version(&NewHeadVersion {
            validator: ADAPTER_VERSION_KEY.to_string(),
            content: bytes.to_vec(),
            data_sha256: record.data_sha256.clone(),
            metrics: record.metrics.clone(),
            note: record.note.clone(),
            applied_by: record.applied_by.clone(),
        })
        .await?;
    Ok(Applied {
        validator: ADAPTER_VERSION_KEY.to_string(),
        path,
        version,
        threshold: None,
        kept_readings: Vec::new(),
    })
}

/// Records the live adapter when no version has its bytes as the newest (an apply stopped
/// between the file and the record); `None` when there is nothing to record.
pub async fn record_live_adapter(
    store: &Store,
    actor: &str,
    templates_dir: &Path,
) -> Result<Option<Applied>> {
    let path = adapter_path(templates_dir);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(TeachError::Read { path, source }),
    };
    let newest = store.head_versions(ADAPTER_VERSION_KEY).await?;
    let live_hash = aegis_store::content_hash(&bytes);
    if newest.first().is_some_and(|v| v.content_hash == live_hash) {
        return Ok(None);
    }
    let record = AdapterRecord {
        data_sha256: String::new(),
        metrics: "{}".into(),
        note: "found live without a version (an interrupted apply, or copied in by hand)".into(),
        applied_by: actor.to_string(),
    };
    apply_adapter(store, templates_dir, &bytes, &record)
        .await
        .map(Some)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use aegis_engine::{LowRankUpdate, Projection};
    use candle_core::{Device, Tensor};

    use super::*;
    use crate::versions::{finish_interrupted_applies, revert_head};

    fn adapter_bytes(value: f32) -> Vec<u8> {
        let device = Device::Cpu;
        let update = LowRankUpdate {
            down: Tensor::full(value, (2, 4), &device).expect("down"),
            up: Tensor::full(value, (3, 2), &device).expect("up"),
        };
        EncoderAdapter {
            scale: 2.0,
            base_hash: "base".into(),
            updates: BTreeMap::from([((23, Projection::Query), update)]),
        }
        .to_bytes()
        .expect("bytes")
    }

    fn record(note: &str) -> AdapterRecord {
        AdapterRecord {
            data_sha256: "data".into(),
            metrics: "{}".into(),
            note: note.into(),
            applied_by: "ana".into(),
        }
    }

    #[tokio::test]
    async fn an_adapter_is_applied_reverted_and_found_when_unrecorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("h.db")).await.expect("store");
        let templates = dir.path().join("prompts");
        let live = adapter_path(&templates);
        let (first, second, by_hand) = (adapter_bytes(0.1), adapter_bytes(0.2), adapter_bytes(0.3));

        let applied = apply_adapter(&store, &templates, &first, &record("first"))
            .await
            .expect("applied");
        assert_eq!(std::fs::read(&live).expect("live"), first);
        let second_version = apply_adapter(&store, &templates, &second, &record("second"))
            .await
            .expect("applied")
            .version;
        assert!(second_version > applied.version);

        revert_head(&store, "ana", &templates, &[], applied.version)
            .await
            .expect("reverted");
        assert_eq!(std::fs::read(&live).expect("live"), first, "bit for bit");
        let versions = store
            .head_versions(ADAPTER_VERSION_KEY)
            .await
            .expect("versions");
        assert_eq!(versions.len(), 3);
        assert_eq!(
            versions[0].note,
            format!("revert to version {}", applied.version)
        );

        // A file no version names (a kill between the write and the record) is recorded once.
        std::fs::write(&live, &by_hand).expect("write");
        let finished = finish_interrupted_applies(&store, "ana", &templates)
            .await
            .expect("finished");
        assert_eq!(finished.len(), 1);
        assert!(finish_interrupted_applies(&store, "ana", &templates)
            .await
            .expect("nothing more")
            .is_empty());

        let error = apply_adapter(&store, &templates, b"not an adapter", &record("bad"))
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("not an encoder adapter"),
            "{error}"
        );
        assert_eq!(
            std::fs::read(&live).expect("live"),
            by_hand,
            "left as it was"
        );
    }
}
