//! History as the window browses it: filters, single verdicts, exports and the review queue.

use std::path::Path;

use aegis_guard::Status;
use aegis_store::{
    parse_day, AuditEntry, Cursor, Decision, ExportFormat, HistoryFilter, HistoryPage, Member,
    MemberRole, NewReview, QueuePolicy, ReviewQueue, ReviewerAgreement, Source, VerdictDetail,
};
use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;

use super::{lock, Console};

/// History filters as the window sends them.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default)]
pub struct HistoryQuery {
    pub text: Option<String>,
    pub status: Option<Status>,
    /// Verdicts this validator failed.
    pub validator: Option<String>,
    pub source: Option<Source>,
    /// YYYY-MM-DD, inclusive.
    pub since: Option<String>,
    /// YYYY-MM-DD, inclusive.
    pub until: Option<String>,
}

/// A finished export: how many verdicts went where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Exported {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub count: u64,
    pub path: String,
}

impl Console {
    /// Claims a batch of the team's queue for this console's reviewer (renewing what they hold).
    pub async fn review_queue(&self, limit: u32) -> Result<ReviewQueue, ConsoleError> {
        let (margin, reviewer) = {
            let settings = lock(&self.settings);
            (settings.review_margin, settings.reviewer.clone())
        };
        Ok(self.store.claim_reviews(&reviewer, margin, limit).await?)
    }

    /// Gives the reviewer's undecided claims back to the team (leaving the queue).
    pub async fn release_reviews(&self) -> Result<u64, ConsoleError> {
        let reviewer = lock(&self.settings).reviewer.clone();
        Ok(self.store.release_claims(&reviewer).await?)
    }

    pub async fn queue_policy(&self) -> Result<QueuePolicy, ConsoleError> {
        Ok(self.store.queue_policy().await?)
    }

    pub async fn set_queue_policy(&self, policy: QueuePolicy) -> Result<(), ConsoleError> {
        Ok(self.store.set_queue_policy(&self.actor(), &policy).await?)
    }

    /// The team's members (none: a console of one, where anyone may do anything).
    pub async fn members(&self) -> Result<Vec<Member>, ConsoleError> {
        Ok(self.store.members().await?)
    }

    /// Names a member or changes their role, as this console's reviewer (an admin, or the first
    /// admin naming themselves).
    pub async fn set_member(&self, name: String, role: MemberRole) -> Result<Member, ConsoleError> {
        Ok(self.store.set_member(&self.actor(), &name, role).await?)
    }

    pub async fn remove_member(&self, name: String) -> Result<bool, ConsoleError> {
        Ok(self.store.remove_member(&self.actor(), &name).await?)
    }

    /// The audit log, newest first, before entry `before` when paging.
    pub async fn audit_log(
        &self,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, ConsoleError> {
        Ok(self.store.audit_log(None, before, limit).await?)
    }

    pub async fn reviewer_agreement(&self) -> Result<ReviewerAgreement, ConsoleError> {
        Ok(self.store.reviewer_agreement().await?)
    }

    pub async fn review(
        &self,
        verdict_id: i64,
        decision: Decision,
        note: String,
    ) -> Result<i64, ConsoleError> {
        let reviewer = lock(&self.settings).reviewer.clone();
        Ok(self
            .store
            .add_review(&NewReview {
                verdict_id,
                reviewer,
                decision,
                validators: Default::default(),
                note,
            })
            .await?)
    }

    pub async fn undo_review(&self, review_id: i64) -> Result<bool, ConsoleError> {
        Ok(self.store.delete_review(&self.actor(), review_id).await?)
    }

    pub async fn history(
        &self,
        query: &HistoryQuery,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<HistoryPage, ConsoleError> {
        Ok(self.store.list(&filter_of(query)?, after, limit).await?)
    }

    pub async fn history_count(&self, query: &HistoryQuery) -> Result<i64, ConsoleError> {
        Ok(self.store.count(&filter_of(query)?).await?)
    }

    pub async fn verdict(&self, verdict_id: i64) -> Result<VerdictDetail, ConsoleError> {
        self.store
            .get(verdict_id)
            .await?
            .ok_or(ConsoleError::NotFound(verdict_id))
    }

    /// Writes the filtered history to `path` (CSV or JSONL by its extension); returns the count.
    pub async fn export(&self, query: &HistoryQuery, path: &Path) -> Result<u64, ConsoleError> {
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => ExportFormat::Csv,
            Some("jsonl") => ExportFormat::Jsonl,
            _ => {
                return Err(ConsoleError::Invalid(
                    "export to a .csv or .jsonl file".into(),
                ))
            }
        };
        let filter = filter_of(query)?;
        let mut buffer: Vec<u8> = Vec::new();
        let count = self.store.export(&filter, format, &mut buffer).await?;
        crate::settings::write_atomically(path, &buffer)?;
        Ok(count)
    }
}

fn filter_of(query: &HistoryQuery) -> Result<HistoryFilter, ConsoleError> {
    let present = |s: &Option<String>| {
        s.as_ref()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    const DAY_MS: i64 = 86_400_000;
    Ok(HistoryFilter {
        status: query.status,
        failed_validator: present(&query.validator),
        source: query.source,
        since: present(&query.since).map(|d| parse_day(&d)).transpose()?,
        until: present(&query.until)
            .map(|d| parse_day(&d).map(|start| start + DAY_MS))
            .transpose()?,
        text: present(&query.text),
        ..HistoryFilter::default()
    })
}
