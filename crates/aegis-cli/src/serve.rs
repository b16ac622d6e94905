//! `aegis serve`: the local HTTP API.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aegis_runtime::Worker;
use aegis_server::{AppState, ServerConfig};
use anyhow::{bail, Context, Result};

use crate::history_cmd::DbArgs;
use crate::options::GuardArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to bind. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Bearer token every endpoint but /health requires. Visible to other users in `ps`: prefer
    /// --token-file or AEGIS_TOKEN.
    #[arg(
        long,
        env = "AEGIS_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// A file whose first line is the bearer token.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Requests that may wait for the model; more get 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_body: usize,
    /// Origin of a web page allowed to call the server (repeatable; `*` for any page). Without
    /// one, browsers' requests from pages are refused.
    #[arg(long = "cors-origin")]
    pub cors_origins: Vec<String>,
    /// Host name the server answers for besides localhost and IP addresses (repeatable): the
    /// name clients use when it is reached through DNS. Guards against DNS rebinding.
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Seconds one request may take, answer generation included; past it, 503 and cancelled.
    #[arg(long, default_value_t = 120)]
    pub request_timeout: u64,
    /// The longest answer `/chat` with "answer": true writes, in tokens (1 to 2048).
    #[arg(long, default_value_t = aegis_runtime::ANSWER_TOKENS)]
    pub answer_tokens: usize,
    /// An OpenAI-compatible chat server (llama.cpp, vLLM, Ollama, a hosted API): its root or its
    /// `/v1` base. With it, POST /v1/chat/completions relays chats to it through the guard.
    #[arg(long)]
    pub upstream: Option<String>,
    /// A file whose first line is the upstream's API key (or AEGIS_UPSTREAM_KEY); sent to the
    /// upstream only, never logged.
    #[arg(long, requires = "upstream")]
    pub upstream_key_file: Option<PathBuf>,
    /// Do not record verdicts in history.
    #[arg(long)]
    pub no_history: bool,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
}

pub fn run(args: ServeArgs) -> Result<ExitStatus> {
    let token = match &args.token_file {
        Some(path) => Some(read_token_file(path)?),
        None => args.token.clone(),
    };
    if !args.host.is_loopback() && token.is_none() {
        bail!(
            "binding {} exposes the guard beyond this machine: give --token-file (or AEGIS_TOKEN)",
            args.host
        );
    }
    let upstream = match &args.upstream {
        None => None,
        Some(url) => {
            let key = match &args.upstream_key_file {
                Some(path) => Some(read_token_file(path)?),
                None => std::env::var("AEGIS_UPSTREAM_KEY").ok(),
            };
            Some(aegis_upstream::Upstream::new(url, key).context("--upstream")?)
        }
    };
    let config = ServerConfig {
        token,
        upstream,
        max_body_bytes: args.max_body,
        cors_origins: args.cors_origins.clone(),
        allowed_hosts: args.allowed_hosts.clone(),
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        answer_tokens: args.answer_tokens,
        ..ServerConfig::default()
    };
    config.check()?;
    if let Some(upstream) = &config.upstream {
        eprintln!("relaying /v1/chat/completions to {}", upstream.endpoint());
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let served = runtime.block_on(async move {
        let store = if args.no_history {
            None
        } else {
            Some(Arc::new(args.db.open().await?))
        };
        let address = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let (guard_args, db) = (args.guard, args.db);
        // The model loads on its own thread while the server already answers /health.
        let worker = Worker::start(args.queue, move || {
            guard_args.load(&db).map_err(|e| format!("{e:#}"))
        });
        let state = Arc::new(AppState::new(worker, store.clone(), config));
        eprintln!("listening on http://{}", listener.local_addr()?);
        let stopped = aegis_server::serve(listener, state, shutdown_signal()).await;
        if stopped.cancelled == 0 {
            eprintln!("stopped: in-flight requests answered");
        } else {
            eprintln!(
                "stopped: {} request(s) still running after {} s were cancelled",
                stopped.cancelled,
                aegis_server::SHUTDOWN_GRACE.as_secs()
            );
        }
        // Cancelled requests may still hold the store; what it wrote is committed already.
        if let Some(store) = store.and_then(|s| Arc::try_unwrap(s).ok()) {
            store.close().await;
        }
        Ok(ExitStatus::Passed)
    });
    // Work still on blocking threads (a generation that was cancelled mid-way) does not hold
    // the process: the grace is over.
    runtime.shutdown_timeout(Duration::from_millis(500));
    served
}

/// The token from the first line of `path`, refused when blank.
fn read_token_file(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        bail!(
            "the token file {} is empty: write the token on its first line",
            path.display()
        );
    }
    Ok(token.to_string())
}

/// SIGINT or SIGTERM: stop accepting, finish what is in flight.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
