//! The review queue: unreviewed verdicts that failed or came close to a threshold, the most
//! uncertain first; and saved template versions.

use serde::Serialize;

use crate::error::Result;
use crate::open::Store;
use crate::query::HistoryRow;
use crate::sql::Sql;
use crate::time::now_millis;

/// SQL for the queue's members and their uncertainty: the smallest distance of any validator's
/// score from its threshold. A failed verdict is always a member; a passed one only when some
/// score came within `margin` of its threshold.
const QUEUE_SQL: &str = "SELECT r.verdict_id AS id, min(abs(r.score - r.threshold)) AS uncertainty
     FROM validator_results r JOIN verdicts v ON v.id = r.verdict_id
     WHERE NOT EXISTS (SELECT 1 FROM reviews rv WHERE rv.verdict_id = v.id)
     GROUP BY r.verdict_id, v.status
     HAVING v.status = 'failed' OR min(abs(r.score - r.threshold)) < ";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ReviewQueue {
    /// The most uncertain first.
    pub items: Vec<HistoryRow>,
    /// Members of the queue in all, beyond the page too.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub remaining: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TemplateSave {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    pub key: String,
    pub content_hash: String,
    pub content: String,
    /// Unix milliseconds.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub saved_at: i64,
}

impl Store {
    pub async fn review_queue(&self, margin: f64, limit: u32) -> Result<ReviewQueue> {
        let mut q = Sql::new(format!("SELECT id FROM ({QUEUE_SQL}"));
        q.push_bind(margin)
            .push(") AS queue ORDER BY uncertainty ASC, id DESC LIMIT ")
            .push_bind(i64::from(limit.clamp(1, 1000)));
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let ids: Vec<i64> = sqlx::query_scalar_with(&text, args)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(detail) = self.get(id).await? {
                items.push(detail.row);
            }
        }
        let mut count = Sql::new(format!("SELECT count(*) FROM ({QUEUE_SQL}"));
        count.push_bind(margin).push(") AS queue");
        let (text, args) = count.into_parts().map_err(|e| self.sql(e))?;
        let remaining = sqlx::query_scalar_with(&text, args)
            .fetch_one(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(ReviewQueue { items, remaining })
    }

    /// Takes a review back (a reviewer's undo); false when there was none with this id.
    pub async fn delete_review(&self, review_id: i64) -> Result<bool> {
        let done = sqlx::query("DELETE FROM reviews WHERE id = $1")
            .bind(review_id)
            .execute(&self.writer)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(done.rows_affected() > 0)
    }

    /// Records that a template was saved with this text.
    pub async fn save_template_version(
        &self,
        key: &str,
        content_hash: &str,
        content: &str,
    ) -> Result<TemplateSave> {
        let now = now_millis();
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let version: i64 = sqlx::query_scalar(
            "INSERT INTO template_versions (validator_key, content_hash, content, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (validator_key, content_hash) DO UPDATE SET content = excluded.content
             RETURNING id",
        )
        .bind(key)
        .bind(content_hash)
        .bind(content)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO template_saves (template_version_id, saved_at) VALUES ($1, $2) RETURNING id",
        )
        .bind(version)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(TemplateSave {
            id,
            key: key.to_string(),
            content_hash: content_hash.to_string(),
            content: content.to_string(),
            saved_at: now,
        })
    }

    /// A template's saved versions, newest first.
    pub async fn template_saves(&self, key: &str, limit: u32) -> Result<Vec<TemplateSave>> {
        let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
            "SELECT s.id, t.validator_key, t.content_hash, t.content, s.saved_at
             FROM template_saves s JOIN template_versions t ON t.id = s.template_version_id
             WHERE t.validator_key = $1 ORDER BY s.id DESC LIMIT $2",
        )
        .bind(key)
        .bind(i64::from(limit.clamp(1, 1000)))
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .map(|(id, key, content_hash, content, saved_at)| TemplateSave {
                id,
                key,
                content_hash,
                content,
                saved_at,
            })
            .collect())
    }
}
