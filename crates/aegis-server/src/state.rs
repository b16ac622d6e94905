//! What every handler and middleware shares: the server's configuration, the worker and the
//! history store. Routes, auth and metrics all read it; it reads none of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aegis_guard::Guard;
use aegis_runtime::{ModelStatus, Worker, WorkerError};
use aegis_store::Store;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// When set, every endpoint but `/health` needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub max_body_bytes: usize,
    /// Origins allowed by CORS; empty turns CORS off.
    pub cors_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            token: None,
            max_body_bytes: 64 * 1024,
            cors_origins: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub struct AppState {
    pub worker: Worker,
    pub store: Option<Arc<Store>>,
    pub config: ServerConfig,
    moderation_ids: AtomicU64,
}

impl AppState {
    pub fn new(worker: Worker, store: Option<Arc<Store>>, config: ServerConfig) -> Self {
        Self {
            worker,
            store,
            config,
            moderation_ids: AtomicU64::new(0),
        }
    }

    /// The next id for a `/v1/moderations` answer.
    pub(crate) fn next_moderation_id(&self) -> u64 {
        self.moderation_ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The loaded guard, or why there is none yet.
    pub(crate) fn loaded_guard(&self) -> Result<Arc<Guard>, WorkerError> {
        self.worker
            .guard()
            .ok_or_else(|| match self.worker.status() {
                ModelStatus::Failed(message) => WorkerError::Failed(message),
                _ => WorkerError::Loading,
            })
    }

    /// Asks the model whether it can answer now (a model server may have gone away since it was
    /// connected); `None` when it can. Off the async threads: the probe blocks, briefly.
    pub(crate) async fn probe_model(&self) -> Option<String> {
        let guard = self.worker.guard()?;
        match tokio::task::spawn_blocking(move || guard.model().probe()).await {
            Ok(Ok(())) => None,
            Ok(Err(problem)) => Some(problem.to_string()),
            Err(join) => Some(format!("the health probe failed: {join}")),
        }
    }
}
