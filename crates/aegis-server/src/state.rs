//! What every handler and middleware shares: the server's configuration, the worker and the
//! history store. Routes, auth and metrics all read it; it reads none of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aegis_guard::Guard;
use aegis_runtime::{ModelStatus, Worker, WorkerError};
use aegis_store::Store;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// When set, every endpoint but `/health` needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub max_body_bytes: usize,
    /// Origins of pages allowed to call the server (CORS, and the `Origin` check); `*` allows any
    /// page. Empty: browsers' cross-origin requests are refused.
    pub cors_origins: Vec<String>,
    /// Host names the server answers for besides `localhost` and IP literals (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// How long one request may take, generation included; past it the client gets 503 and its
    /// work is cancelled.
    pub request_timeout: Duration,
    /// Turns one request may carry, and how many of them `"turns": "all"` may check.
    pub max_turns: usize,
    pub max_checked_turns: usize,
    /// The longest answer `/chat` with `"answer": true` writes, in tokens.
    pub answer_tokens: usize,
    /// The chat server `/v1/chat/completions` relays to, through the guard; without one that
    /// endpoint is not served.
    pub upstream: Option<aegis_upstream::Upstream>,
}

impl ServerConfig {
    /// Refuses a configuration the server could not honour, with what to change.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ConfigError::BlankToken);
        }
        for origin in &self.cors_origins {
            let well_formed = origin == "*"
                || ((origin.starts_with("http://") || origin.starts_with("https://"))
                    && axum::http::HeaderValue::from_str(origin).is_ok());
            if !well_formed {
                return Err(ConfigError::BadOrigin(origin.clone()));
            }
        }
        if self.max_checked_turns == 0 || self.max_turns < self.max_checked_turns {
            return Err(ConfigError::TurnLimits {
                turns: self.max_turns,
                checked: self.max_checked_turns,
            });
        }
        if !(1..=MAX_ANSWER_TOKENS).contains(&self.answer_tokens) {
            return Err(ConfigError::AnswerTokens(self.answer_tokens));
        }
        Ok(())
    }
}

/// Longer answers hold the model's thread for minutes on a CPU; a prototype wanting essays
/// wants another endpoint.
pub const MAX_ANSWER_TOKENS: usize = 2048;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("the token is blank: give a token of visible characters, or none")]
    BlankToken,
    #[error("{0:?} is not an origin: write scheme and host, e.g. http://localhost:5173, or * for any page")]
    BadOrigin(String),
    #[error("turn limits {turns} per request and {checked} checked do not fit: checked must be at least 1 and at most the turns")]
    TurnLimits { turns: usize, checked: usize },
    #[error("an answer of {0} tokens: give 1 to {MAX_ANSWER_TOKENS}")]
    AnswerTokens(usize),
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            token: None,
            max_body_bytes: 64 * 1024,
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            request_timeout: Duration::from_secs(120),
            max_turns: 256,
            max_checked_turns: 32,
            answer_tokens: aegis_runtime::ANSWER_TOKENS,
            upstream: None,
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

    /// Asks the model, and the heads' encoder, whether they can answer now (a model or encoder
    /// server may have gone away since it was connected); `None` when they can. Off the async
    /// threads: the probes block, briefly.
    pub(crate) async fn probe_model(&self) -> Option<String> {
        let guard = self.worker.guard()?;
        let probe = move || {
            guard.model().probe()?;
            guard.encoder().map_or(Ok(()), |encoder| encoder.probe())
        };
        match tokio::task::spawn_blocking(probe).await {
            Ok(Ok(())) => None,
            Ok(Err(problem)) => Some(problem.to_string()),
            Err(join) => Some(format!("the health probe failed: {join}")),
        }
    }
}
