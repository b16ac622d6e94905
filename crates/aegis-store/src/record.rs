//! Recording a verdict: message, verdict, results, template versions and import progress in one
//! transaction, so a crash leaves either all of it or none.

use std::collections::BTreeMap;

use aegis_guard::Verdict;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::sql::Sql;
use crate::time::now_millis;

/// Where a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Source {
    /// Typed into the desktop console.
    Typed,
    Import,
    Http,
    Cli,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Typed => "typed",
            Self::Import => "import",
            Self::Http => "http",
            Self::Cli => "cli",
        }
    }
}

impl std::str::FromStr for Source {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "typed" => Ok(Self::Typed),
            "import" => Ok(Self::Import),
            "http" => Ok(Self::Http),
            "cli" => Ok(Self::Cli),
            other => Err(StoreError::Invalid(format!(
                "unknown source {other:?}: use typed, import, http or cli"
            ))),
        }
    }
}

/// A template file as a verdict used it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateContent {
    pub key: String,
    pub content_hash: String,
    pub content: String,
}

impl From<&aegis_guard::Validator> for TemplateContent {
    fn from(v: &aegis_guard::Validator) -> Self {
        Self {
            key: v.key.clone(),
            content_hash: v.content_hash.clone(),
            content: v.content.clone(),
        }
    }
}

/// The row of an import a verdict belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportRow {
    pub batch_id: i64,
    pub row: i64,
}

#[derive(Debug, Clone)]
pub struct NewVerdict<'a> {
    pub text: &'a str,
    pub source: Source,
    pub user_id: Option<&'a str>,
    pub import: Option<ImportRow>,
    pub verdict: &'a Verdict,
    /// The templates of the guard that produced the verdict (at least those it names).
    pub templates: &'a [TemplateContent],
}

impl Store {
    /// Keeps a template's text once per (key, hash), shared by verdicts, saves and evaluation runs.
    pub(crate) async fn keep_template_version(
        &self,
        tx: &mut sqlx::AnyConnection,
        key: &str,
        content_hash: &str,
        content: &str,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO template_versions (validator_key, content_hash, content, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(key)
        .bind(content_hash)
        .bind(content)
        .bind(now)
        .execute(tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records one verdict; returns its id.
    pub async fn record(&self, new: &NewVerdict<'_>) -> Result<i64> {
        Ok(self.record_many(std::slice::from_ref(new)).await?[0])
    }

    /// Records verdicts in one transaction, all or none; returns their ids in order. An import
    /// records what its checker returned at once this way: each commit waits for the disk (on
    /// PostgreSQL, a round trip to the server too), and a transaction per verdict is what made
    /// importing into PostgreSQL slow.
    pub async fn record_many(&self, verdicts: &[NewVerdict<'_>]) -> Result<Vec<i64>> {
        let now = now_millis();
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let unknown: Vec<&TemplateContent> = {
            let known = self
                .known_templates
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut unknown: Vec<&TemplateContent> = Vec::new();
            for t in verdicts.iter().flat_map(|v| v.templates.iter()) {
                let pair = (t.key.clone(), t.content_hash.clone());
                if !known.contains(&pair)
                    && !unknown
                        .iter()
                        .any(|u| u.key == t.key && u.content_hash == t.content_hash)
                {
                    unknown.push(t);
                }
            }
            unknown
        };
        for t in &unknown {
            self.keep_template_version(&mut tx, &t.key, &t.content_hash, &t.content, now)
                .await?;
        }
        // A verdict's message and row are a statement each (each needs the id the one before
        // it made); its results and readings, and the import's progress, are written for the
        // whole group at once: each statement is a round trip to a PostgreSQL server.
        let mut ids = Vec::with_capacity(verdicts.len());
        let mut rows = ResultRows::new();
        let mut progress: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for new in verdicts {
            let verdict_id = self.insert_verdict(&mut tx, new, now).await?;
            rows.push(verdict_id, new.verdict)?;
            if rows.is_full() {
                self.write_result_rows(
                    &mut tx,
                    std::mem::replace(&mut rows, ResultRows::new()),
                    verdicts,
                )
                .await?;
            }
            if let Some(import) = new.import {
                let (count, last) = progress.entry(import.batch_id).or_insert((0, 0));
                *count += 1;
                *last = (*last).max(import.row);
            }
            ids.push(verdict_id);
        }
        self.write_result_rows(&mut tx, rows, verdicts).await?;
        for (batch_id, (count, last_row)) in progress {
            self.advance_import(&mut tx, batch_id, count, last_row, now)
                .await?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        let mut known = self
            .known_templates
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for t in unknown {
            known.insert((t.key.clone(), t.content_hash.clone()));
        }
        Ok(ids)
    }

    /// A verdict's message and verdict rows, inside the caller's transaction; its id.
    async fn insert_verdict(
        &self,
        tx: &mut sqlx::AnyConnection,
        new: &NewVerdict<'_>,
        now: i64,
    ) -> Result<i64> {
        let message_id: i64 = sqlx::query_scalar(
            "INSERT INTO messages (text, source, user_id, import_batch_id, import_row, role, turn_index, context, context_cut, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        )
        .bind(new.text)
        .bind(new.source.as_str())
        .bind(new.user_id)
        .bind(new.import.map(|i| i.batch_id))
        .bind(new.import.map(|i| i.row))
        .bind(new.verdict.turn.role.as_str())
        .bind(new.verdict.turn.index as i64)
        .bind(
            serde_json::to_string(&new.verdict.turn.context)
                .map_err(|e| StoreError::Invalid(format!("the context cannot be kept: {e}")))?,
        )
        .bind(new.verdict.turn.context_cut as i64)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let v = new.verdict;
        // The review queue's order: how close the closest call came to its threshold.
        let uncertainty = v
            .results
            .iter()
            .map(|r| (f64::from(r.score) - as_written(r.threshold)).abs())
            .fold(1.0, f64::min);
        let verdict_id: i64 = sqlx::query_scalar(
            "INSERT INTO verdicts (message_id, status, case_label, rejection_message, language, model_id, model_hash, encoder_id, encoder_hash, latency_ms, created_at, uncertainty) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
        )
        .bind(message_id)
        .bind(v.status.as_str())
        .bind(&v.case)
        .bind(&v.rejection_message)
        .bind(v.language.code())
        .bind(&v.model.id)
        .bind(&v.model.content_hash)
        .bind(v.encoder.as_ref().map(|e| e.id.as_str()))
        .bind(v.encoder.as_ref().map(|e| e.content_hash.as_str()))
        .bind(v.latency_ms)
        .bind(now)
        .bind(uncertainty)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(verdict_id)
    }

    /// Writes the gathered results and readings.
    async fn write_result_rows(
        &self,
        tx: &mut sqlx::AnyConnection,
        rows: ResultRows,
        verdicts: &[NewVerdict<'_>],
    ) -> Result<()> {
        if rows.results.rows() > 0 {
            let (text, args) = rows.results.into_parts().map_err(|e| self.sql(e))?;
            sqlx::query_with(&text, args)
                .execute(&mut *tx)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(db)
                        if db.kind() == sqlx::error::ErrorKind::NotNullViolation =>
                    {
                        let mut given: Vec<String> = verdicts
                            .iter()
                            .flat_map(|v| v.verdict.templates.iter())
                            .map(|t| format!("{} {}", t.key, t.content_hash))
                            .collect();
                        given.sort();
                        given.dedup();
                        StoreError::Invalid(format!(
                            "a template of this verdict ({}) was not given to record",
                            given.join(", ")
                        ))
                    }
                    _ => self.sql(e),
                })?;
        }
        if rows.readings.rows() > 0 {
            let (text, args) = rows.readings.into_parts().map_err(|e| self.sql(e))?;
            sqlx::query_with(&text, args)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        }
        Ok(())
    }
}

/// Results and readings of verdicts being recorded, as two multi-row inserts.
struct ResultRows {
    results: Sql,
    readings: Sql,
}

impl ResultRows {
    /// Rows a statement takes at most: 2,000 results of 13 values, or readings of 7, stay under
    /// SQLite's 32,766 bound values.
    const MOST_ROWS: usize = 2_000;

    fn new() -> Self {
        Self {
            results: Sql::new(
                "INSERT INTO validator_results (verdict_id, validator_key, position, score, prompt_score, learned_score, decided_by, threshold, passed, latency_ms, head_hash, template_version_id) VALUES ",
            ),
            readings: Sql::new(
                "INSERT INTO validator_readings (verdict_id, validator_key, position, reading, score, decided, turned) VALUES ",
            ),
        }
    }

    fn is_full(&self) -> bool {
        self.results.rows() >= Self::MOST_ROWS || self.readings.rows() >= Self::MOST_ROWS
    }

    fn push(&mut self, verdict_id: i64, v: &Verdict) -> Result<()> {
        for (position, r) in v.results.iter().enumerate() {
            let template_hash = v
                .templates
                .iter()
                .find(|t| t.key == r.key)
                .map(|t| t.content_hash.clone())
                .ok_or_else(|| {
                    StoreError::Invalid(format!("the verdict names no template for {}", r.key))
                })?;
            self.results
                .begin_row()
                .value(verdict_id)
                .value(r.key.clone())
                .value(position as i64)
                .value(f64::from(r.score))
                .value(r.prompt_score.map(f64::from))
                .value(r.learned_score.map(f64::from))
                .value(r.decided_by.as_str())
                .value(as_written(r.threshold))
                .value(i64::from(r.passed))
                .value(r.latency_ms)
                .value(r.head_hash.clone())
                .push(", (SELECT id FROM template_versions WHERE validator_key = ")
                .push_bind(r.key.clone())
                .push(" AND content_hash = ")
                .push_bind(template_hash)
                .push(")")
                .end_row();
            for (position, reading) in r.readings.iter().enumerate() {
                self.readings
                    .begin_row()
                    .value(verdict_id)
                    .value(r.key.clone())
                    .value(position as i64)
                    .value(reading.reading.clone())
                    .value(f64::from(reading.score))
                    .value(i64::from(reading.decided))
                    .value(i64::from(reading.turned))
                    .end_row();
            }
        }
        Ok(())
    }
}

/// The f64 whose shortest decimal is the f32's: a template's `threshold: 0.392` is stored and
/// shown as 0.392, not as the widened 0.3919999897480011.
fn as_written(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[cfg(test)]
mod tests {
    #[test]
    fn thresholds_are_stored_as_the_decimal_written() {
        assert_eq!(super::as_written(0.392), 0.392);
        assert_eq!(super::as_written(0.5), 0.5);
        assert_eq!(super::as_written(0.166).to_string(), "0.166");
    }
}
