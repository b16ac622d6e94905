//! Reading history: filtered pages, one verdict in full, daily counts; deleting and retention.

use std::collections::HashMap;

use aegis_guard::{ReadingScore, Role, Turn};
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::error::{Result, StoreError};
use crate::filter::HistoryFilter;
use crate::open::Store;
use crate::reviews::Review;
use crate::sql::{utc_day, Sql};
use crate::team::MemberRole;
use crate::time::now_millis;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StoredResult {
    pub key: String,
    pub score: f64,
    pub prompt_score: Option<f64>,
    pub learned_score: Option<f64>,
    pub decided_by: String,
    pub threshold: f64,
    pub passed: bool,
    pub latency_ms: f64,
    pub template_hash: String,
    /// sha256 of the head file that decided it (`aegis heads versions`), when a head did.
    pub head_hash: Option<String>,
    /// Each reading the head made of the turn, which decided and which turned the decision, in
    /// the order the guard made them (see `aegis_guard::ReadingScore`).
    pub readings: Vec<ReadingScore>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct HistoryRow {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub verdict_id: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub message_id: i64,
    /// Unix milliseconds.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    pub text: String,
    pub source: String,
    pub user_id: Option<String>,
    pub status: String,
    pub case: String,
    pub rejection_message: String,
    pub language: String,
    pub model_id: String,
    pub model_hash: String,
    /// The sentence encoder the heads read: its id and weights' hash, or the served model and
    /// the server's URL; absent when none was loaded.
    pub encoder_id: Option<String>,
    pub encoder_hash: Option<String>,
    pub latency_ms: f64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub review_count: i64,
    /// Who wrote the checked text, and where it stood in its conversation (0 for a lone message).
    pub role: Role,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub turn_index: i64,
    /// The earlier turns the guard read with it, oldest first.
    pub context: Vec<Turn>,
    /// Older turns cut to fit the context budget.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub context_cut: i64,
    pub results: Vec<StoredResult>,
}

/// Position in the newest-first order; the next page starts after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Cursor {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub verdict_id: i64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.created_at, self.verdict_id)
    }
}

impl std::str::FromStr for Cursor {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        s.split_once('.')
            .and_then(|(t, id)| {
                Some(Self {
                    created_at: t.parse().ok()?,
                    verdict_id: id.parse().ok()?,
                })
            })
            .ok_or_else(|| StoreError::Invalid(format!("{s:?} is not a history cursor")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct HistoryPage {
    pub rows: Vec<HistoryRow>,
    /// Present when more rows may follow.
    pub next: Option<Cursor>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TemplateRecord {
    pub key: String,
    pub content_hash: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VerdictDetail {
    #[serde(flatten)]
    pub row: HistoryRow,
    /// The exact template text each validator used.
    pub templates: Vec<TemplateRecord>,
    pub reviews: Vec<Review>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DailyCount {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub validator: String,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub checked: i64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub failed: i64,
}

const ROW_COLUMNS: &str = "v.id, m.id, v.created_at, m.text, m.source, m.user_id, v.status, v.case_label, v.rejection_message, v.language, v.model_id, v.model_hash, v.latency_ms, (SELECT count(*) FROM reviews rv WHERE rv.verdict_id = v.id), m.role, m.turn_index, m.context, m.context_cut, v.encoder_id, v.encoder_hash";

impl Store {
    /// Newest first, `limit` rows after `after`.
    pub async fn list(
        &self,
        filter: &HistoryFilter,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<HistoryPage> {
        let limit = limit.clamp(1, 10_000);
        let mut q = Sql::new(format!(
            "SELECT {ROW_COLUMNS} FROM verdicts v JOIN messages m ON m.id = v.message_id WHERE TRUE"
        ));
        filter.push_conditions(&mut q, self.engine());
        if let Some(c) = after {
            q.push(" AND (v.created_at, v.id) < (")
                .push_bind(c.created_at)
                .push(", ")
                .push_bind(c.verdict_id)
                .push(")");
        }
        q.push(" ORDER BY v.created_at DESC, v.id DESC LIMIT ")
            .push_bind(i64::from(limit));
        let rows = self.rows_with_results(q).await?;
        let next = (rows.len() == limit as usize)
            .then(|| rows.last())
            .flatten()
            .map(|r| Cursor {
                created_at: r.created_at,
                verdict_id: r.verdict_id,
            });
        Ok(HistoryPage { rows, next })
    }

    /// How many verdicts match.
    pub async fn count(&self, filter: &HistoryFilter) -> Result<i64> {
        let mut q = Sql::new(
            "SELECT count(*) FROM verdicts v JOIN messages m ON m.id = v.message_id WHERE TRUE",
        );
        filter.push_conditions(&mut q, self.engine());
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        sqlx::query_scalar_with(&text, args)
            .fetch_one(&self.reader)
            .await
            .map_err(|e| self.sql(e))
    }

    async fn attach_results(&self, rows: &mut [HistoryRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut q = Sql::new(
            "SELECT r.verdict_id, r.validator_key, r.score, r.prompt_score, r.learned_score, r.decided_by, r.threshold, r.passed, r.latency_ms, t.content_hash, r.head_hash
             FROM validator_results r JOIN template_versions t ON t.id = r.template_version_id WHERE r.verdict_id IN (",
        );
        close_verdict_ids(&mut q, rows);
        q.push(" ORDER BY r.verdict_id, r.position");
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let raw = sqlx::query_with(&text, args)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        let mut by_verdict: HashMap<i64, Vec<StoredResult>> = HashMap::new();
        for r in &raw {
            let result = (|| -> std::result::Result<StoredResult, sqlx::Error> {
                Ok(StoredResult {
                    key: r.try_get(1)?,
                    score: r.try_get(2)?,
                    prompt_score: r.try_get(3)?,
                    learned_score: r.try_get(4)?,
                    decided_by: r.try_get(5)?,
                    threshold: r.try_get(6)?,
                    passed: r.try_get::<i64, _>(7)? != 0,
                    latency_ms: r.try_get(8)?,
                    template_hash: r.try_get(9)?,
                    head_hash: r.try_get(10)?,
                    readings: Vec::new(),
                })
            })()
            .map_err(|e| self.sql(e))?;
            let verdict: i64 = r.try_get(0).map_err(|e| self.sql(e))?;
            by_verdict.entry(verdict).or_default().push(result);
        }
        let mut readings = self.readings_of(rows).await?;
        for row in rows {
            row.results = by_verdict.remove(&row.verdict_id).unwrap_or_default();
            for result in &mut row.results {
                result.readings = readings
                    .remove(&(row.verdict_id, result.key.clone()))
                    .unwrap_or_default();
            }
        }
        Ok(())
    }

    /// The readings of each result of `rows`' verdicts, by verdict and validator, in order.
    async fn readings_of(
        &self,
        rows: &[HistoryRow],
    ) -> Result<HashMap<(i64, String), Vec<ReadingScore>>> {
        let mut q = Sql::new(
            "SELECT verdict_id, validator_key, reading, score, decided, turned FROM validator_readings WHERE verdict_id IN (",
        );
        close_verdict_ids(&mut q, rows);
        q.push(" ORDER BY verdict_id, validator_key, position");
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let raw = sqlx::query_with(&text, args)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        let mut readings: HashMap<(i64, String), Vec<ReadingScore>> = HashMap::new();
        for r in &raw {
            let (key, reading) = (|| -> std::result::Result<_, sqlx::Error> {
                let score: f64 = r.try_get(3)?;
                Ok((
                    (r.try_get(0)?, r.try_get(1)?),
                    ReadingScore {
                        reading: r.try_get(2)?,
                        score: score as f32,
                        decided: r.try_get::<i64, _>(4)? != 0,
                        turned: r.try_get::<i64, _>(5)? != 0,
                    },
                ))
            })()
            .map_err(|e| self.sql(e))?;
            readings.entry(key).or_default().push(reading);
        }
        Ok(readings)
    }

    /// The rows a query of `ROW_COLUMNS` selects, with their results attached.
    async fn rows_with_results(&self, q: Sql) -> Result<Vec<HistoryRow>> {
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let raw = sqlx::query_with(&text, args)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        let mut rows = raw
            .iter()
            .map(row_from)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        self.attach_results(&mut rows).await?;
        Ok(rows)
    }

    /// The rows of these verdicts with their results, in the order given; ids not in history
    /// are left out.
    pub(crate) async fn rows_by_id(&self, verdict_ids: &[i64]) -> Result<Vec<HistoryRow>> {
        if verdict_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(format!(
            "SELECT {ROW_COLUMNS} FROM verdicts v JOIN messages m ON m.id = v.message_id WHERE v.id IN ("
        ));
        q.push_binds(verdict_ids.iter().copied()).push(")");
        let rows = self.rows_with_results(q).await?;
        let mut by_id: HashMap<i64, HistoryRow> =
            rows.into_iter().map(|row| (row.verdict_id, row)).collect();
        Ok(verdict_ids
            .iter()
            .filter_map(|id| by_id.remove(id))
            .collect())
    }

    /// One verdict with its results, the template text each validator used, and its reviews.
    pub async fn get(&self, verdict_id: i64) -> Result<Option<VerdictDetail>> {
        let raw = sqlx::query(&format!(
            "SELECT {ROW_COLUMNS} FROM verdicts v JOIN messages m ON m.id = v.message_id WHERE v.id = $1"
        ))
        .bind(verdict_id)
        .fetch_optional(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        let Some(raw) = raw else { return Ok(None) };
        let mut rows = vec![row_from(&raw).map_err(|e| self.sql(e))?];
        self.attach_results(&mut rows).await?;
        let row = rows.remove(0);
        let templates: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT t.validator_key, t.content_hash, t.content FROM validator_results r JOIN template_versions t ON t.id = r.template_version_id WHERE r.verdict_id = $1 ORDER BY r.position",
        )
        .bind(verdict_id)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(Some(VerdictDetail {
            row,
            templates: templates
                .into_iter()
                .map(|(key, content_hash, content)| TemplateRecord {
                    key,
                    content_hash,
                    content,
                })
                .collect(),
            reviews: self.reviews_of(verdict_id).await?,
        }))
    }

    /// Checked and failed counts per validator per UTC day, oldest day first.
    pub async fn daily_counts(&self, filter: &HistoryFilter) -> Result<Vec<DailyCount>> {
        // PostgreSQL sums BIGINTs as NUMERIC, which the Any driver cannot read: cast back.
        let mut q = Sql::new(format!(
            "SELECT {} AS day, r.validator_key, count(*), CAST(sum(1 - r.passed) AS BIGINT)
             FROM verdicts v JOIN messages m ON m.id = v.message_id JOIN validator_results r ON r.verdict_id = v.id WHERE TRUE",
            utc_day(self.engine(), "v.created_at")
        ));
        filter.push_conditions(&mut q, self.engine());
        q.push(" GROUP BY day, r.validator_key ORDER BY day, r.validator_key");
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let rows: Vec<(String, String, i64, i64)> = sqlx::query_as_with(&text, args)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .map(|(day, validator, checked, failed)| DailyCount {
                day,
                validator,
                checked,
                failed,
            })
            .collect())
    }

    /// Deletes one verdict with its message, results and reviews (in a team, admins only).
    /// False when it was not there.
    pub async fn delete(&self, actor: &str, verdict_id: i64) -> Result<bool> {
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Admin, "delete history")
            .await?;
        let done = sqlx::query("DELETE FROM verdicts WHERE id = $1")
            .bind(verdict_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.audit(
            &mut tx,
            actor,
            "history deleted",
            &format!("verdict {verdict_id}"),
            serde_json::json!({ "verdicts": 1 }),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(true)
    }

    /// Deletes every verdict the filter matches (in a team, admins only); returns how many.
    pub async fn delete_matching(&self, actor: &str, filter: &HistoryFilter) -> Result<u64> {
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Admin, "delete history")
            .await?;
        let deleted = self
            .remove_matching(&mut tx, actor, "history deleted", filter)
            .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(deleted)
    }

    /// Deletes what `filter` matches inside `tx`, and says so in the audit log when anything
    /// went.
    async fn remove_matching(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        actor: &str,
        action: &str,
        filter: &HistoryFilter,
    ) -> Result<u64> {
        let mut q = Sql::new(
            "DELETE FROM verdicts WHERE id IN (SELECT v.id FROM verdicts v JOIN messages m ON m.id = v.message_id WHERE TRUE",
        );
        filter.push_conditions(&mut q, self.engine());
        q.push(")");
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let deleted = sqlx::query_with(&text, args)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        if deleted > 0 {
            self.audit(
                tx,
                actor,
                action,
                "matching verdicts",
                serde_json::json!({ "verdicts": deleted, "filter": format!("{filter:?}") }),
            )
            .await?;
        }
        Ok(deleted)
    }

    /// Keep verdicts for this many days (None: forever; in a team, admins only). Applied now
    /// and whenever the store opens.
    pub async fn set_retention_days(&self, actor: &str, days: Option<u32>) -> Result<u64> {
        let mut tx = self.begin_deciding().await?;
        self.authorize(
            &mut tx,
            actor,
            MemberRole::Admin,
            "change how long history is kept",
        )
        .await?;
        match days {
            Some(days) => {
                sqlx::query("INSERT INTO settings (key, value) VALUES ('retention_days', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
                    .bind(days.to_string())
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.sql(e))?;
            }
            None => {
                sqlx::query("DELETE FROM settings WHERE key = 'retention_days'")
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.sql(e))?;
            }
        }
        self.audit(
            &mut tx,
            actor,
            "retention changed",
            "history",
            serde_json::json!({ "days": days }),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        match days {
            Some(days) => self.apply_retention(days).await,
            None => Ok(0),
        }
    }

    pub async fn retention_days(&self) -> Result<Option<u32>> {
        let value: Option<String> =
            sqlx::query_scalar("SELECT value FROM settings WHERE key = 'retention_days'")
                .fetch_optional(&self.writer)
                .await
                .map_err(|e| self.sql(e))?;
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// Drops verdicts older than `days` days; returns how many.
    /// The team's own policy, so no one's role is checked; the log names the policy as the actor.
    pub async fn apply_retention(&self, days: u32) -> Result<u64> {
        let cutoff = now_millis() - i64::from(days) * 86_400_000;
        let mut tx = self.begin_deciding().await?;
        let deleted = self
            .remove_matching(
                &mut tx,
                "retention policy",
                "history expired",
                &HistoryFilter {
                    until: Some(cutoff),
                    ..HistoryFilter::default()
                },
            )
            .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(deleted)
    }
}

fn row_from(r: &AnyRow) -> std::result::Result<HistoryRow, sqlx::Error> {
    Ok(HistoryRow {
        verdict_id: r.try_get(0)?,
        message_id: r.try_get(1)?,
        created_at: r.try_get(2)?,
        text: r.try_get(3)?,
        source: r.try_get(4)?,
        user_id: r.try_get(5)?,
        status: r.try_get(6)?,
        case: r.try_get(7)?,
        rejection_message: r.try_get(8)?,
        language: r.try_get(9)?,
        model_id: r.try_get(10)?,
        model_hash: r.try_get(11)?,
        latency_ms: r.try_get(12)?,
        review_count: r.try_get(13)?,
        role: r
            .try_get::<String, _>(14)?
            .parse()
            .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
        turn_index: r.try_get(15)?,
        context: serde_json::from_str(&r.try_get::<String, _>(16)?)
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        context_cut: r.try_get(17)?,
        encoder_id: r.try_get(18)?,
        encoder_hash: r.try_get(19)?,
        results: Vec::new(),
    })
}

/// Ends a query's `verdict_id IN (` with the ids of `rows`, bound.
fn close_verdict_ids(q: &mut Sql, rows: &[HistoryRow]) {
    q.push_binds(rows.iter().map(|row| row.verdict_id))
        .push(")");
}
