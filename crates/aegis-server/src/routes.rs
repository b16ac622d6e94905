//! Endpoints. Handlers are thin: parse, ask the worker, record, shape the answer.

use std::sync::Arc;

use aegis_engine::SYNTHETIC_WARNING;
use aegis_guard::{ChatResponse, GuardError, ValidateResponse, Verdict};
use aegis_store::Source;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::{worker_error, ApiError};
use crate::json::ApiJson;
use crate::state::AppState;
use aegis_runtime::{check_and_record, ModelStatus, Submitter};

pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new()
        .route("/validate", post(validate))
        .route("/chat", post(chat))
        .route("/health", get(health))
        .route("/v1/moderations", post(moderations))
        .route("/validators", get(validators))
        .route("/feedback", post(crate::feedback::feedback))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(crate::metrics::metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ));
    let origins: Vec<HeaderValue> = state
        .config
        .cors_origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if !origins.is_empty() {
        router = router.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    axum::http::header::CONTENT_TYPE,
                    axum::http::header::AUTHORIZATION,
                ]),
        );
    }
    // Outermost, so refused requests (401, 413, 503) are counted too.
    crate::metrics::install();
    router
        .layer(axum::middleware::from_fn(crate::metrics::track_requests))
        .with_state(state)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardRequest {
    user_id: String,
    question: String,
}

/// Checks and records one message.
async fn check(state: &AppState, text: &str, user_id: Option<&str>) -> Result<Verdict, ApiError> {
    let checked = check_unmeasured(state, text, user_id).await;
    match &checked {
        Ok(verdict) => crate::metrics::record_verdict(verdict),
        Err(error) => crate::metrics::record_check_failure(error),
    }
    checked
}

async fn check_unmeasured(
    state: &AppState,
    text: &str,
    user_id: Option<&str>,
) -> Result<Verdict, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "empty_text",
            GuardError::EmptyText.to_string(),
        ));
    }
    let Some(store) = &state.store else {
        let checked = state.worker.check(text.to_string()).await;
        return Ok(checked.map_err(worker_error)?.verdict);
    };
    let submitter = Submitter {
        source: Source::Http,
        user_id,
    };
    let recorded = check_and_record(&state.worker, store, text, submitter)
        .await
        .map_err(worker_error)?;
    // The client gets its verdict even when history could not keep it.
    if let Err(e) = recorded.verdict_id {
        tracing::error!(error = %e, "recording the verdict failed");
    }
    Ok(recorded.checked.verdict)
}

async fn validate(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<GuardRequest>,
) -> Result<Json<ValidateResponse>, ApiError> {
    let verdict = check(&state, &request.question, Some(&request.user_id)).await?;
    Ok(Json(ValidateResponse::new(
        &request.user_id,
        &request.question,
        &verdict,
    )))
}

async fn chat(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<GuardRequest>,
) -> Result<Json<ChatResponse>, ApiError> {
    let verdict = check(&state, &request.question, Some(&request.user_id)).await?;
    Ok(Json(ChatResponse::new(&verdict)))
}

async fn health(State(state): State<Arc<AppState>>) -> Json<Value> {
    let mut status = "healthy";
    let model = match state.worker.status() {
        ModelStatus::Loading => json!({"state": "loading"}),
        ModelStatus::Ready(info) => {
            let mut model = json!({"state": "ready", "id": info.id, "device": info.device,
                                   "weights": info.weight_format});
            if info.synthetic {
                model["synthetic"] = json!(true);
                model["warning"] = json!(SYNTHETIC_WARNING);
            }
            if let Some(problem) = state.probe_model().await {
                status = "degraded";
                model["state"] = json!("unavailable");
                model["error"] = json!(problem);
            }
            model
        }
        ModelStatus::Failed(error) => json!({"state": "failed", "error": error}),
    };
    Json(json!({
        "status": status,
        "message": "Guardian Validation API is running",
        "model": model,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ModerationInput {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
struct ModerationRequest {
    input: ModerationInput,
    /// Accepted for compatibility; the loaded model answers.
    #[serde(default)]
    #[allow(dead_code)]
    model: Option<String>,
}

/// Inputs per moderation request: each is a full verdict on the model's thread.
const MAX_MODERATION_INPUTS: usize = 32;

async fn moderations(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<ModerationRequest>,
) -> Result<Json<Value>, ApiError> {
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
    let verdicts =
        futures_util::future::try_join_all(inputs.iter().map(|text| check(&state, text, None)))
            .await?;
    let mut results = Vec::with_capacity(inputs.len());
    for verdict in verdicts {
        let categories: serde_json::Map<String, Value> = verdict
            .results
            .iter()
            .map(|r| (r.key.clone(), Value::Bool(!r.passed)))
            .collect();
        let scores: serde_json::Map<String, Value> = verdict
            .results
            .iter()
            .map(|r| (r.key.clone(), json!(r.score)))
            .collect();
        results.push(json!({
            "flagged": verdict.status == aegis_guard::Status::Failed,
            "categories": categories,
            "category_scores": scores,
        }));
    }
    let model = match state.worker.status() {
        ModelStatus::Ready(info) => info.id,
        _ => String::new(),
    };
    let id = state.next_moderation_id();
    Ok(Json(json!({
        "id": format!("modr-{id}"),
        "model": model,
        "results": results,
    })))
}

async fn validators(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let guard = state.loaded_guard().map_err(worker_error)?;
    let list: Vec<Value> = guard
        .validators()
        .iter()
        .zip(guard.heads())
        .map(|(v, head)| {
            json!({
                "key": v.key,
                "name": v.name,
                "description": v.description,
                "threshold": v.threshold,
                "content_hash": v.content_hash,
                "scored_by": if head.is_some() { "head" } else { "prompt" },
            })
        })
        .collect();
    let mut answer = json!({ "validators": list });
    // Heads on a sentence encoder run here whatever serves the model.
    let reason =
        aegis_guard::heads_unavailable(guard.model().info()).filter(|_| guard.encoder().is_none());
    if let Some(reason) = reason {
        answer["heads_unavailable"] = json!(reason);
    }
    Ok(Json(answer))
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

async fn not_found(request: Request) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no endpoint at {}; see GET /openapi.json",
            request.uri().path()
        ),
    )
    .into_response()
}

async fn method_not_allowed(request: Request) -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not accept {}",
            request.uri().path(),
            request.method()
        ),
    )
    .into_response()
}
