//! Files of messages: previewing their columns, importing them through the guard into history.

use std::path::Path;
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

impl Console {
    pub fn preview_file(&self, path: &Path) -> Result<FilePreview, ConsoleError> {
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
        let file = MessageFile::read(path, column.as_deref())?;
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
