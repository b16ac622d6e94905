//! The local HTTP API over a shared guard and history: the original service's `/validate`,
//! `/chat` and `/health`, an OpenAI-compatible `/v1/moderations`, `/validators`, `/feedback`, Prometheus
//! `/metrics`, an OpenAPI description, and with an upstream, OpenAI's `/v1/chat/completions`
//! guarded as it streams. A library: `aegis serve` and the desktop app mount the same router.

mod auth;
mod completions;
mod error;
mod feedback;
mod json;
mod limits;
mod metrics;
mod moderation;
mod openapi;
mod router;
mod routes;
mod serve;
mod state;
mod status;
mod trust;

pub use error::ApiError;
pub use router::router;
pub use serve::{serve, Stopped, SHUTDOWN_GRACE};
pub use state::{AppState, ConfigError, ServerConfig};
