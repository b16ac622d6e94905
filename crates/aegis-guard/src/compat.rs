//! The original AEGIS Shield service's response shapes, kept exactly, with our additions in extra
//! fields that old clients ignore.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::guard::{Status, ValidatorResult, Verdict};
use crate::input::Role;
use crate::readings::{ReadingScore, IN_CONTEXT, QUOTES_ELIDED};

/// `POST /validate` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ValidateResponse {
    pub user_id: String,
    pub question: String,
    pub case: String,
    pub execution_per_step: Vec<Step>,
    pub status_guard: String,
    pub ai_response: String,
    /// Addition: P(violation) per validator key (the highest over the turns checked).
    pub scores: BTreeMap<String, f32>,
    /// Addition, for `messages` requests: each checked turn's verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    pub step: String,
    /// `passed`, `failed`, or `skipped` where the validator does not read the turn's role.
    pub status: String,
    /// Addition, for `messages` requests: the position of the turn this step checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
}

/// One checked turn of a conversation, as `/validate` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnVerdict {
    /// Its position in the request's `messages`, from 0.
    pub index: usize,
    pub role: Role,
    pub status: String,
    pub case: String,
    /// Earlier turns read with it, and older turns cut to fit the context budget.
    pub context_turns: usize,
    pub context_cut: usize,
    /// Validators that failed it only because of its context.
    pub caught_in_context: Vec<String>,
    /// Validators it passed only because a quoted passage in the user's question or report was
    /// read as mentioned, not said (`quotes: mentioned` or `reported`).
    pub read_as_mention: Vec<String>,
    /// Per validator a head decided: each reading of the turn it made (the turn as written,
    /// in context, with quotes elided, ...), which decided, and which turned the decision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub readings: BTreeMap<String, Vec<ReadingScore>>,
}

/// `POST /chat` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatResponse {
    pub response: String,
    pub status: String,
    pub can_proceed: bool,
    /// Addition, for `"answer": true`: the verdict on the answer the model wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_status: Option<String>,
}

impl ValidateResponse {
    pub fn new(user_id: &str, question: &str, verdict: &Verdict) -> Self {
        let mut response = Self::for_turns(user_id, question, std::slice::from_ref(verdict));
        for step in &mut response.execution_per_step {
            step.turn = None;
        }
        response.turns.clear();
        response
    }

    /// The answer to a `messages` request: every checked turn's steps, named by turn. It failed
    /// when any turn failed; the case lists every failed validator once, and the rejection is the
    /// first failed turn's.
    pub fn for_turns(user_id: &str, question: &str, verdicts: &[Verdict]) -> Self {
        let mut steps = Vec::new();
        let mut scores: BTreeMap<String, f32> = BTreeMap::new();
        let mut failed_keys: Vec<&str> = Vec::new();
        for verdict in verdicts {
            let turn = Some(verdict.turn.index);
            for r in &verdict.results {
                steps.push(Step {
                    step: r.key.clone(),
                    status: if r.passed { "passed" } else { "failed" }.to_string(),
                    turn,
                });
                let best = scores.entry(r.key.clone()).or_insert(r.score);
                *best = best.max(r.score);
                if !r.passed && !failed_keys.contains(&r.key.as_str()) {
                    failed_keys.push(&r.key);
                }
            }
            steps.extend(verdict.skipped.iter().map(|key| Step {
                step: key.clone(),
                status: "skipped".into(),
                turn,
            }));
        }
        let first_failed = verdicts.iter().find(|v| v.status == Status::Failed);
        Self {
            user_id: user_id.to_string(),
            question: question.to_string(),
            case: if failed_keys.is_empty() {
                "aman".into()
            } else {
                failed_keys.join(", ")
            },
            execution_per_step: steps,
            status_guard: first_failed
                .map_or(Status::Passed, |v| v.status)
                .as_str()
                .to_string(),
            ai_response: first_failed
                .map(|v| v.rejection_message.clone())
                .unwrap_or_default(),
            scores,
            turns: verdicts.iter().map(TurnVerdict::new).collect(),
        }
    }
}

impl TurnVerdict {
    fn new(verdict: &Verdict) -> Self {
        let keys_where = |marked: fn(&ValidatorResult) -> bool| {
            verdict
                .results
                .iter()
                .filter(|r| marked(r))
                .map(|r| r.key.clone())
                .collect()
        };
        Self {
            index: verdict.turn.index,
            role: verdict.turn.role,
            status: verdict.status.as_str().to_string(),
            case: verdict.case.clone(),
            context_turns: verdict.turn.context.len(),
            context_cut: verdict.turn.context_cut,
            caught_in_context: keys_where(|r| !r.passed && r.turned_by(IN_CONTEXT)),
            read_as_mention: keys_where(|r| r.passed && r.turned_by(QUOTES_ELIDED)),
            readings: verdict
                .results
                .iter()
                .filter(|r| !r.readings.is_empty())
                .map(|r| (r.key.clone(), r.readings.clone()))
                .collect(),
        }
    }
}

impl ChatResponse {
    pub fn new(verdict: &Verdict) -> Self {
        Self::for_turns(std::slice::from_ref(verdict))
    }

    /// Whether a conversation can proceed: not when any checked turn failed, and then with the
    /// first failed turn's rejection.
    pub fn for_turns(verdicts: &[Verdict]) -> Self {
        match verdicts.iter().find(|v| v.status == Status::Failed) {
            Some(failed) => Self {
                response: failed.rejection_message.clone(),
                status: Status::Failed.as_str().to_string(),
                can_proceed: false,
                answer_status: None,
            },
            None => Self {
                response: String::new(),
                status: Status::Passed.as_str().to_string(),
                can_proceed: true,
                answer_status: None,
            },
        }
    }
}
