//! `POST /feedback`: a prototype reports a verdict the guard got wrong, and it becomes a proposed
//! example: kept with the client's address, and trained on only once a reviewer accepts it (the
//! Teach view, `aegis examples accept`), since whoever can reach the API is not a reviewer.

use std::net::SocketAddr;
use std::sync::Arc;

use aegis_guard::{GuardError, Language};
use aegis_runtime::WorkerError;
use aegis_store::{Added, ExampleOrigin, NewExample};
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::error::{worker_error, ApiError};
use crate::json::ApiJson;
use crate::state::AppState;

/// Give `verdict_id` (a recorded verdict) or `text`, not both.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackRequest {
    /// The validator whose answer was wrong (GET /validators lists them).
    validator: String,
    /// The correct answer: `true` when the text violates the validator's policy.
    violates: bool,
    /// A recorded verdict, as history numbers it.
    #[serde(default, deserialize_with = "crate::json::whole_number")]
    #[schema(value_type = i64)]
    verdict_id: Option<i64>,
    /// The message: not empty or only whitespace.
    #[serde(default, deserialize_with = "crate::json::not_null")]
    #[schema(value_type = String)]
    text: Option<String>,
    /// `id` or `en`; when left out, detected from the text or taken from the recorded verdict.
    #[serde(default, deserialize_with = "crate::json::not_null")]
    #[schema(value_type = FeedbackLanguage)]
    lang: Option<String>,
}

/// The languages the guard reads (and trains on as groups).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) enum FeedbackLanguage {
    #[serde(rename = "id")]
    Indonesian,
    #[serde(rename = "en")]
    English,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FeedbackResponse {
    example_id: i64,
    validator: String,
    violates: bool,
    /// The same text and label were there: counted again.
    merged: bool,
    /// Always true: not trained on until a reviewer accepts it (the Teach view,
    /// `aegis examples accept`).
    pending: bool,
}

/// Report a verdict the guard got wrong: it becomes a proposed example, trained on once a
/// reviewer accepts it.
#[utoipa::path(post, path = "/feedback", request_body = FeedbackRequest, responses(
    (status = 201, description = "A new proposed example", body = FeedbackResponse),
    (status = 200, description = "The same text and label were there: counted again", body = FeedbackResponse),
    (status = 404, description = "No such verdict in history (verdict_not_found)", body = crate::error::ErrorBody),
    (status = 429, description = "The validator already holds the most proposals a reviewer has not accepted (too_many_pending)", body = crate::error::ErrorBody)))]

pub(crate) async fn feedback(
    State(state): State<Arc<AppState>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    ApiJson(request): ApiJson<FeedbackRequest>,
) -> Result<(StatusCode, Json<FeedbackResponse>), ApiError> {
    let store = state.store.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "history_off",
            "this server keeps no history, so it has nowhere to keep feedback",
        )
    })?;
    let guard = state.loaded_guard().map_err(worker_error)?;
    if guard.validator(&request.validator).is_none() {
        let known: Vec<&str> = guard.validators().iter().map(|v| v.key.as_str()).collect();
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_validator",
            format!(
                "no validator is called {:?}; these are: {}",
                request.validator,
                known.join(", ")
            ),
        ));
    }
    // Checked whichever way the text comes, so a body the description refuses is refused here.
    let language = match request.lang.as_deref() {
        None => None,
        // A cross-validation group when trained on: only the languages the guard knows.
        Some(code) => Some(Language::from_code(code).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_language",
                format!("lang {code:?} is not one the guard reads: use id or en, or leave it out"),
            )
        })?),
    };
    let (text, language) = match (request.verdict_id, request.text) {
        (Some(id), None) => {
            let detail = store.get(id).await.map_err(store_error)?.ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "verdict_not_found",
                    format!("no verdict {id} in this server's history"),
                )
            })?;
            let recorded = detail.row.language;
            (
                detail.row.text,
                language.map_or(recorded, |language| language.code().to_string()),
            )
        }
        (None, Some(text)) => {
            if text.trim().is_empty() {
                return Err(worker_error(WorkerError::Guard(GuardError::EmptyText)));
            }
            let language = language.unwrap_or_else(|| Language::detect(&text));
            (text, language.code().to_string())
        }
        _ => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                "give either verdict_id (a recorded verdict) or text, not both",
            ))
        }
    };
    // A client is no member: what it sends is proposed, whoever the team is.
    let added = store
        .add_example(
            "",
            &NewExample {
                validator: request.validator.clone(),
                text,
                violates: request.violates,
                language,
                origin: ExampleOrigin::Feedback,
                verdict_id: request.verdict_id,
                submitted_by: peer.map(|Extension(ConnectInfo(address))| address.ip().to_string()),
            },
        )
        .await
        .map_err(store_error)?;
    let status = match added {
        Added::New { .. } => StatusCode::CREATED,
        Added::Merged { .. } => StatusCode::OK,
    };
    Ok((
        status,
        Json(FeedbackResponse {
            example_id: added.id(),
            validator: request.validator,
            violates: request.violates,
            merged: matches!(added, Added::Merged { .. }),
            pending: true,
        }),
    ))
}

fn store_error(error: aegis_store::StoreError) -> ApiError {
    match error {
        aegis_store::StoreError::Invalid(message) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_example", message)
        }
        full @ aegis_store::StoreError::TooManyPending { .. } => ApiError {
            retry_after: Some(3600),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_pending",
                full.to_string(),
            )
        },
        other => {
            tracing::error!(error = %other, "keeping feedback failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "store_failed",
                other.to_string(),
            )
        }
    }
}
