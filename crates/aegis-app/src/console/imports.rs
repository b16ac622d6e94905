//! Files of messages: previewing their columns, importing them through the guard into history.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aegis_import::{
    check_on_worker, csv_columns, import_file, CheckFailure, ImportSummary, MessageFile,
};
use serde::Serialize;

use crate::error::ConsoleError;

use super::{lock, too_long, Console, ConsoleEvent, MAX_TEXT_BYTES};

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FilePreview {
    pub path: String,
    /// CSV header; null for TXT and JSONL.
    pub columns: Option<Vec<String>>,
    /// The column chosen when the user chooses none.
    pub suggested_column: Option<String>,
}

/// The kinds of file the window may ask the console to read: messages and labelled datasets.
const READABLE_EXTENSIONS: [&str; 5] = ["csv", "jsonl", "ndjson", "txt", "json"];

/// The file a path from the window names, when the console may read it: a regular file of a data
/// kind. The window can be made to send any path (text it renders comes from users), so it cannot
/// have a key file read into history, or hang the console on a device or a pipe.
pub(crate) fn readable_data_file(path: &Path) -> Result<PathBuf, ConsoleError> {
    let refused = |why: &str| ConsoleError::Unreadable {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !extension.is_some_and(|e| READABLE_EXTENSIONS.contains(&e.as_str())) {
        return Err(refused(&format!(
            "only {} files are read",
            READABLE_EXTENSIONS.join(", ")
        )));
    }
    let real = path.canonicalize().map_err(|e| refused(&e.to_string()))?;
    let metadata = std::fs::metadata(&real).map_err(|e| refused(&e.to_string()))?;
    if !metadata.is_file() {
        return Err(refused("it is not a regular file"));
    }
    Ok(real)
}

impl Console {
    pub fn preview_file(&self, path: &Path) -> Result<FilePreview, ConsoleError> {
        let path = &readable_data_file(path)?;
        let columns = csv_columns(path)?;
        let suggested_column = columns.as_ref().and_then(|c| {
            ["text", "question", "message"]
                .iter()
                .find(|want| c.iter().any(|h| h.eq_ignore_ascii_case(want)))
                .and_then(|want| c.iter().find(|h| h.eq_ignore_ascii_case(want)).cloned())
                .or_else(|| c.first().cloned())
        });
        Ok(FilePreview {
            path: path.display().to_string(),
            columns,
            suggested_column,
        })
    }

    /// Imports a file under `import_id`; progress goes out as events, and `cancel` with
    /// the same id stops it between rows. The same file again resumes where it stopped.
    pub async fn import(
        &self,
        import_id: String,
        path: &Path,
        column: Option<String>,
    ) -> Result<ImportSummary, ConsoleError> {
        let file = MessageFile::read(&readable_data_file(path)?, column.as_deref())?;
        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.running).insert(import_id.clone(), cancel.clone());
        let worker = self.worker()?;
        let events = self.events.clone();
        let result = import_file(
            &self.store,
            &file,
            None,
            |input| {
                let worker = worker.clone();
                async move {
                    if input.text().len() > MAX_TEXT_BYTES {
                        return Err(CheckFailure::BadRow(too_long(input.text().len())));
                    }
                    check_on_worker(&worker, input).await
                }
            },
            |progress| {
                events.emit(ConsoleEvent::Import {
                    import_id: import_id.clone(),
                    progress: progress.clone(),
                })
            },
            &cancel,
        )
        .await;
        lock(&self.running).remove(&import_id);
        Ok(result?)
    }

    /// Stops the import or evaluation running under `id` between messages.
    pub fn cancel(&self, run_id: &str) -> bool {
        match lock(&self.running).get(run_id) {
            Some(flag) => {
                flag.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::readable_data_file;

    #[test]
    fn only_regular_data_files_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("messages.CSV");
        std::fs::write(&data, "text\nhalo\n").expect("write");
        assert_eq!(
            readable_data_file(&data).expect("readable"),
            data.canonicalize().expect("real")
        );
        let key = dir.path().join("id_ed25519");
        std::fs::write(&key, "secret").expect("write");
        assert!(readable_data_file(&key).is_err());
        let folder = dir.path().join("looks.jsonl");
        std::fs::create_dir(&folder).expect("mkdir");
        assert!(readable_data_file(&folder).is_err());
        assert!(readable_data_file(std::path::Path::new("/dev/zero")).is_err());
        assert!(readable_data_file(&dir.path().join("missing.txt")).is_err());
    }
}
