//! What the server holds: `GET /health` (is it running, what is its model doing) and
//! `GET /validators` (the loaded validators and what scores each).

use std::sync::Arc;

use aegis_engine::SYNTHETIC_WARNING;
use aegis_runtime::ModelStatus;
use axum::extract::State;
use axum::Json;
use serde::Serialize;

use crate::error::{worker_error, ApiError};
use crate::state::AppState;

/// Whether the server runs and what its model is doing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// `healthy`, or `degraded` when the model failed or cannot answer.
    status: &'static str,
    message: &'static str,
    model: ModelHealth,
}

#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub(crate) struct ModelHealth {
    state: ModelState,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// `cpu` or `cuda:N`.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<String>,
    /// `f32`, `bf16` or `quantized`.
    #[serde(skip_serializing_if = "Option::is_none")]
    weights: Option<String>,
    /// Random weights for speed tests: verdicts mean nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    synthetic: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ModelState {
    #[default]
    Loading,
    Ready,
    /// Loaded, but its server does not answer now.
    Unavailable,
    Failed,
}

/// Liveness and the model's state; never needs the token.
#[utoipa::path(get, path = "/health", responses((status = 200, description = "Running", body = Health)))]
pub(crate) async fn health(State(state): State<Arc<AppState>>) -> Json<Health> {
    let model = match state.worker.status() {
        ModelStatus::Loading => ModelHealth::default(),
        ModelStatus::Ready(info) => {
            let mut model = ModelHealth {
                state: ModelState::Ready,
                id: Some(info.id),
                device: Some(info.device),
                weights: Some(info.weight_format.to_string()),
                synthetic: info.synthetic,
                warning: info.synthetic.then_some(SYNTHETIC_WARNING),
                error: None,
            };
            if let Some(problem) = state.probe_model().await {
                model.state = ModelState::Unavailable;
                model.error = Some(problem);
            }
            model
        }
        ModelStatus::Failed(error) => ModelHealth {
            state: ModelState::Failed,
            error: Some(error),
            ..ModelHealth::default()
        },
    };
    Json(Health {
        status: match model.state {
            ModelState::Loading | ModelState::Ready => "healthy",
            ModelState::Unavailable | ModelState::Failed => "degraded",
        },
        message: "Guardian Validation API is running",
        model,
    })
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Validators {
    validators: Vec<ValidatorInfo>,
    /// Why learned heads are not used, when they are not (the prompt's score decides).
    #[serde(skip_serializing_if = "Option::is_none")]
    heads_unavailable: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ValidatorInfo {
    key: String,
    name: String,
    description: String,
    threshold: f32,
    content_hash: String,
    scored_by: ScoredBy,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScoredBy {
    /// A learned head decides.
    Head,
    /// The prompt's P(Yes) decides.
    Prompt,
}

/// The loaded validators, in the order they run.
#[utoipa::path(get, path = "/validators",
    responses((status = 200, description = "The loaded validators", body = Validators)))]
pub(crate) async fn validators(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Validators>, ApiError> {
    let guard = state.loaded_guard().map_err(worker_error)?;
    let validators = guard
        .validators()
        .iter()
        .zip(guard.heads())
        .map(|(v, head)| ValidatorInfo {
            key: v.key.clone(),
            name: v.name.clone(),
            description: v.description.clone(),
            threshold: v.threshold,
            content_hash: v.content_hash.clone(),
            scored_by: if head.is_some() {
                ScoredBy::Head
            } else {
                ScoredBy::Prompt
            },
        })
        .collect();
    // Heads on a sentence encoder run here whatever serves the model.
    let heads_unavailable =
        aegis_guard::heads_unavailable(guard.model().info()).filter(|_| guard.encoder().is_none());
    Ok(Json(Validators {
        validators,
        heads_unavailable,
    }))
}
