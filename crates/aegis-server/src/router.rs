//! The router: which endpoint answers where, and the layers every request passes through
//! (body limit, time limit, token, CORS, known callers, metrics), outermost last.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::ApiError;
use crate::state::AppState;

pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new()
        .route("/validate", post(crate::routes::validate))
        .route("/chat", post(crate::routes::chat))
        .route("/health", get(crate::status::health))
        .route("/v1/moderations", post(crate::moderation::moderations))
        .route("/validators", get(crate::status::validators))
        .route("/feedback", post(crate::feedback::feedback))
        .route("/openapi.json", get(crate::openapi::openapi))
        .route("/metrics", get(crate::metrics::metrics));
    if state.config.upstream.is_some() {
        router = router.route(
            "/v1/chat/completions",
            post(crate::completions::chat_completions),
        );
    }
    let mut router = router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::time_limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ));
    if !state.config.cors_origins.is_empty() {
        let allowed = if state.config.cors_origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            // `ServerConfig::check` refused the ones that are not header values.
            AllowOrigin::list(
                state
                    .config
                    .cors_origins
                    .iter()
                    .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok()),
            )
        };
        router = router.layer(
            CorsLayer::new()
                .allow_origin(allowed)
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    axum::http::header::CONTENT_TYPE,
                    axum::http::header::AUTHORIZATION,
                ]),
        );
    }
    // Outside CORS, so a page that is not allowed is refused before anything else runs.
    router = router.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        crate::trust::require_known_caller,
    ));
    // Outermost, so refused requests (401, 413, 503) are counted too.
    crate::metrics::install();
    router
        .layer(axum::middleware::from_fn(crate::metrics::track_requests))
        .with_state(state)
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
