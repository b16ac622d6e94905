//! The router on a fake model that answers at once, for the requests whose answer does not
//! depend on a verdict (bad input, authentication). Verdicts themselves come from the real model.

use std::path::Path;
use std::sync::Arc;

use aegis_engine::testing::FakeModel;
use aegis_guard::Guard;
use aegis_runtime::Worker;
use aegis_server::{router, AppState, ServerConfig};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

/// The API's router on the shipped templates and a fake model, with no history.
pub async fn fake_router(config: ServerConfig) -> axum::Router {
    fake_router_on(FakeModel::new(vec![]), config).await
}

/// [`fake_router`] on a fake model set up by the test.
pub async fn fake_router_on(mut model: FakeModel, config: ServerConfig) -> axum::Router {
    // Room for the shipped templates (a word is a token here), not for 5,000 words.
    model.info.context_length = 2048;
    let model = Arc::new(model);
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard");
    let worker = Worker::start(8, move || {
        Guard::from_dir(model, &prompts)
            .map(|(guard, _)| guard)
            .map_err(|e| e.to_string())
    });
    worker.settled().await;
    router(Arc::new(AppState::new(worker, None, config)))
}

/// One request through the router, without a socket: its status and JSON body.
pub async fn send(router: &axum::Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub fn post(path: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", content_type)
        .body(body.into())
        .expect("request")
}
