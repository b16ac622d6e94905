//! The original AEGIS Shield service's response shapes, kept exactly, with our additions in extra
//! fields that old clients ignore.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::guard::Verdict;

/// `POST /validate` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateResponse {
    pub user_id: String,
    pub question: String,
    pub case: String,
    pub execution_per_step: Vec<Step>,
    pub status_guard: String,
    pub ai_response: String,
    /// Addition: P(violation) per validator key.
    pub scores: BTreeMap<String, f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub step: String,
    pub status: String,
}

/// `POST /chat` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub response: String,
    pub status: String,
    pub can_proceed: bool,
}

impl ValidateResponse {
    pub fn new(user_id: &str, question: &str, verdict: &Verdict) -> Self {
        Self {
            user_id: user_id.to_string(),
            question: question.to_string(),
            case: verdict.case.clone(),
            execution_per_step: verdict
                .results
                .iter()
                .map(|r| Step {
                    step: r.key.clone(),
                    status: if r.passed { "passed" } else { "failed" }.to_string(),
                })
                .collect(),
            status_guard: verdict.status.as_str().to_string(),
            ai_response: verdict.rejection_message.clone(),
            scores: verdict
                .results
                .iter()
                .map(|r| (r.key.clone(), r.score))
                .collect(),
        }
    }
}

impl ChatResponse {
    pub fn new(verdict: &Verdict) -> Self {
        let passed = verdict.status == crate::guard::Status::Passed;
        Self {
            response: verdict.rejection_message.clone(),
            status: verdict.status.as_str().to_string(),
            can_proceed: passed,
        }
    }
}
