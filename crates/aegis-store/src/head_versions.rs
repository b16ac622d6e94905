//! Every head applied to a validator, kept byte for byte, so the Teach view and `aegis heads` can
//! list them with their figures and a revert restores one exactly.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::team::MemberRole;
use crate::time::now_millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHeadVersion {
    pub validator: String,
    /// The head file's bytes.
    pub content: Vec<u8>,
    /// Hash of the rows it was trained on.
    pub data_sha256: String,
    /// Its training figures, as JSON.
    pub metrics: String,
    pub note: String,
    /// The member who applied it (checked against the team's roles: authors apply heads).
    pub applied_by: String,
}

/// A version without its bytes, for lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct HeadVersion {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    pub validator: String,
    /// SHA-256 of the file's bytes.
    pub content_hash: String,
    pub data_sha256: String,
    pub metrics: String,
    pub note: String,
    /// Unix milliseconds.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub applied_at: i64,
}

pub fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const SELECT_VERSIONS: &str = "SELECT id, validator_key, content_hash, data_sha256, metrics, note,
        applied_at FROM head_versions";

type VersionRow = (i64, String, String, String, String, String, i64);

/// A version row and the file's bytes.
type VersionRowWithContent = (i64, String, String, String, String, String, i64, Vec<u8>);

fn into_version(row: VersionRow) -> HeadVersion {
    let (id, validator, content_hash, data_sha256, metrics, note, applied_at) = row;
    HeadVersion {
        id,
        validator,
        content_hash,
        data_sha256,
        metrics,
        note,
        applied_at,
    }
}

impl Store {
    /// Records a head as applied. The same bytes as the validator's latest version record
    /// nothing new: its id is returned. Call it before the file is written: in a team only
    /// authors apply heads, and a refusal must leave the file as it was.
    pub async fn save_head_version(&self, version: &NewHeadVersion) -> Result<i64> {
        if version.validator.trim().is_empty() || version.content.is_empty() {
            return Err(StoreError::Invalid(
                "a head version needs a validator and the head's bytes".into(),
            ));
        }
        let hash = content_hash(&version.content);
        let mut tx = self.begin_deciding().await?;
        self.authorize(
            &mut tx,
            &version.applied_by,
            MemberRole::Author,
            "apply heads",
        )
        .await?;
        let latest: Option<(i64, String)> = sqlx::query_as(
            "SELECT id, content_hash FROM head_versions WHERE validator_key = $1
             ORDER BY id DESC LIMIT 1",
        )
        .bind(&version.validator)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        if let Some((id, latest_hash)) = latest {
            if latest_hash == hash {
                return Ok(id);
            }
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO head_versions (validator_key, content_hash, content, data_sha256, metrics,
                 note, applied_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(&version.validator)
        .bind(&hash)
        .bind(&version.content)
        .bind(&version.data_sha256)
        .bind(&version.metrics)
        .bind(&version.note)
        .bind(now_millis())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        self.audit(
            &mut tx,
            &version.applied_by,
            "head applied",
            &format!("validator {}", version.validator),
            serde_json::json!({ "head_version": id, "content_hash": hash, "note": version.note }),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(id)
    }

    /// A validator's head versions, newest first.
    pub async fn head_versions(&self, validator: &str) -> Result<Vec<HeadVersion>> {
        let rows: Vec<VersionRow> = sqlx::query_as(&format!(
            "{SELECT_VERSIONS} WHERE validator_key = $1 ORDER BY id DESC"
        ))
        .bind(validator)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows.into_iter().map(into_version).collect())
    }

    /// One version and its bytes.
    pub async fn head_version(&self, id: i64) -> Result<Option<(HeadVersion, Vec<u8>)>> {
        let row: Option<VersionRowWithContent> = sqlx::query_as(
            "SELECT id, validator_key, content_hash, data_sha256, metrics, note, applied_at,
                    content FROM head_versions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row
            .map(|(id, v, h, d, m, n, a, content)| (into_version((id, v, h, d, m, n, a)), content)))
    }
}
