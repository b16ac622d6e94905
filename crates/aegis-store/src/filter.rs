//! History filters, turned into SQL with bound parameters only.

use aegis_guard::Status;

use crate::database::Engine;
use crate::record::Source;
use crate::sql::{push_text_search, Sql};

/// Scores of one validator (or of any, when `validator` is `None`) inside `[min, max]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreRange {
    pub validator: Option<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// Every field narrows the set; the default matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryFilter {
    pub status: Option<Status>,
    /// Verdicts in which this validator failed.
    pub failed_validator: Option<String>,
    pub score: Option<ScoreRange>,
    pub source: Option<Source>,
    pub user_id: Option<String>,
    /// Unix milliseconds, inclusive.
    pub since: Option<i64>,
    /// Unix milliseconds, exclusive.
    pub until: Option<i64>,
    /// Only reviewed (`Some(true)`) or only unreviewed (`Some(false)`) verdicts.
    pub reviewed: Option<bool>,
    /// Words to find in the message text (all of them, any order, case and accents ignored).
    pub text: Option<String>,
}

impl HistoryFilter {
    /// Appends ` AND ...` conditions on `v` (verdicts) and `m` (messages).
    pub(crate) fn push_conditions(&self, q: &mut Sql, engine: Engine) {
        if let Some(status) = self.status {
            q.push(" AND v.status = ").push_bind(status.as_str());
        }
        if let Some(key) = &self.failed_validator {
            q.push(" AND EXISTS (SELECT 1 FROM validator_results r WHERE r.verdict_id = v.id AND r.passed = 0 AND r.validator_key = ")
                .push_bind(key.clone())
                .push(")");
        }
        if let Some(range) = &self.score {
            q.push(" AND EXISTS (SELECT 1 FROM validator_results r WHERE r.verdict_id = v.id");
            if let Some(key) = &range.validator {
                q.push(" AND r.validator_key = ").push_bind(key.clone());
            }
            if let Some(min) = range.min {
                q.push(" AND r.score >= ").push_bind(min);
            }
            if let Some(max) = range.max {
                q.push(" AND r.score <= ").push_bind(max);
            }
            q.push(")");
        }
        if let Some(source) = self.source {
            q.push(" AND m.source = ").push_bind(source.as_str());
        }
        if let Some(user) = &self.user_id {
            q.push(" AND m.user_id = ").push_bind(user.clone());
        }
        if let Some(since) = self.since {
            q.push(" AND v.created_at >= ").push_bind(since);
        }
        if let Some(until) = self.until {
            q.push(" AND v.created_at < ").push_bind(until);
        }
        match self.reviewed {
            Some(true) => {
                q.push(" AND EXISTS (SELECT 1 FROM reviews rv WHERE rv.verdict_id = v.id)");
            }
            Some(false) => {
                q.push(" AND NOT EXISTS (SELECT 1 FROM reviews rv WHERE rv.verdict_id = v.id)");
            }
            None => {}
        }
        if let Some(text) = &self.text {
            push_text_search(q, engine, text);
        }
    }
}
