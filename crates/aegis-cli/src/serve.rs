//! `aegis serve`: the local HTTP API.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use aegis_runtime::Worker;
use aegis_server::{router, AppState, ServerConfig};
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
    /// Bearer token every endpoint but /health requires.
    #[arg(long, env = "AEGIS_TOKEN")]
    pub token: Option<String>,
    /// Requests that may wait for the model; more get 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_body: usize,
    /// Origin allowed by CORS (repeatable); none turns CORS off.
    #[arg(long = "cors-origin")]
    pub cors_origins: Vec<String>,
    /// Do not record verdicts in history.
    #[arg(long)]
    pub no_history: bool,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
}

pub fn run(args: ServeArgs) -> Result<ExitStatus> {
    if !args.host.is_loopback() && args.token.as_deref().is_none_or(str::is_empty) {
        bail!(
            "binding {} exposes the guard beyond this machine: give --token (or AEGIS_TOKEN)",
            args.host
        );
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let store = if args.no_history {
            None
        } else {
            Some(Arc::new(args.db.open().await?))
        };
        let address = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let guard_args = args.guard;
        // The model loads on its own thread while the server already answers /health.
        let worker = Worker::start(args.queue, move || {
            guard_args.load().map_err(|e| format!("{e:#}"))
        });
        let state = Arc::new(AppState::new(
            worker,
            store.clone(),
            ServerConfig {
                token: args.token,
                max_body_bytes: args.max_body,
                cors_origins: args.cors_origins,
            },
        ));
        eprintln!("listening on http://{}", listener.local_addr()?);
        axum::serve(listener, router(state))
            .with_graceful_shutdown(shutdown_signal())
            .await?;
        eprintln!("stopped: in-flight requests answered");
        if let Some(store) = store {
            if let Ok(store) = Arc::try_unwrap(store) {
                store.close().await;
            }
        }
        Ok(ExitStatus::Passed)
    })
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
