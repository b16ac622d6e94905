//! The Eval screen's work: a labelled dataset through the running guard, kept as a run; stored
//! runs re-measured and compared; a chosen threshold written into a template.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aegis_eval::{compare, run_info, Comparison, Dataset, EvalReport, Sample, ScoredRow};
use aegis_runtime::{LoadedGuard, WorkerError};
use aegis_store::{EvalRunSummary, TemplateSave};
use futures_util::{stream, StreamExt};
use serde::Serialize;

use crate::console::{lock, Console, ConsoleEvent};
use crate::error::ConsoleError;

/// A run as the screen shows it: the report at the requested thresholds, plus every labelled
/// score per validator so the threshold slider recomputes precision and recall in the window
/// without a round trip.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EvalView {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub run_id: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    pub report: EvalReport,
    pub points: Vec<ValidatorPoints>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorPoints {
    pub key: String,
    pub scores: Vec<f64>,
    pub labels: Vec<bool>,
    pub langs: Vec<String>,
}

/// Messages in flight at once: enough for the worker to batch them, few enough that typed checks
/// and HTTP clients sharing the queue are not starved.
const IN_FLIGHT: usize = 8;

impl Console {
    /// Scores every row of `path` with the guard as it is now (an edit saved mid-run does not mix
    /// into it), stores the run and returns it. Progress goes out as `Eval` events; `cancel` with
    /// the same id stops it and keeps nothing.
    pub async fn evaluate(
        &self,
        eval_id: String,
        path: &Path,
        limit: Option<usize>,
        seed: Option<u64>,
    ) -> Result<EvalView, ConsoleError> {
        if seed.is_some() && limit.is_none() {
            return Err(ConsoleError::Invalid(
                "a seed draws a sample of a limited number of rows; set a limit too".into(),
            ));
        }
        let owned = crate::console::readable_data_file(path)?;
        let dataset = tokio::task::spawn_blocking(move || Dataset::load(&owned))
            .await
            .map_err(|e| ConsoleError::Invalid(e.to_string()))??
            .sampled(Sample { limit, seed });
        let worker = self.worker()?;
        let loaded: LoadedGuard = worker.loaded().ok_or(WorkerError::Loading)?;
        let info = run_info(
            &loaded.guard,
            &dataset,
            &self.prompts_dir()?.display().to_string(),
        );
        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.running).insert(eval_id.clone(), cancel.clone());
        let scored = self
            .score_dataset(&eval_id, &dataset, &loaded, &cancel)
            .await;
        lock(&self.running).remove(&eval_id);
        let rows = scored?;
        let report = EvalReport::build(&info, &rows, &BTreeMap::new());
        let run_id = self.store().save_eval_run(&report, &rows).await?;
        self.eval_view(run_id, &BTreeMap::new()).await
    }

    async fn score_dataset(
        &self,
        eval_id: &str,
        dataset: &Dataset,
        loaded: &LoadedGuard,
        cancel: &AtomicBool,
    ) -> Result<Vec<ScoredRow>, ConsoleError> {
        let worker = self.worker()?;
        let total = dataset.rows.len();
        let mut rows = Vec::with_capacity(total);
        let progress = |done| {
            self.events.emit(ConsoleEvent::Eval {
                eval_id: eval_id.to_string(),
                done,
                total,
            })
        };
        progress(0);
        // In row order, IN_FLIGHT at a time; others share the queue, so each waits its turn
        // rather than failing the run. The stream owns its texts: a borrowing one makes the
        // command's future not provably Send (rust-lang/rust#102211).
        let texts: Vec<String> = dataset
            .rows
            .iter()
            .map(|r| r.message.text.clone())
            .collect();
        let mut answers = stream::iter(texts)
            .map(|text| worker.check_waiting(text, Some(loaded.clone())))
            .buffered(IN_FLIGHT);
        for row in &dataset.rows {
            let Some(answer) = answers.next().await else {
                break;
            };
            if cancel.load(Ordering::Relaxed) {
                return Err(ConsoleError::Invalid("the evaluation was cancelled".into()));
            }
            let verdict = match answer {
                Ok(checked) => Ok(checked.verdict),
                // The message's own problem (too long, say) is that row's result.
                Err(WorkerError::Guard(e)) => Err(e.to_string()),
                Err(e) => return Err(e.into()),
            };
            rows.push(ScoredRow::new(row, verdict.as_ref().map_err(Clone::clone)));
            progress(rows.len());
        }
        Ok(rows)
    }

    pub async fn eval_runs(&self) -> Result<Vec<EvalRunSummary>, ConsoleError> {
        Ok(self.store().eval_runs(200).await?)
    }

    /// A stored run at `thresholds` (validators left out keep the run's own); no model call.
    pub async fn eval_view(
        &self,
        run_id: i64,
        thresholds: &BTreeMap<String, f64>,
    ) -> Result<EvalView, ConsoleError> {
        let run = self
            .store()
            .eval_run(run_id)
            .await?
            .ok_or_else(|| ConsoleError::Invalid(format!("no evaluation run {run_id}")))?;
        let report = EvalReport::build(&run.info, &run.rows, thresholds);
        let points = run
            .info
            .templates
            .iter()
            .map(|t| {
                let mut p = ValidatorPoints {
                    key: t.key.clone(),
                    scores: Vec::new(),
                    labels: Vec::new(),
                    langs: Vec::new(),
                };
                for row in &run.rows {
                    if let (Some(&score), Some(Some(label))) =
                        (row.scores.get(&t.key), row.labels.get(&t.key))
                    {
                        p.scores.push(score);
                        p.labels.push(*label);
                        p.langs.push(row.lang.clone());
                    }
                }
                p
            })
            .collect();
        Ok(EvalView {
            run_id,
            created_at: run.created_at,
            report,
            points,
        })
    }

    /// The messages whose verdict differs between two stored runs of the same data.
    pub async fn compare_runs(
        &self,
        baseline: i64,
        candidate: i64,
    ) -> Result<Comparison, ConsoleError> {
        let load = |id: i64| async move {
            self.store()
                .eval_run(id)
                .await?
                .ok_or_else(|| ConsoleError::Invalid(format!("no evaluation run {id}")))
        };
        let (a, b) = (load(baseline).await?, load(candidate).await?);
        let report_a = EvalReport::build(&a.info, &a.rows, &BTreeMap::new());
        let report_b = EvalReport::build(&b.info, &b.rows, &BTreeMap::new());
        compare((&report_a, &a.rows), (&report_b, &b.rows))
            .map_err(|e| ConsoleError::Invalid(e.to_string()))
    }

    pub async fn delete_eval_run(&self, run_id: i64) -> Result<bool, ConsoleError> {
        Ok(self.store().delete_eval_run(run_id).await?)
    }

    /// Writes `threshold` into the template's front matter as a new saved version; the guard
    /// reloads, and the prompt (and any head bound to it) stays as it was.
    pub async fn apply_threshold(
        &self,
        key: &str,
        threshold: f64,
    ) -> Result<TemplateSave, ConsoleError> {
        let path = crate::templates::template_path(&self.prompts_dir()?, key)?;
        let content = std::fs::read_to_string(&path).map_err(|source| ConsoleError::Io {
            path: path.clone(),
            source,
        })?;
        let validator = aegis_guard::Validator::parse(&path, &content)?;
        let edited = validator.content_with_threshold(threshold as f32)?;
        self.save_template(key, &edited).await
    }
}
