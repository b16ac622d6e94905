//! One error shape for every failure: `{"error": {"code", "message"}}` with a 4xx or 5xx status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use aegis_guard::GuardError;
use aegis_runtime::WorkerError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds, for 503 answers.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn busy(message: impl Into<String>, retry_after: u32) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
        }
    }
}

/// Every error's body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// Stable, for programs: `busy`, `too_many_turns`, `host_not_allowed`, ...
    code: &'static str,
    /// For people: what was wrong and what to do.
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// What a client is told to wait when the model server is down: about one retry cycle of its
/// client (connect timeout plus backoff), so a client does not hammer a server that is restarting.
const BACKEND_RETRY_AFTER_S: u32 = 5;

pub(crate) fn worker_error(error: WorkerError) -> ApiError {
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
        WorkerError::Panicked(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            error.to_string(),
        ),
        WorkerError::Guard(GuardError::EmptyText) => {
            ApiError::bad_request("empty_text", GuardError::EmptyText.to_string())
        }
        WorkerError::Guard(e @ GuardError::BadTurn { .. }) => {
            ApiError::bad_request("bad_turn", e.to_string())
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
