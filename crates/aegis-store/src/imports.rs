//! Resumable imports: a batch per file content, advanced in the same transaction as each row's
//! verdict, so a killed import resumes after the last committed row and never records a row twice.

use serde::Serialize;
use sqlx::{Sqlite, Transaction};

use crate::error::Result;
use crate::open::Store;
use crate::record::ImportRow;
use crate::time::now_millis;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ImportBatch {
    pub id: i64,
    pub file_name: String,
    pub file_sha256: String,
    pub total_rows: i64,
    pub rows_done: i64,
    /// Rows numbered up to here are handled; resume after it.
    pub last_row: i64,
    pub status: String,
}

impl ImportBatch {
    pub fn is_done(&self) -> bool {
        self.status == "done"
    }
}

impl Store {
    /// The batch for this file's content: a new one, or the one an earlier run left.
    pub async fn begin_import(
        &self,
        file_name: &str,
        file_sha256: &str,
        total_rows: i64,
    ) -> Result<ImportBatch> {
        let now = now_millis();
        sqlx::query_as::<_, ImportBatch>(
            "INSERT INTO import_batches (file_name, file_sha256, total_rows, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (file_sha256) DO UPDATE SET updated_at = excluded.updated_at
             RETURNING id, file_name, file_sha256, total_rows, rows_done, last_row, status",
        )
        .bind(file_name)
        .bind(file_sha256)
        .bind(total_rows)
        .bind(now)
        .bind(now)
        .fetch_one(&self.writer)
        .await
        .map_err(|e| self.sql(e))
    }

    pub(crate) async fn advance_import(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        import: ImportRow,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE import_batches SET rows_done = rows_done + 1, last_row = max(last_row, ?), updated_at = ? WHERE id = ?",
        )
        .bind(import.row)
        .bind(now)
        .bind(import.batch_id)
        .execute(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Marks a row handled without a verdict (bad input), so a resumed run does not retry it.
    pub async fn skip_import_row(&self, import: ImportRow) -> Result<()> {
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        self.advance_import(&mut tx, import, now_millis()).await?;
        tx.commit().await.map_err(|e| self.sql(e))
    }

    pub async fn finish_import(&self, batch_id: i64) -> Result<ImportBatch> {
        sqlx::query_as::<_, ImportBatch>(
            "UPDATE import_batches SET status = 'done', updated_at = ? WHERE id = ?
             RETURNING id, file_name, file_sha256, total_rows, rows_done, last_row, status",
        )
        .bind(now_millis())
        .bind(batch_id)
        .fetch_one(&self.writer)
        .await
        .map_err(|e| self.sql(e))
    }
}
