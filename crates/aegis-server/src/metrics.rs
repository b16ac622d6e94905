//! `GET /metrics` in the Prometheus text format, through the `metrics` facade and its Prometheus
//! exporter: requests by endpoint and status, verdict latency, verdicts per validator, check
//! failures by reason, queue depth and rejections, and the model's state.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use aegis_guard::Verdict;
use aegis_runtime::ModelStatus;

use crate::error::ApiError;
use crate::state::AppState;

/// Seconds: a short message on a GPU takes tens of milliseconds, a long one on a 2-core CPU or a
/// busy model server seconds.
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// The process's recorder, installed on first use. `None` when something else in the process
/// installed a recorder first (the facade allows one): then `/metrics` says so.
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let installed = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .and_then(|builder| builder.install_recorder());
            match installed {
                Ok(handle) => Some(handle),
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed; /metrics is off");
                    None
                }
            }
        })
        .as_ref()
}

/// Installs the recorder before the first request, so early counts are not lost, and says what
/// each series means (the `# HELP` lines).
pub fn install() {
    static DESCRIBED: OnceLock<()> = OnceLock::new();
    if prometheus().is_none() {
        return;
    }
    DESCRIBED.get_or_init(|| {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_counter!(
            "aegis_http_requests_total",
            "HTTP requests by route and status"
        );
        describe_histogram!(
            "aegis_http_request_duration_seconds",
            Unit::Seconds,
            "HTTP request time by route"
        );
        describe_histogram!(
            "aegis_verdict_latency_seconds",
            Unit::Seconds,
            "Time to a verdict on the model, queueing excluded"
        );
        describe_counter!(
            "aegis_validator_verdicts_total",
            "Verdicts per validator and outcome"
        );
        describe_counter!(
            "aegis_check_failures_total",
            "Checks that ended without a verdict, by reason"
        );
        describe_counter!(
            "aegis_queue_rejections_total",
            "Checks refused because the model's queue was full"
        );
        describe_gauge!("aegis_queue_depth", "Messages waiting for the model");
        describe_gauge!(
            "aegis_queue_size",
            "Messages that may wait before new ones are refused"
        );
        describe_gauge!("aegis_model_state", "1 for the model's current state");
        describe_gauge!(
            "aegis_model_info",
            "The model (or model server's) name, device and weights"
        );
    });
}

/// Counts every request by the route it matched (not its raw path: unbounded label values would
/// grow the series without limit) and its status, and times it.
pub async fn track_requests(request: Request, next: Next) -> Response {
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("aegis_http_requests_total", "endpoint" => endpoint.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("aegis_http_request_duration_seconds", "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    response
}

pub fn record_verdict(verdict: &Verdict) {
    metrics::histogram!("aegis_verdict_latency_seconds").record(verdict.latency_ms / 1e3);
    for result in &verdict.results {
        let outcome = if result.passed { "passed" } else { "failed" };
        metrics::counter!("aegis_validator_verdicts_total", "validator" => result.key.clone(), "outcome" => outcome)
            .increment(1);
    }
}

pub fn record_check_failure(error: &ApiError) {
    metrics::counter!("aegis_check_failures_total", "reason" => error.code).increment(1);
    if error.code == "busy" {
        metrics::counter!("aegis_queue_rejections_total").increment(1);
    }
}

/// Prometheus metrics: requests, verdict latency, verdicts per validator, failures, queue, model
/// state.
#[utoipa::path(get, path = "/metrics", responses(
    (status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain"),
    (status = 404, description = "Another metrics recorder is installed in this process (metrics_off)", body = crate::error::ErrorBody)))]
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let Some(handle) = prometheus() else {
        return ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "metrics_off",
            "another metrics recorder is installed in this process",
        )
        .into_response();
    };
    // Gauges are read now rather than kept up to date on every change.
    metrics::gauge!("aegis_queue_depth").set(state.worker.queued() as f64);
    metrics::gauge!("aegis_queue_size").set(state.worker.queue_size() as f64);
    let (state_name, info) = match state.worker.status() {
        ModelStatus::Loading => ("loading", None),
        ModelStatus::Failed(_) => ("failed", None),
        ModelStatus::Ready(info) => match state.probe_model().await {
            Some(_) => ("unavailable", Some(info)),
            None => ("ready", Some(info)),
        },
    };
    for candidate in ["loading", "ready", "unavailable", "failed"] {
        metrics::gauge!("aegis_model_state", "state" => candidate)
            .set(f64::from(u8::from(candidate == state_name)));
    }
    if let Some(info) = info {
        metrics::gauge!("aegis_model_info", "model" => info.id, "device" => info.device, "weights" => info.weight_format)
            .set(1.0);
    }
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}
