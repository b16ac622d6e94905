//! Applying a head as a version and reverting to one: the file written where the guard reads it,
//! the bytes, metrics and training-data hash kept in history, and the threshold it was tuned with
//! written into the template, so a version is the head and the line it decides at.
//!
//! Those are three writes in two places (two files and the database), and no single rename
//! covers them. So an apply first writes down everything it will change, in a journal beside the
//! templates, and only then changes anything; each step after that is idempotent. A kill before
//! the journal is on disk leaves the old state untouched; a kill after it is finished by
//! [`finish_interrupted_applies`], which every front end runs before it loads the guard, so no
//! one ever reads a new head with an old threshold or a head the version list does not name.

use std::path::{Path, PathBuf};

use aegis_guard::{head_path, Validator};
use aegis_heads::Head;
use aegis_store::{MemberRole, NewHeadVersion, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::adapter::{apply_adapter, record_live_adapter, AdapterRecord, ADAPTER_VERSION_KEY};
use crate::applied::Applied;
use crate::error::{Result, TeachError};

/// Writes `head` where the guard reads it and records it as the validator's newest version,
/// applied by `actor` (in a team, an author). A head that comes without readings keeps the live
/// head's ([`with_live_readings`]).
pub async fn apply_head(
    store: &Store,
    actor: &str,
    templates_dir: &Path,
    validator: Option<&Validator>,
    head: &Head,
    note: &str,
) -> Result<Applied> {
    store
        .require_role(actor, MemberRole::Author, "apply heads")
        .await?;
    let kept = with_live_readings(templates_dir, validator, head);
    let head = kept.as_ref().unwrap_or(head);
    let bytes = head.to_bytes()?;
    let metrics = serde_json::to_string(&head.training)
        .map_err(|e| TeachError::Invalid(format!("cannot describe the head: {e}")))?;
    let journal = Journal::plan(
        validator,
        head,
        bytes,
        VersionRecord {
            data_sha256: head.training.data_sha256.clone(),
            metrics,
            note: note.to_string(),
            applied_by: actor.to_string(),
        },
    )?;
    let mut applied = journal.carry_out(store, templates_dir).await?;
    if kept.is_some() {
        applied.kept_readings = head.readings.iter().map(|r| r.name.clone()).collect();
    }
    Ok(applied)
}

/// The live head's readings on `head`, moved to its threshold, when `head` has none of its own
/// and reads the same input. A retrain from the Teach view or `aegis train --examples` does not
/// see a reading's rows (toxic's contempt is trained on its own file), and dropping the reading
/// would silently stop catching its kind; `aegis train --reading` replaces them.
fn with_live_readings(
    templates_dir: &Path,
    validator: Option<&Validator>,
    head: &Head,
) -> Option<Head> {
    if !head.readings.is_empty() {
        return None;
    }
    let live_path = head_path(
        templates_dir,
        &head.validator,
        !head.features.encoder.is_decoder(),
    );
    let live = Head::load(&live_path).ok()?;
    let same_input = live.features == head.features
        && live.model.content_hash == head.model.content_hash
        && live.weights.len() == head.weights.len();
    if live.readings.is_empty() || !same_input {
        return None;
    }
    let threshold = head
        .training
        .threshold
        .or_else(|| validator.map(|v| f64::from(v.threshold)))?;
    let mut head = head.clone();
    head.readings = live
        .readings
        .iter()
        .map(|r| r.realigned(threshold))
        .collect();
    Some(head)
}

/// Puts stored version `id` back bit for bit and records that as the newest version, applied by
/// `actor` (in a team, an author).
pub async fn revert_head(
    store: &Store,
    actor: &str,
    templates_dir: &Path,
    validators: &[Validator],
    id: i64,
) -> Result<Applied> {
    store
        .require_role(actor, MemberRole::Author, "revert heads")
        .await?;
    let Some((version, bytes)) = store.head_version(id).await? else {
        return Err(TeachError::Invalid(format!("no head version {id}")));
    };
    if version.validator == ADAPTER_VERSION_KEY {
        let record = AdapterRecord {
            data_sha256: version.data_sha256,
            metrics: version.metrics,
            note: format!("revert to version {id}"),
            applied_by: actor.to_string(),
        };
        return apply_adapter(store, templates_dir, &bytes, &record).await;
    }
    let head = Head::from_bytes(&bytes, Path::new("the stored head"))?;
    let validator = validators.iter().find(|v| v.key == head.validator);
    let journal = Journal::plan(
        validator,
        &head,
        bytes,
        VersionRecord {
            data_sha256: version.data_sha256,
            metrics: version.metrics,
            note: format!("revert to version {id}"),
            applied_by: actor.to_string(),
        },
    )?;
    journal.carry_out(store, templates_dir).await
}

/// Finishes every apply a kill or a crash interrupted after its journal was written, so the
/// head, its template's threshold and the version list agree again, and records a live encoder
/// adapter no version names, as `actor`. Cheap when there is none.
pub async fn finish_interrupted_applies(
    store: &Store,
    actor: &str,
    templates_dir: &Path,
) -> Result<Vec<Applied>> {
    let mut finished = Vec::new();
    for path in interrupted_applies(templates_dir)? {
        let bytes = std::fs::read(&path).map_err(|source| TeachError::Read {
            path: path.clone(),
            source,
        })?;
        // The journal is written atomically, so it is whole; one that does not parse was written
        // by another version or by hand and is not ours to guess at.
        let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| {
            TeachError::Invalid(format!(
                "{} is an unfinished apply this version cannot read ({e}); move it away to go on",
                path.display()
            ))
        })?;
        tracing::warn!(validator = %journal.validator, "finishing an apply that was interrupted");
        finished.push(journal.carry_out(store, templates_dir).await?);
    }
    match record_live_adapter(store, actor, templates_dir).await {
        Ok(recorded) => finished.extend(recorded),
        // Recording is only bookkeeping: a reviewer's console must still start.
        Err(TeachError::Store(refused @ StoreError::Forbidden { .. })) => {
            tracing::warn!(%refused, "a live encoder adapter has no version; an author's console will record it");
        }
        Err(e) => return Err(e),
    }
    Ok(finished)
}

/// The journals of applies that did not finish (none, almost always).
pub fn interrupted_applies(templates_dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(templates_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TeachError::Read {
                path: templates_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut journals: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with(JOURNAL_PREFIX) && name.ends_with(".json")
        })
        .map(|entry| entry.path())
        .collect();
    journals.sort();
    Ok(journals)
}

const JOURNAL_PREFIX: &str = ".apply-";
const JOURNAL_FORMAT: u32 = 1;

/// Everything one apply changes, written before any of it is.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    format: u32,
    validator: String,
    /// The head's file, relative to the templates folder, and its exact bytes (JSON text).
    head_file: PathBuf,
    head: String,
    /// The template's file, relative, and its content with the new threshold; `None` when the
    /// threshold does not change.
    template: Option<TemplateChange>,
    version: VersionRecord,
}

#[derive(Debug, Serialize, Deserialize)]
struct TemplateChange {
    file: PathBuf,
    content: String,
    threshold: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct VersionRecord {
    data_sha256: String,
    metrics: String,
    note: String,
    /// Who applied it; journals written before teams had roles name no one.
    #[serde(default)]
    applied_by: String,
}

impl Journal {
    fn plan(
        validator: Option<&Validator>,
        head: &Head,
        head_bytes: Vec<u8>,
        version: VersionRecord,
    ) -> Result<Journal> {
        let key = &head.validator;
        // The key names files here: letters, digits and _ only, as template file stems are.
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(TeachError::Invalid(format!(
                "{key:?} is not a validator key (letters, digits and _ only)"
            )));
        }
        let head_file = head_path(Path::new(""), key, !head.features.encoder.is_decoder());
        let template = match (validator, threshold_change(validator, head)) {
            (Some(validator), Some(threshold)) => Some(TemplateChange {
                file: validator
                    .path
                    .file_name()
                    .map(PathBuf::from)
                    .ok_or_else(|| TeachError::Invalid("a template needs a file name".into()))?,
                content: validator.content_with_threshold(threshold as f32)?,
                threshold,
            }),
            _ => None,
        };
        Ok(Journal {
            format: JOURNAL_FORMAT,
            validator: key.clone(),
            head_file,
            head: String::from_utf8(head_bytes)
                .map_err(|_| TeachError::Invalid("a head file is JSON text".into()))?,
            template,
            version,
        })
    }

    fn path(templates_dir: &Path, validator: &str) -> PathBuf {
        templates_dir.join(format!("{JOURNAL_PREFIX}{validator}.json"))
    }

    /// Writes the journal, then each step, then removes it. Every step may run twice (a kill
    /// between a step and the journal's removal repeats it), so each one is idempotent.
    async fn carry_out(&self, store: &Store, templates_dir: &Path) -> Result<Applied> {
        let journal_path = Journal::path(templates_dir, &self.validator);
        if self.format != JOURNAL_FORMAT {
            return Err(TeachError::Invalid(format!(
                "{} is format {}, this version writes {JOURNAL_FORMAT}",
                journal_path.display(),
                self.format
            )));
        }
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| TeachError::Invalid(format!("cannot write the apply journal: {e}")))?;
        fault_point("planned");
        write(&journal_path, &bytes)?;
        fault_point("journal-written");

        let head_path = templates_dir.join(&self.head_file);
        // Checked again here: a journal may be read back from disk.
        Head::from_bytes(self.head.as_bytes(), &head_path)?;
        write(&head_path, self.head.as_bytes())?;
        fault_point("head-written");

        if let Some(template) = &self.template {
            write(
                &templates_dir.join(&template.file),
                template.content.as_bytes(),
            )?;
        }
        fault_point("template-written");

        // Recording the same bytes twice returns the version already recorded.
        let version = store
            .save_head_version(&NewHeadVersion {
                validator: self.validator.clone(),
                content: self.head.as_bytes().to_vec(),
                data_sha256: self.version.data_sha256.clone(),
                metrics: self.version.metrics.clone(),
                note: self.version.note.clone(),
                applied_by: self.version.applied_by.clone(),
            })
            .await?;
        fault_point("version-recorded");

        aegis_files::remove_durably(&journal_path).map_err(file_error)?;
        Ok(Applied {
            validator: self.validator.clone(),
            path: head_path,
            version,
            threshold: self.template.as_ref().map(|t| t.threshold),
            kept_readings: Vec::new(),
        })
    }
}

/// The threshold to write into the template: the head's own, when it carries one, it differs,
/// and the head reads the sentence encoder (the default). Heads on the model's hidden states
/// decide at the threshold their own file records.
fn threshold_change(validator: Option<&Validator>, head: &Head) -> Option<f64> {
    let threshold = head.training.threshold?;
    let changes = (f64::from(validator?.threshold) - threshold).abs() >= 1e-4;
    (changes && !head.features.encoder.is_decoder()).then_some(threshold)
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    aegis_files::write_atomically(path, bytes).map_err(file_error)
}

fn file_error(e: aegis_files::FileError) -> TeachError {
    TeachError::Read {
        path: e.path,
        source: e.source,
    }
}

/// The exit status of a process stopped at a fault point.
pub const FAULT_POINT_EXIT: i32 = 86;

/// Where the tests that kill an apply stop it: with the `fault-points` feature (tests only), the
/// process exits at the step `AEGIS_FAULT_POINT` names, running nothing more of ours (no
/// destructor, no database close), as `kill -9` would stop it there. `exit` rather than `abort`
/// so a test run leaves no core files.
#[cfg(feature = "fault-points")]
fn fault_point(step: &str) {
    if std::env::var("AEGIS_FAULT_POINT").is_ok_and(|named| named == step) {
        std::process::exit(FAULT_POINT_EXIT);
    }
}

#[cfg(not(feature = "fault-points"))]
fn fault_point(_step: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_journal_this_version_cannot_read_is_named_and_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("h.db")).await.expect("store");
        assert!(interrupted_applies(&dir.path().join("missing"))
            .expect("a missing folder has none")
            .is_empty());
        assert!(finish_interrupted_applies(&store, "ana", dir.path())
            .await
            .expect("nothing to finish")
            .is_empty());

        let journal = dir.path().join(".apply-toxic.json");
        std::fs::write(&journal, b"{ not a journal").expect("write");
        let error = finish_interrupted_applies(&store, "ana", dir.path())
            .await
            .expect_err("an unreadable journal stops, it is not guessed at");
        assert!(error.to_string().contains(".apply-toxic.json"), "{error}");
        assert!(journal.exists(), "left for a person to look at");
    }

    /// An encoder head on `layers` at `threshold`, with a contempt reading or none.
    fn head(layers: &str, threshold: f64, reading: bool) -> Head {
        let training = format!(
            r#"{{"data_sha256": "ab", "rows": 4, "positives": 2, "alpha": 1.0, "folds": 2,
                "cv": {{"rows": 4, "positives": 2, "roc_auc": 0.9, "precision": 1.0,
                        "recall": 1.0, "f1": 1.0}},
                "cv_by_language": {{}}, "threshold": {threshold}}}"#
        );
        let readings = if reading {
            format!(
                r#", "readings": [{{"name": "contempt", "own_threshold": 0.5,
                    "aligned_to": 0.5, "training": {training}, "weights": [1.0, 0.0],
                    "bias": 0.0}}]"#
            )
        } else {
            String::new()
        };
        let json = format!(
            r#"{{"format": 2, "validator": "toxic",
                "features": {{"encoder": "embeddinggemma", "layers": {layers},
                              "context_hash": "cd"}},
                "model": {{"id": "e", "content_hash": "ef"}},
                "training": {training}, "weights": [0.5, 0.5], "bias": -3.0{readings}}}"#
        );
        Head::from_bytes(json.as_bytes(), Path::new("test.json")).expect("a valid head")
    }

    #[tokio::test]
    async fn a_head_without_readings_keeps_the_live_heads_where_it_reads_the_same_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("h.db")).await.expect("store");
        let live = head("[]", 0.5, true);
        live.save(&head_path(dir.path(), "toxic", true))
            .expect("save");

        let applied = apply_head(
            &store,
            "ana",
            dir.path(),
            None,
            &head("[]", 0.25, false),
            "retrain",
        )
        .await
        .expect("applied");
        assert_eq!(applied.kept_readings, vec!["contempt".to_string()]);
        let written = Head::load(&applied.path).expect("load");
        let kept = &written.readings[0];
        assert_eq!(kept.aligned_to, 0.25);
        assert_eq!(kept.weights, live.readings[0].weights);
        // It fails what it failed: at its own 0.5 it now scores the head's 0.25.
        let p = written
            .probability(&[0.0, 0.0], "en", &|_| Err("no layers".into()))
            .expect("width");
        assert!((f64::from(p) - 0.25).abs() < 1e-6, "{p}");

        // On other layers the reading would read another input: it is not carried.
        let applied = apply_head(
            &store,
            "ana",
            dir.path(),
            None,
            &head("[12]", 0.25, false),
            "other",
        )
        .await
        .expect("applied");
        assert!(applied.kept_readings.is_empty());
        assert!(Head::load(&applied.path).expect("load").readings.is_empty());
    }
}
