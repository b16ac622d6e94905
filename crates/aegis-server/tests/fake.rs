//! A model that answers at once without weights, for the requests whose answer does not depend
//! on a verdict (bad input, authentication). Verdicts themselves come from the real model.

use std::path::Path;
use std::sync::Arc;

use aegis_engine::{EngineError, LanguageModel, ModelInfo, Prompt, Scored, Scores, Segment};
use aegis_guard::Guard;
use aegis_runtime::Worker;
use aegis_server::{router, AppState, ServerConfig};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

/// Counts a word as a token; every prompt that fits scores 0.01 (passes).
struct InstantModel {
    info: ModelInfo,
}

/// Words a message may have: small, so "too long" is cheap to reach.
const CONTEXT_WORDS: usize = 512;

impl LanguageModel for InstantModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn count_user_tokens(&self, text: &str) -> aegis_engine::Result<usize> {
        Ok(text.split_whitespace().count())
    }
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> aegis_engine::Result<usize> {
        Ok(prompt
            .iter()
            .map(|s| match s {
                Segment::Template(t) | Segment::User(t) => t.split_whitespace().count(),
            })
            .sum())
    }
    fn score(&self, prompts: &[Prompt]) -> aegis_engine::Result<Scores> {
        let answers = prompts
            .iter()
            .map(|prompt| {
                let tokens = self.count_prompt_tokens(prompt)?;
                if tokens > CONTEXT_WORDS {
                    return Err(EngineError::ContextExceeded {
                        prompt_tokens: tokens,
                        limit: CONTEXT_WORDS,
                    });
                }
                Ok(Scored {
                    p_yes: 0.01,
                    elapsed_ms: 0.0,
                })
            })
            .collect::<aegis_engine::Result<_>>()?;
        Ok(Scores { answers })
    }
    fn generate(
        &self,
        _: &[Segment],
        _: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> aegis_engine::Result<String> {
        on_text("Maaf.");
        Ok("Maaf.".into())
    }
}

/// The API's router on the shipped templates and the instant model, with no history.
pub async fn instant_router(config: ServerConfig) -> axum::Router {
    let model = Arc::new(InstantModel {
        info: ModelInfo {
            id: "instant".into(),
            content_hash: "0".repeat(64),
            device: "cpu".into(),
            weight_format: "none".into(),
            context_length: CONTEXT_WORDS,
            layers: 1,
            synthetic: false,
        },
    });
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
