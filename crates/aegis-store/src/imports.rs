//! Resumable imports: a batch per file content, advanced in the same transaction as each row's
//! verdict, so a killed import resumes after the last committed row and never records a row twice.

use serde::Serialize;

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
            "INSERT INTO import_batches (file_name, file_sha256, total_rows, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)
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

    /// Counts `rows` more rows of the batch handled, the furthest being `last_row`.
    pub(crate) async fn advance_import(
        &self,
        tx: &mut sqlx::AnyConnection,
        batch_id: i64,
        rows: i64,
        last_row: i64,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE import_batches SET rows_done = rows_done + $1, last_row = CASE WHEN last_row > $2 THEN last_row ELSE $2 END, updated_at = $3 WHERE id = $4",
        )
        .bind(rows)
        .bind(last_row)
        .bind(now)
        .bind(batch_id)
        .execute(tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Marks a row handled without a verdict (bad input), so a resumed run does not retry it.
    pub async fn skip_import_row(&self, import: ImportRow) -> Result<()> {
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        self.advance_import(&mut tx, import.batch_id, 1, import.row, now_millis())
            .await?;
        tx.commit().await.map_err(|e| self.sql(e))
    }

    pub async fn finish_import(&self, batch_id: i64) -> Result<ImportBatch> {
        sqlx::query_as::<_, ImportBatch>(
            "UPDATE import_batches SET status = 'done', updated_at = $1 WHERE id = $2
             RETURNING id, file_name, file_sha256, total_rows, rows_done, last_row, status",
        )
        .bind(now_millis())
        .bind(batch_id)
        .fetch_one(&self.writer)
        .await
        .map_err(|e| self.sql(e))
    }

    /// Per validator, how many of a batch's messages it failed and its scores in ten bins
    /// ([0, 0.1), …, [0.9, 1]): the summary an import ends with, whole even after a resume.
    pub async fn import_tally(&self, batch_id: i64) -> Result<Vec<ValidatorTally>> {
        let query = format!(
            "SELECT r.validator_key, {} AS bin, count(*), CAST(sum(1 - r.passed) AS BIGINT)
             FROM validator_results r
             JOIN verdicts v ON v.id = r.verdict_id
             JOIN messages m ON m.id = v.message_id
             WHERE m.import_batch_id = $1
             GROUP BY r.validator_key, bin
             ORDER BY min(r.position), r.validator_key",
            crate::sql::decile("r.score")
        );
        let bins: Vec<(String, i64, i64, i64)> = sqlx::query_as(&query)
            .bind(batch_id)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        let mut tallies: Vec<ValidatorTally> = Vec::new();
        for (key, bin, count, failed) in bins {
            let index = match tallies.iter().position(|t| t.key == key) {
                Some(i) => i,
                None => {
                    tallies.push(ValidatorTally {
                        key,
                        failed: 0,
                        histogram: [0; 10],
                    });
                    tallies.len() - 1
                }
            };
            let tally = &mut tallies[index];
            tally.failed += failed as u64;
            tally.histogram[bin.clamp(0, 9) as usize] += count as u64;
        }
        Ok(tallies)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorTally {
    pub key: String,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub failed: u64,
    #[cfg_attr(feature = "ts", ts(type = "number[]"))]
    pub histogram: [u64; 10],
}
