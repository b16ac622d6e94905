//! The local HTTP API over a shared guard and history: the original service's `/validate`,
//! `/chat` and `/health`, an OpenAI-compatible `/v1/moderations`, `/validators`, `/feedback`, Prometheus
//! `/metrics` and an OpenAPI description. A library: `aegis serve` and the desktop app mount the same router.

mod auth;
mod error;
mod feedback;
mod json;
mod metrics;
mod openapi;
mod routes;
mod state;

pub use error::ApiError;
pub use routes::router;
pub use state::{AppState, ServerConfig};
