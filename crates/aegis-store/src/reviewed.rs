//! Reviewed verdicts as labelled data: what the guard should have said, per validator, read from
//! each reviewer's latest decision, where they agree. Reads both the history (query) and the
//! reviews; neither reads this.

use std::collections::{BTreeMap, BTreeSet};

use aegis_guard::LabelledMessage;
use serde::Serialize;

use crate::error::Result;
use crate::filter::HistoryFilter;
use crate::open::Store;
use crate::query::VerdictDetail;
use crate::reviews::Decision;

/// A reviewed message as labelled data: what the guard should have said, per validator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewedExample {
    pub verdict_id: i64,
    pub text: String,
    pub language: String,
    /// `Some(true)`: a violation; `None`: the review does not say.
    pub labels: BTreeMap<String, Option<bool>>,
}

/// Labels from a verdict's reviews (see [`review_label`]): each reviewer's latest decision, and
/// per validator the label they all give. Where two reviewers of the overlap share disagree the
/// label is left out (`None`), not taken from whoever decided last: a disagreement is not
/// training data until one of them changes their decision (the agreement figures count it).
/// A reviewer whose decision says nothing about a validator does not outvote one who does.
pub fn review_labels(detail: &VerdictDetail) -> BTreeMap<String, Option<bool>> {
    let mut latest: BTreeMap<&str, &crate::reviews::Review> = BTreeMap::new();
    for review in &detail.reviews {
        // Oldest first: a reviewer's later decision replaces their earlier one.
        latest.insert(review.reviewer.as_str(), review);
    }
    if latest.is_empty() {
        return BTreeMap::new();
    }
    let failed = detail.row.status == "failed";
    detail
        .row
        .results
        .iter()
        .map(|r| {
            let said: BTreeSet<bool> = latest
                .values()
                .filter_map(|review| {
                    review_label(
                        review.validators.get(&r.key).copied(),
                        review.decision,
                        !r.passed,
                        failed,
                    )
                })
                .collect();
            let label = match said.len() {
                1 => said.first().copied(),
                _ => None,
            };
            (r.key.clone(), label)
        })
        .collect()
}

/// What one review says a validator should have decided. A per-validator decision says it
/// directly (agree keeps the guard's result, overturn flips it). Otherwise the overall decision
/// applies: agree keeps every result; overturning a failed verdict means nothing was violated;
/// overturning a passed one says something was missed but not which, so it labels nothing.
pub(crate) fn review_label(
    on_validator: Option<Decision>,
    overall: Decision,
    violated: bool,
    verdict_failed: bool,
) -> Option<bool> {
    match (on_validator, overall) {
        (Some(Decision::Agree), _) => Some(violated),
        (Some(Decision::Overturn), _) => Some(!violated),
        (None, Decision::Agree) => Some(violated),
        (None, Decision::Overturn) if verdict_failed => Some(false),
        (None, Decision::Overturn) => None,
    }
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
    pub async fn reviewed_examples(&self, filter: &HistoryFilter) -> Result<Vec<ReviewedExample>> {
        let filter = HistoryFilter {
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
