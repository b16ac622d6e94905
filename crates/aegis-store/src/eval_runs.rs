//! Evaluation runs: what was evaluated, the headline metrics, and every row's scores.

use aegis_eval::{
    DatasetInfo, EvalReport, ModelInfo, RunInfo, RunTemplate, Sample, ScoredRow, ValidatorSummary,
};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::time::now_millis;

/// A run in the list: enough to follow metrics across template versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EvalRunSummary {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    pub info: RunInfo,
    pub rows: usize,
    pub metrics: Vec<ValidatorSummary>,
}

/// A stored run with its scores: `EvalReport::build` turns it into a report at any threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvalRun {
    pub id: i64,
    pub created_at: i64,
    pub info: RunInfo,
    pub rows: Vec<ScoredRow>,
}

type RunRow = (
    i64,
    i64,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    String,
    String,
    String,
    String,
);

#[derive(sqlx::FromRow)]
struct StoredRow {
    row_number: i64,
    external_id: Option<String>,
    text: String,
    lang: String,
    labels: String,
    scores: String,
    error: Option<String>,
}

const RUN_COLUMNS: &str = "id, created_at, dataset_name, dataset_sha256, file_rows, sample_limit, sample_seed, model_id, model_hash, templates_from, summary";

impl Store {
    /// Keeps a run: its description, the templates' text (once per version, shared with verdict
    /// history), the headline metrics and every row's scores, in one transaction.
    pub async fn save_eval_run(&self, report: &EvalReport, rows: &[ScoredRow]) -> Result<i64> {
        let invalid = |e: serde_json::Error| StoreError::Invalid(e.to_string());
        let info = &report.info;
        let summary = serde_json::to_string(&report.summary()).map_err(invalid)?;
        let now = now_millis();
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let run_id: i64 = sqlx::query_scalar(
            "INSERT INTO eval_runs (created_at, dataset_name, dataset_sha256, file_rows, sample_limit, sample_seed, model_id, model_hash, templates_from, summary) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        )
        .bind(now)
        .bind(&info.dataset.name)
        .bind(&info.dataset.sha256)
        .bind(info.dataset.file_rows as i64)
        .bind(info.dataset.sample.limit.map(|l| l as i64))
        // A u64 seed may not fit SQLite's signed integer; text keeps every bit.
        .bind(info.dataset.sample.seed.map(|s| s.to_string()))
        .bind(&info.model.id)
        .bind(&info.model.content_hash)
        .bind(&info.templates_from)
        .bind(summary)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        for (position, t) in info.templates.iter().enumerate() {
            self.keep_template_version(&mut tx, &t.key, &t.content_hash, &t.content, now)
                .await?;
            sqlx::query(
                "INSERT INTO eval_run_templates (run_id, position, validator_key, name, template_version_id, threshold, scored_by)
                 VALUES ($1, $2, $3, $4, (SELECT id FROM template_versions WHERE validator_key = $5 AND content_hash = $6), $7, $8)",
            )
            .bind(run_id)
            .bind(position as i64)
            .bind(&t.key)
            .bind(&t.name)
            .bind(&t.key)
            .bind(&t.content_hash)
            .bind(t.threshold)
            .bind(&t.scored_by)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        }
        for row in rows {
            sqlx::query(
                "INSERT INTO eval_rows (run_id, row_number, external_id, text, lang, labels, scores, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(run_id)
            .bind(row.row as i64)
            .bind(&row.id)
            .bind(&row.text)
            .bind(&row.lang)
            .bind(serde_json::to_string(&row.labels).map_err(invalid)?)
            .bind(serde_json::to_string(&row.scores).map_err(invalid)?)
            .bind(&row.error)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(run_id)
    }

    /// Runs, newest first.
    pub async fn eval_runs(&self, limit: u32) -> Result<Vec<EvalRunSummary>> {
        let runs: Vec<RunRow> = sqlx::query_as(&format!(
            "SELECT {RUN_COLUMNS} FROM eval_runs ORDER BY created_at DESC, id DESC LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(runs.len());
        for run in runs {
            let (id, created_at, summary) = (run.0, run.1, run.10.clone());
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM eval_rows WHERE run_id = $1")
                .bind(id)
                .fetch_one(&self.reader)
                .await
                .map_err(|e| self.sql(e))?;
            out.push(EvalRunSummary {
                id,
                created_at,
                info: self.run_info(run).await?,
                rows: rows as usize,
                metrics: serde_json::from_str(&summary).map_err(|e| {
                    StoreError::Invalid(format!("evaluation run {id} has unreadable metrics: {e}"))
                })?,
            });
        }
        Ok(out)
    }

    /// A run with every row's scores; `None` when there is no such run.
    pub async fn eval_run(&self, id: i64) -> Result<Option<StoredEvalRun>> {
        let run: Option<RunRow> = sqlx::query_as(&format!(
            "SELECT {RUN_COLUMNS} FROM eval_runs WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        let Some(run) = run else {
            return Ok(None);
        };
        let created_at = run.1;
        let info = self.run_info(run).await?;
        let stored: Vec<StoredRow> = sqlx::query_as(
            "SELECT row_number, external_id, text, lang, labels, scores, error FROM eval_rows WHERE run_id = $1 ORDER BY row_number",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        let unreadable = |row: i64, e: serde_json::Error| {
            StoreError::Invalid(format!("evaluation run {id}, row {row} is unreadable: {e}"))
        };
        let rows = stored
            .into_iter()
            .map(|r| {
                Ok(ScoredRow {
                    row: r.row_number as usize,
                    id: r.external_id,
                    text: r.text,
                    lang: r.lang,
                    labels: serde_json::from_str(&r.labels)
                        .map_err(|e| unreadable(r.row_number, e))?,
                    scores: serde_json::from_str(&r.scores)
                        .map_err(|e| unreadable(r.row_number, e))?,
                    error: r.error,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(StoredEvalRun {
            id,
            created_at,
            info,
            rows,
        }))
    }

    pub async fn delete_eval_run(&self, id: i64) -> Result<bool> {
        let done = sqlx::query("DELETE FROM eval_runs WHERE id = $1")
            .bind(id)
            .execute(&self.writer)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(done.rows_affected() > 0)
    }

    async fn run_info(&self, run: RunRow) -> Result<RunInfo> {
        let (id, _, name, sha256, file_rows, limit, seed, model_id, model_hash, from, _) = run;
        let templates: Vec<(String, String, String, String, f64, String)> = sqlx::query_as(
            "SELECT t.validator_key, t.name, v.content_hash, v.content, t.threshold, t.scored_by
             FROM eval_run_templates t JOIN template_versions v ON v.id = t.template_version_id
             WHERE t.run_id = $1 ORDER BY t.position",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(RunInfo {
            dataset: DatasetInfo {
                name,
                sha256,
                file_rows: file_rows as usize,
                sample: Sample {
                    limit: limit.map(|l| l as usize),
                    seed: seed.and_then(|s| s.parse().ok()),
                },
            },
            model: ModelInfo {
                id: model_id,
                content_hash: model_hash,
            },
            templates_from: from,
            templates: templates
                .into_iter()
                .map(
                    |(key, name, content_hash, content, threshold, scored_by)| RunTemplate {
                        key,
                        name,
                        content_hash,
                        threshold,
                        scored_by,
                        content,
                    },
                )
                .collect(),
        })
    }
}
