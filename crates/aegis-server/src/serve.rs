//! Serving the router on a listener, with the limits `axum::serve` does not set: a client must
//! send its headers within [`HEADER_READ_TIMEOUT`] (a slow-loris holds no connection open), every
//! request knows its peer's address, and shutdown ends within [`SHUTDOWN_GRACE`]: requests still
//! in flight then are cancelled, which drops their jobs from the worker's queue, and the log says
//! how many.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::state::AppState;

pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Connections still busy when the grace ran out, cancelled.
    pub cancelled: usize,
}

/// Answers on `listener` until `shutdown` resolves, then stops within [`SHUTDOWN_GRACE`].
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> Stopped {
    let app = crate::router(state);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // the listener itself is fine, so wait a moment rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            let app = app.clone();
            async move { Ok::<_, Infallible>(app.oneshot(request).await.unwrap_or_else(|e| match e {})) }
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        connections.spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(
        in_flight = connections.len(),
        grace_s = SHUTDOWN_GRACE.as_secs(),
        "stopping: no new connections, finishing the requests in flight"
    );
    let stopped = match tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await {
        Ok(()) => Stopped { cancelled: 0 },
        Err(_) => {
            while connections.try_join_next().is_some() {}
            let cancelled = connections.len();
            connections.abort_all();
            tracing::warn!(
                cancelled,
                "stopped: requests still in flight after the grace were cancelled"
            );
            Stopped { cancelled }
        }
    };
    while connections.join_next().await.is_some() {}
    if stopped.cancelled == 0 {
        tracing::info!("stopped: every request in flight was answered");
    }
    stopped
}
