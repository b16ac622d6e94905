use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use aegis_engine::{GemmaEngine, LanguageModel};
use aegis_guard::Guard;
use aegis_runtime::Worker;
use aegis_server::{AppState, ServerConfig};
use aegis_store::Store;
use serde_json::Value;

/// The default model, loaded once for the whole test binary.
pub fn engine() -> Arc<GemmaEngine> {
    aegis_engine::testing::default_engine().clone()
}

pub struct TestServer {
    pub base: String,
    pub store: Arc<Store>,
    /// The history the server records in, on the engine the test script asks for.
    pub _history: aegis_scratch_db::ScratchDatabase,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path`; the JSON answer, whatever its status.
    pub async fn get_json(&self, path: &str) -> Value {
        let response = reqwest::get(self.url(path)).await.expect("send");
        response.json().await.expect("a JSON body")
    }

    /// POST `body` to `path`; the JSON answer, whatever its status.
    pub async fn post_json(&self, path: &str, body: &Value) -> Value {
        let response = reqwest::Client::new()
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("send");
        response.json().await.expect("a JSON body")
    }
}

pub async fn start(config: ServerConfig, queue: usize) -> TestServer {
    start_on(engine(), config, queue).await
}

/// The server with the shipped templates on `model`.
pub async fn start_on(
    model: Arc<dyn LanguageModel>,
    config: ServerConfig,
    queue: usize,
) -> TestServer {
    let history = aegis_scratch_db::ScratchDatabase::new().await;
    let store = Arc::new(Store::connect(&history.database).await.expect("store"));
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard");
    let worker = Worker::start(queue, move || {
        Guard::from_dir(model, &prompts)
            .map(|(guard, _)| guard)
            .map_err(|e| e.to_string())
    });
    let state = Arc::new(AppState::new(worker.clone(), Some(store.clone()), config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address: SocketAddr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        aegis_server::serve(listener, state, std::future::pending()).await;
    });
    // Ready when the model is.
    worker.settled().await;
    TestServer {
        base: format!("http://{address}"),
        store,
        _history: history,
    }
}
