//! One error shape for every failure: `{"error": {"code", "message"}}` with a 4xx or 5xx status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use aegis_guard::{ErrorKind, GuardError};
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

/// The answer to a failed check: its status from the error's kind (the same kind the window and
/// the CLI read), its code naming what exactly went wrong.
pub(crate) fn worker_error(error: WorkerError) -> ApiError {
    let message = error.to_string();
    match error.kind() {
        ErrorKind::Busy => ApiError::busy(message, 1),
        ErrorKind::Loading => ApiError::busy(message, 5),
        ErrorKind::Unavailable => ApiError {
            code: "backend_unavailable",
            ..ApiError::busy(message, BACKEND_RETRY_AFTER_S)
        },
        ErrorKind::Invalid => match error {
            WorkerError::Guard(GuardError::TooLong { .. }) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "text_too_long", message)
            }
            WorkerError::Guard(GuardError::BadTurn { .. }) => {
                ApiError::bad_request("bad_turn", message)
            }
            WorkerError::Guard(GuardError::EmptyText) => {
                ApiError::bad_request("empty_text", message)
            }
            _ => ApiError::bad_request("invalid_request", message),
        },
        _ => match error {
            WorkerError::Failed(_) | WorkerError::Stopped => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "model_unavailable",
                message,
            ),
            WorkerError::Panicked(_) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
            }
            _ => {
                tracing::error!(error = %message, "guard failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "guard_failed", message)
            }
        },
    }
}
