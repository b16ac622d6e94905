//! The HTTP API (the original service's endpoints and more) running inside the app, on the same
//! model worker and history as the window.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use aegis_runtime::Worker;
use aegis_server::{AppState, ServerConfig};
use aegis_store::Store;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::error::ConsoleError;
use crate::settings::HttpSettings;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct HttpStatus {
    pub running: bool,
    /// `http://host:port` while running.
    pub address: Option<String>,
}

#[derive(Default)]
pub struct HttpServer {
    running: Option<Running>,
}

struct Running {
    settings: HttpSettings,
    address: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Refuses settings that would expose the guard without a token.
pub fn validate(http: &HttpSettings) -> Result<IpAddr, ConsoleError> {
    let ip: IpAddr = http.host.trim().parse().map_err(|_| {
        ConsoleError::Invalid(format!(
            "host {:?} is not an IP address (use 127.0.0.1 for this machine only)",
            http.host
        ))
    })?;
    if !ip.is_loopback() && http.token.trim().is_empty() {
        return Err(ConsoleError::Invalid(format!(
            "serving on {ip} lets other machines in: set a token first"
        )));
    }
    if http.port == 0 {
        return Err(ConsoleError::Invalid(
            "choose a port between 1 and 65535".into(),
        ));
    }
    Ok(ip)
}

impl HttpServer {
    /// Runs with these settings: starts, restarts when they changed, or leaves it be.
    pub async fn ensure(
        &mut self,
        http: &HttpSettings,
        worker: Worker,
        store: Arc<Store>,
    ) -> Result<(), ConsoleError> {
        if self.running.as_ref().is_some_and(|r| r.settings == *http) {
            return Ok(());
        }
        self.stop().await;
        let ip = validate(http)?;
        let address = SocketAddr::new(ip, http.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| ConsoleError::Invalid(format!("cannot listen on {address}: {e}")))?;
        let address = listener.local_addr().unwrap_or(address);
        let config = ServerConfig {
            token: Some(http.token.trim().to_string()).filter(|t| !t.is_empty()),
            upstream: http.upstream()?,
            ..ServerConfig::default()
        };
        let state = Arc::new(AppState::new(worker, Some(store), config));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            aegis_server::serve(listener, state, shutdown).await;
        });
        tracing::info!(%address, "HTTP endpoint listening");
        self.running = Some(Running {
            settings: http.clone(),
            address,
            stop,
            task,
        });
        Ok(())
    }

    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop.send(());
            let _ = running.task.await;
            tracing::info!(address = %running.address, "HTTP endpoint stopped");
        }
    }

    pub fn status(&self) -> HttpStatus {
        HttpStatus {
            running: self.running.is_some(),
            address: self
                .running
                .as_ref()
                .map(|r| format!("http://{}", r.address)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_host_needs_a_token() {
        let mut http = HttpSettings {
            host: "0.0.0.0".into(),
            ..HttpSettings::default()
        };
        assert!(validate(&http).is_err());
        http.token = "s3cret".into();
        assert!(validate(&http).is_ok());
        http.host = "localhost:80".into();
        assert!(validate(&http).is_err());
        assert!(validate(&HttpSettings::default()).is_ok());
    }
}
