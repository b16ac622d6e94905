//! HTTP to the model server: one pooled client, a time limit on every request, and a few retries
//! with growing pauses where another try can help (no connection, a timeout, a 5xx answer).

use std::time::Duration;

use aegis_engine::EngineError;
use serde_json::Value;

/// Limits on talking to the server.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long one request may take, answer included.
    pub timeout: Duration,
    /// How long opening a connection may take before the server counts as down.
    pub connect_timeout: Duration,
    /// Tries after the first, for failures another try can mend.
    pub retries: u32,
    /// The pause before the first retry; each later one doubles it.
    pub backoff: Duration,
    /// Let llama.cpp's server reuse what it has cached of a prompt (a shared template opening),
    /// for scores and generation alike.
    /// Off, every prompt is computed from its first token: slower, but a score no longer depends
    /// on what the server computed before (its rounding differs with how a prompt is split).
    pub reuse_server_cache: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            retries: 2,
            backoff: Duration::from_millis(250),
            reuse_server_cache: true,
        }
    }
}

pub(crate) struct Client {
    http: reqwest::Client,
    url: String,
    options: ClientOptions,
}

/// The longest `Retry-After` a request waits for before the next try.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// One failed try, and whether another may succeed.
struct Failure {
    message: String,
    transient: bool,
    /// How long the server asked to be left alone (`Retry-After` in seconds), where it did.
    retry_after: Option<Duration>,
}

impl Client {
    pub fn new(url: &str, options: ClientOptions) -> Result<Self, EngineError> {
        let url = url.trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| EngineError::Backend {
                url: url.clone(),
                message: e.to_string(),
            })?;
        Ok(Self { http, url, options })
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// An error about this server.
    pub fn error(&self, message: impl Into<String>) -> EngineError {
        EngineError::Backend {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    /// One quick try at `path` (no retries, a short timeout), for health checks.
    pub async fn probe(&self, path: &str) -> Result<(), EngineError> {
        let unavailable = |message: String| EngineError::BackendUnavailable {
            url: self.url.clone(),
            message,
        };
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .timeout(self.options.connect_timeout)
            .send()
            .await
            .map_err(|e| unavailable(describe(&e, &self.options)))?;
        match response.status() {
            status if status.is_success() => Ok(()),
            status => Err(unavailable(format!("{path} answered {status}"))),
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value, EngineError> {
        self.send(path, None)
            .await?
            .ok_or_else(|| self.error(format!("{path} is not found there")))
    }

    /// `get`, with `None` where the server has no such path (a 404).
    pub async fn get_optional(&self, path: &str) -> Result<Option<Value>, EngineError> {
        self.send(path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, EngineError> {
        self.send(path, Some(body))
            .await?
            .ok_or_else(|| self.error(format!("{path} is not found there")))
    }

    /// `post`, with `None` where the server has no such path (a 404).
    pub async fn post_optional(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<Option<Value>, EngineError> {
        self.send(path, Some(body)).await
    }

    async fn send(&self, path: &str, body: Option<&Value>) -> Result<Option<Value>, EngineError> {
        let mut pause = self.options.backoff;
        let mut tries_left = self.options.retries;
        loop {
            match self.try_once(path, body).await {
                Ok(answer) => return Ok(answer),
                Err(failure) if failure.transient && tries_left > 0 => {
                    tracing::warn!(url = %self.url, path, problem = %failure.message, "model server request failed; retrying");
                    // A busy server's own estimate wins over ours, within reason.
                    let wait = failure
                        .retry_after
                        .map_or(pause, |asked| asked.clamp(pause, MAX_RETRY_AFTER));
                    tokio::time::sleep(wait).await;
                    pause *= 2;
                    tries_left -= 1;
                }
                Err(failure) if failure.transient => {
                    return Err(EngineError::BackendUnavailable {
                        url: self.url.clone(),
                        message: format!("{path}: {}", failure.message),
                    })
                }
                Err(failure) => return Err(self.error(format!("{path}: {}", failure.message))),
            }
        }
    }

    async fn try_once(&self, path: &str, body: Option<&Value>) -> Result<Option<Value>, Failure> {
        let address = format!("{}{path}", self.url);
        let request = match body {
            Some(body) => self.http.post(&address).json(body),
            None => self.http.get(&address),
        };
        let response = request.send().await.map_err(|e| Failure {
            message: describe(&e, &self.options),
            transient: e.is_connect() || e.is_timeout() || e.is_request(),
            retry_after: None,
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response.text().await.map_err(|e| Failure {
            message: describe(&e, &self.options),
            transient: e.is_timeout(),
            retry_after: None,
        })?;
        if !status.is_success() {
            let shown: String = text.chars().take(300).collect();
            return Err(Failure {
                message: format!("answered {status}: {shown}"),
                // Too many requests: a busy server, not a refusal.
                transient: status.is_server_error()
                    || status == reqwest::StatusCode::TOO_MANY_REQUESTS,
                retry_after,
            });
        }
        serde_json::from_str(&text).map(Some).map_err(|e| Failure {
            message: format!("answered with something other than JSON ({e})"),
            transient: false,
            retry_after: None,
        })
    }
}

fn describe(error: &reqwest::Error, options: &ClientOptions) -> String {
    if error.is_connect() {
        "nothing answers there (is the server running?)".into()
    } else if error.is_timeout() {
        format!("no answer within {:.0?}", options.timeout)
    } else {
        error.to_string()
    }
}
