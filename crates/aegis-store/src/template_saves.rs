//! Every save of a template, with its text, so a version can be listed and put back.

use serde::Serialize;

use crate::error::Result;
use crate::open::Store;
use crate::team::MemberRole;
use crate::time::now_millis;

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
    /// Records that `actor` saved a template with this text. Call it before writing the file:
    /// a refusal (in a team, only authors save templates) must leave the file as it was.
    pub async fn save_template_version(
        &self,
        actor: &str,
        key: &str,
        content_hash: &str,
        content: &str,
    ) -> Result<TemplateSave> {
        let now = now_millis();
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Author, "save templates")
            .await?;
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
        self.audit(
            &mut tx,
            actor,
            "template saved",
            &format!("template {key}"),
            serde_json::json!({ "content_hash": content_hash }),
        )
        .await?;
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
