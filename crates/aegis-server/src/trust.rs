//! Which callers the server answers at all, decided before the body is read: the `Host` a request
//! names and, from a browser, the `Origin` of the page that sent it.
//!
//! A page on `attacker.example` can make its own name resolve to 127.0.0.1 (DNS rebinding) and
//! then reach this loopback server as its own origin; the browser still sends `Host:
//! attacker.example`. So, like Jupyter and Ollama, a request whose host is a name must name this
//! machine (`localhost`, `*.localhost`) or one the operator configured. An IP literal cannot be
//! rebound, so it is accepted. A browser request from a page whose origin is not configured is
//! refused whatever its host, so no web page can write feedback (training data) or spend the
//! model's time.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

pub async fn require_known_caller(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = check(&state.config, &request) {
        tracing::warn!(
            code = refused.code,
            reason = %refused.message,
            "refused a request before reading it"
        );
        return refused.into_response();
    }
    next.run(request).await
}

fn check(config: &crate::ServerConfig, request: &Request) -> Result<(), ApiError> {
    // HTTP/1.1 names the host in its header, HTTP/2 in the request's authority.
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Some(host) = host {
        let name = host_name(host);
        if !host_allowed(name, &config.allowed_hosts) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                format!(
                    "this server does not answer for host {name:?}: use 127.0.0.1 or localhost, \
                     or start it with --allowed-host {name}"
                ),
            ));
        }
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !origin_allowed(origin, &config.cors_origins) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "requests from pages at {origin:?} are refused: start the server with \
                     --cors-origin {origin} to let that page call it"
                ),
            ));
        }
    }
    Ok(())
}

/// The name part of a `Host` value: without its port, and without the brackets of an IPv6 literal.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

fn host_allowed(name: &str, configured: &[String]) -> bool {
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    // Browsers resolve every *.localhost to this machine themselves (RFC 6761), so no one else
    // can own such a name.
    name == "localhost"
        || name.ends_with(".localhost")
        || configured.iter().any(|c| c.eq_ignore_ascii_case(&name))
}

fn origin_allowed(origin: &str, configured: &[String]) -> bool {
    configured
        .iter()
        .any(|c| c == "*" || c.trim_end_matches('/').eq_ignore_ascii_case(origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_name_drops_its_port_and_brackets() {
        assert_eq!(host_name("127.0.0.1:8000"), "127.0.0.1");
        assert_eq!(host_name("localhost"), "localhost");
        assert_eq!(host_name("[::1]:8000"), "::1");
        assert_eq!(host_name("attacker.example:80"), "attacker.example");
    }

    #[test]
    fn names_must_be_this_machine_or_configured_and_ip_literals_pass() {
        let none: Vec<String> = Vec::new();
        for allowed in [
            "127.0.0.1",
            "::1",
            "localhost",
            "LOCALHOST.",
            "app.localhost",
            "10.0.0.5",
        ] {
            assert!(host_allowed(allowed, &none), "{allowed}");
        }
        for refused in [
            "attacker.example",
            "localhost.attacker.example",
            "mylocalhost",
            "",
        ] {
            assert!(!host_allowed(refused, &none), "{refused}");
        }
        assert!(host_allowed(
            "guard.internal",
            &["Guard.Internal".to_string()]
        ));
    }

    #[test]
    fn an_origin_passes_only_when_configured() {
        let configured = vec!["http://localhost:5173/".to_string()];
        assert!(origin_allowed("http://localhost:5173", &configured));
        assert!(!origin_allowed("http://attacker.example", &configured));
        assert!(!origin_allowed("null", &configured));
        assert!(!origin_allowed("http://localhost:5173", &[]));
        assert!(origin_allowed("https://any.example", &["*".to_string()]));
    }
}
