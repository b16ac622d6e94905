//! The API with its model on a real llama.cpp server: verdicts while it serves, and when it goes
//! away, a degraded `/health` and 503 answers with `Retry-After` instead of failures or hangs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_remote::testing::LlamaServer;
use aegis_remote::RemoteModel;
use aegis_server::ServerConfig;
use serde_json::json;

use crate::common::start_on;

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_model_server_that_goes_away_is_reported_and_answered_with_503() {
    let llama = tokio::task::spawn_blocking(LlamaServer::start)
        .await
        .expect("join");
    let url = llama.url.clone();
    let connect_to = url.clone();
    let model = tokio::task::spawn_blocking(move || {
        RemoteModel::connect_with_cached_tokenizer(&connect_to)
    })
    .await
    .expect("join")
    .expect("connect");
    let server = start_on(Arc::new(model), ServerConfig::default(), 8).await;

    let health = server.get_json("/health").await;
    assert_eq!(health["status"], "healthy", "{health}");
    assert_eq!(health["model"]["state"], "ready", "{health}");
    assert_eq!(health["model"]["device"], "remote", "{health}");

    // The prompts decide, and the API says why.
    let validators = server.get_json("/validators").await;
    assert!(
        validators["heads_unavailable"]
            .as_str()
            .is_some_and(|r| r.contains(&url)),
        "{validators}"
    );
    for v in validators["validators"].as_array().expect("list") {
        assert_eq!(v["scored_by"], "prompt", "{v}");
    }

    let verdict = server
        .post_json(
            "/validate",
            &json!({"user_id": "u1", "question": "makasih kak"}),
        )
        .await;
    assert_eq!(
        verdict["execution_per_step"].as_array().map(Vec::len),
        Some(4),
        "{verdict}"
    );

    drop(llama);
    let health = server.get_json("/health").await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["model"]["state"], "unavailable", "{health}");
    assert!(
        health["model"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&url)),
        "{health}"
    );

    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(server.url("/validate"))
        .json(&json!({"user_id": "u1", "question": "makasih kak"}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "backend_unavailable", "{body}");
    // Two retries with 250 ms and 500 ms pauses against a refused connection: well under the
    // client's 60 s request timeout, which is what a hang would run into.
    assert!(started.elapsed() < Duration::from_secs(30));
}
