//! Reviewers' decisions on verdicts: agree or overturn, overall and per validator.

use std::collections::BTreeMap;

use aegis_guard::LabelledMessage;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::open::Store;
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
    pub async fn add_review(&self, review: &NewReview) -> Result<i64> {
        if review.reviewer.trim().is_empty() {
            return Err(StoreError::Invalid("a review needs a reviewer name".into()));
        }
        let validators = serde_json::to_string(&review.validators)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT validator_key FROM validator_results WHERE verdict_id = ?")
                .bind(review.verdict_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        if keys.is_empty() {
            return Err(StoreError::Invalid(format!(
                "no verdict {} in history",
                review.verdict_id
            )));
        }
        if let Some(unknown) = review.validators.keys().find(|k| !keys.contains(k)) {
            return Err(StoreError::Invalid(format!(
                "verdict {} has no {unknown} result to review",
                review.verdict_id
            )));
        }
        let id = sqlx::query_scalar(
            "INSERT INTO reviews (verdict_id, reviewer, decision, validator_decisions, note, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(review.verdict_id)
        .bind(review.reviewer.trim())
        .bind(review.decision.as_str())
        .bind(validators)
        .bind(&review.note)
        .bind(now_millis())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(id)
    }

    pub(crate) async fn reviews_of(&self, verdict_id: i64) -> Result<Vec<Review>> {
        let rows: Vec<(i64, String, String, String, String, i64)> = sqlx::query_as(
            "SELECT id, reviewer, decision, validator_decisions, note, created_at FROM reviews WHERE verdict_id = ? ORDER BY created_at, id",
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

/// A reviewed message as labelled data: what the guard should have said, per validator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewedExample {
    pub verdict_id: i64,
    pub text: String,
    pub language: String,
    /// `Some(true)`: a violation; `None`: the review does not say.
    pub labels: BTreeMap<String, Option<bool>>,
}

/// Labels from the latest review of a verdict. A per-validator decision says it directly (agree
/// keeps the guard's result, overturn flips it). Otherwise the overall decision applies: agree
/// keeps every result; overturning a failed verdict means nothing was violated; overturning a
/// passed one says something was missed but not which, so it labels nothing.
pub fn review_labels(detail: &crate::query::VerdictDetail) -> BTreeMap<String, Option<bool>> {
    let Some(review) = detail.reviews.last() else {
        return BTreeMap::new();
    };
    detail
        .row
        .results
        .iter()
        .map(|r| {
            let violated = !r.passed;
            let label = match (review.validators.get(&r.key), review.decision) {
                (Some(Decision::Agree), _) => Some(violated),
                (Some(Decision::Overturn), _) => Some(!violated),
                (None, Decision::Agree) => Some(violated),
                (None, Decision::Overturn) if detail.row.status == "failed" => Some(false),
                (None, Decision::Overturn) => None,
            };
            (r.key.clone(), label)
        })
        .collect()
}

impl ReviewedExample {
    /// The example in the evaluation schema, so reviews can be trained on and evaluated against.
    /// Its id (`review:<verdict id>`) leads back to the verdict.
    pub fn into_labelled(self) -> LabelledMessage {
        LabelledMessage {
            id: Some(format!("review:{}", self.verdict_id)),
            text: self.text,
            lang: Some(self.language),
            labels: self.labels,
            source: Some("review".into()),
            kind: None,
        }
    }
}

impl Store {
    /// Every reviewed verdict the filter matches as labelled data, newest first.
    pub async fn reviewed_examples(
        &self,
        filter: &crate::filter::HistoryFilter,
    ) -> Result<Vec<ReviewedExample>> {
        let filter = crate::filter::HistoryFilter {
            reviewed: Some(true),
            ..filter.clone()
        };
        let mut examples = Vec::new();
        let mut after = None;
        loop {
            let page = self.list(&filter, after, 500).await?;
            for row in &page.rows {
                if let Some(detail) = self.get(row.verdict_id).await? {
                    examples.push(ReviewedExample {
                        verdict_id: row.verdict_id,
                        text: row.text.clone(),
                        language: row.language.clone(),
                        labels: review_labels(&detail),
                    });
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(examples),
            }
        }
    }
}
