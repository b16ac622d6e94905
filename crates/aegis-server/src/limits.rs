//! The time one request may take. Past it the handler is dropped, which cancels its place in the
//! worker's queue (the worker skips a job whose client is gone), and the client is told so.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

pub async fn time_limit(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let limit = state.config.request_timeout;
    // A shared-buffer copy, for the log line if the request runs out of time.
    let uri = request.uri().clone();
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                path = uri.path(),
                seconds = limit.as_secs_f32(),
                "a request ran out of time and was cancelled"
            );
            ApiError {
                retry_after: Some(5),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "timed_out",
                    format!(
                        "the request took longer than {} s and was cancelled; try again when the \
                         server is less busy, or with less text",
                        limit.as_secs()
                    ),
                )
            }
            .into_response()
        }
    }
}
