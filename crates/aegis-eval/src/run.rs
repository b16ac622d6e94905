//! Running the guard over a dataset.

use std::sync::atomic::{AtomicBool, Ordering};

use aegis_guard::{Guard, ScoreSource};

use crate::dataset::Dataset;
use crate::report::{DatasetInfo, ModelInfo, RunInfo, RunTemplate, ScoredRow};

/// Messages per model call: enough for the batched fast path to share work, few enough that
/// progress moves and a cancel is heard within a few seconds on a CPU.
pub const BATCH: usize = 8;

/// What was evaluated, before any row is scored.
pub fn run_info(guard: &Guard, dataset: &Dataset, templates_from: &str) -> RunInfo {
    let model = guard.model().info();
    RunInfo {
        dataset: DatasetInfo {
            name: dataset.name(),
            sha256: dataset.sha256.clone(),
            file_rows: dataset.file_rows,
            sample: dataset.sample,
        },
        model: ModelInfo {
            id: model.id.clone(),
            content_hash: model.content_hash.clone(),
        },
        templates_from: templates_from.to_string(),
        templates: guard
            .validators()
            .iter()
            .zip(guard.heads())
            .map(|(v, head)| RunTemplate {
                key: v.key.clone(),
                name: v.name.clone(),
                content_hash: v.content_hash.clone(),
                threshold: f64::from(v.threshold),
                scored_by: ScoreSource::deciding(head.is_some()).as_str().to_string(),
                content: v.content.clone(),
            })
            .collect(),
    }
}

/// Scores every row with every validator. A message the guard refuses (too long, say) becomes a
/// row with its error, not a failed run. `progress(done, total)` follows each batch; once
/// `cancel` is set the rows scored so far are returned (`None` when cancelled).
pub fn score_rows(
    guard: &Guard,
    dataset: &Dataset,
    progress: &mut dyn FnMut(usize, usize),
    cancel: Option<&AtomicBool>,
) -> Option<Vec<ScoredRow>> {
    let total = dataset.rows.len();
    let mut scored = Vec::with_capacity(total);
    progress(0, total);
    for batch in dataset.rows.chunks(BATCH) {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return None;
        }
        let texts: Vec<&str> = batch.iter().map(|r| r.message.text.as_str()).collect();
        for (row, verdict) in batch.iter().zip(guard.check_batch(&texts)) {
            scored.push(ScoredRow::new(
                row,
                verdict.as_ref().map_err(|e| e.to_string()),
            ));
        }
        progress(scored.len(), total);
    }
    Some(scored)
}
