//! Reviewers' decisions on verdicts: agree or overturn, overall and per validator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::team::{reviewer_name, MemberRole};
use crate::time::now_millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Decision {
    Agree,
    Overturn,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agree => "agree",
            Self::Overturn => "overturn",
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "agree" => Ok(Self::Agree),
            "overturn" => Ok(Self::Overturn),
            other => Err(StoreError::Invalid(format!(
                "unknown decision {other:?}: use agree or overturn"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReview {
    pub verdict_id: i64,
    pub reviewer: String,
    pub decision: Decision,
    /// Validators judged individually; those left out were not.
    pub validators: BTreeMap<String, Decision>,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Review {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    pub reviewer: String,
    pub decision: Decision,
    pub validators: BTreeMap<String, Decision>,
    pub note: String,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
}

impl Store {
    /// Records a decision. Refused when the verdict is another reviewer's: decided by as many
    /// reviewers as the queue wants, or claimed by others up to that number. The reviewer's own
    /// earlier decision does not count: deciding again adds the newer one, which is what labels
    /// read.
    pub async fn add_review(&self, review: &NewReview) -> Result<i64> {
        let reviewer = reviewer_name(&review.reviewer)?;
        let validators = serde_json::to_string(&review.validators)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, reviewer, MemberRole::Reviewer, "decide verdicts")
            .await?;
        let wanted = self
            .take_for_review(&mut tx, review.verdict_id, reviewer)
            .await?;
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT validator_key FROM validator_results WHERE verdict_id = $1")
                .bind(review.verdict_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        if let Some(unknown) = review.validators.keys().find(|k| !keys.contains(k)) {
            return Err(StoreError::Invalid(format!(
                "verdict {} has no {unknown} result to review",
                review.verdict_id
            )));
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO reviews (verdict_id, reviewer, decision, validator_decisions, note, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(review.verdict_id)
        .bind(reviewer)
        .bind(review.decision.as_str())
        .bind(validators)
        .bind(&review.note)
        .bind(now_millis())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        self.settle(&mut tx, review.verdict_id, wanted).await?;
        self.audit(
            &mut tx,
            reviewer,
            "review",
            &format!("verdict {}", review.verdict_id),
            serde_json::json!({
                "review": id,
                "decision": review.decision,
                "validators": review.validators,
            }),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(id)
    }

    pub(crate) async fn reviews_of(&self, verdict_id: i64) -> Result<Vec<Review>> {
        let rows: Vec<(i64, String, String, String, String, i64)> = sqlx::query_as(
            "SELECT id, reviewer, decision, validator_decisions, note, created_at FROM reviews WHERE verdict_id = $1 ORDER BY created_at, id",
        )
        .bind(verdict_id)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|(id, reviewer, decision, validators, note, created_at)| {
                Ok(Review {
                    id,
                    reviewer,
                    decision: decision.parse()?,
                    validators: serde_json::from_str(&validators).map_err(|e| {
                        StoreError::Invalid(format!("review {id} has unreadable decisions: {e}"))
                    })?,
                    note,
                    created_at,
                })
            })
            .collect()
    }
}
