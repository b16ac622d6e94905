//! Endpoints. Handlers are thin: parse, ask the worker, record, shape the answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aegis_engine::SYNTHETIC_WARNING;
use aegis_guard::{ChatResponse, GuardError, ValidateResponse, Verdict};
use aegis_store::{Source, Store};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::ApiError;
use aegis_runtime::{check_and_record, ModelStatus, Submitter, Worker, WorkerError};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// When set, every endpoint but `/health` needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub max_body_bytes: usize,
    /// Origins allowed by CORS; empty turns CORS off.
    pub cors_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            token: None,
            max_body_bytes: 64 * 1024,
            cors_origins: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub struct AppState {
    pub worker: Worker,
    pub store: Option<Arc<Store>>,
    pub config: ServerConfig,
    moderation_ids: AtomicU64,
}

impl AppState {
    pub fn new(worker: Worker, store: Option<Arc<Store>>, config: ServerConfig) -> Self {
        Self {
            worker,
            store,
            config,
            moderation_ids: AtomicU64::new(0),
        }
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new()
        .route("/validate", post(validate))
        .route("/chat", post(chat))
        .route("/health", get(health))
        .route("/v1/moderations", post(moderations))
        .route("/validators", get(validators))
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

/// JSON bodies whose every rejection answers in the API's error shape.
struct ApiJson<T>(T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_error(rejection)),
        }
    }
}

fn json_error(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_request",
        _ => "malformed_json",
    };
    let message = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "send the body as JSON with Content-Type: application/json".to_string()
        }
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is over the size limit".to_string(),
        _ => rejection.body_text(),
    };
    ApiError::new(status, code, message)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardRequest {
    user_id: String,
    question: String,
}

/// What a client is told to wait when the model server is down: about one retry cycle of its
/// client (connect timeout plus backoff), so a client does not hammer a server that is restarting.
const BACKEND_RETRY_AFTER_S: u32 = 5;

fn worker_error(error: WorkerError) -> ApiError {
    match error {
        WorkerError::Busy(_) => ApiError::busy(error.to_string(), 1),
        WorkerError::Loading => ApiError::busy(error.to_string(), 5),
        WorkerError::Failed(_) | WorkerError::Stopped => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "model_unavailable",
            error.to_string(),
        ),
        WorkerError::Guard(GuardError::Engine(
            e @ aegis_engine::EngineError::BackendUnavailable { .. },
        )) => ApiError {
            code: "backend_unavailable",
            ..ApiError::busy(e.to_string(), BACKEND_RETRY_AFTER_S)
        },
        WorkerError::Guard(GuardError::EmptyText) => {
            ApiError::bad_request("empty_text", GuardError::EmptyText.to_string())
        }
        WorkerError::Guard(e @ GuardError::TooLong { .. }) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "text_too_long",
            e.to_string(),
        ),
        WorkerError::Guard(e) => {
            tracing::error!(error = %e, "guard failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "guard_failed",
                e.to_string(),
            )
        }
    }
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
            if let Some(problem) = probe_model(&state).await {
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

/// Asks the model whether it can answer now (a model server may have gone away since it was
/// connected); `None` when it can. Off the async threads: the probe blocks, briefly.
pub(crate) async fn probe_model(state: &AppState) -> Option<String> {
    let guard = state.worker.guard()?;
    match tokio::task::spawn_blocking(move || guard.model().probe()).await {
        Ok(Ok(())) => None,
        Ok(Err(problem)) => Some(problem.to_string()),
        Err(join) => Some(format!("the health probe failed: {join}")),
    }
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
    let id = state.moderation_ids.fetch_add(1, Ordering::Relaxed);
    Ok(Json(json!({
        "id": format!("modr-{id}"),
        "model": model,
        "results": results,
    })))
}

async fn validators(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let guard = state.worker.guard().ok_or_else(|| {
        worker_error(match state.worker.status() {
            ModelStatus::Failed(message) => WorkerError::Failed(message),
            _ => WorkerError::Loading,
        })
    })?;
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
