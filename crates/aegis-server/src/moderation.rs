//! `POST /v1/moderations`: OpenAI's moderation shape, our validators as its categories.

use std::collections::BTreeMap;
use std::sync::Arc;

use aegis_guard::GuardInput;
use aegis_runtime::ModelStatus;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::json::ApiJson;
use crate::routes::check_all;
use crate::state::AppState;

/// One message, or several checked together.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum ModerationInput {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct ModerationRequest {
    input: ModerationInput,
    /// Accepted for compatibility; the loaded model answers.
    #[serde(default)]
    #[allow(dead_code)]
    model: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ModerationResponse {
    id: String,
    model: String,
    /// One per input, in the inputs' order.
    results: Vec<ModerationResult>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ModerationResult {
    flagged: bool,
    /// Per validator key: whether it failed.
    categories: BTreeMap<String, bool>,
    /// Per validator key: P(violation).
    category_scores: BTreeMap<String, f32>,
}

/// Inputs per moderation request: each is a full verdict on the model's thread.
pub(crate) const MAX_MODERATION_INPUTS: usize = 32;

/// OpenAI-compatible moderation: one result per input, our validators as categories.
#[utoipa::path(post, path = "/v1/moderations", request_body = ModerationRequest,
    responses((status = 200, description = "One result per input", body = ModerationResponse)))]
pub(crate) async fn moderations(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<ModerationRequest>,
) -> Result<Json<ModerationResponse>, ApiError> {
    let inputs = match request.input {
        ModerationInput::One(text) => vec![text],
        ModerationInput::Many(texts) => texts,
    };
    if inputs.is_empty() {
        return Err(ApiError::bad_request(
            "empty_input",
            "input is an empty list",
        ));
    }
    if inputs.len() > MAX_MODERATION_INPUTS {
        return Err(ApiError::bad_request(
            "too_many_inputs",
            format!(
                "at most {MAX_MODERATION_INPUTS} inputs per request, got {}",
                inputs.len()
            ),
        ));
    }
    // All inputs go to the worker at once, so it checks them in batches; answers keep the
    // inputs' order. A full queue answers the whole request 503, like any other.
    let verdicts = check_all(
        &state,
        inputs
            .iter()
            .map(|t| GuardInput::message(t.as_str()))
            .collect(),
        None,
    )
    .await?;
    let results = verdicts
        .iter()
        .map(|verdict| ModerationResult {
            flagged: verdict.status == aegis_guard::Status::Failed,
            categories: verdict
                .results
                .iter()
                .map(|r| (r.key.clone(), !r.passed))
                .collect(),
            category_scores: verdict
                .results
                .iter()
                .map(|r| (r.key.clone(), r.score))
                .collect(),
        })
        .collect();
    let model = match state.worker.status() {
        ModelStatus::Ready(info) => info.id,
        _ => String::new(),
    };
    let id = state.next_moderation_id();
    Ok(Json(ModerationResponse {
        id: format!("modr-{id}"),
        model,
        results,
    }))
}
