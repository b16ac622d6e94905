//! A prototype's chatbot behind the guard. [`Upstream`] speaks OpenAI's chat completions to any
//! compatible server (llama.cpp, vLLM, Ollama, a hosted API), in one piece or streamed;
//! [`GrowingAnswer`] decides where a streamed answer is checked and how much of it the client may
//! have. The checking itself is the guard's, and the HTTP endpoint is `aegis-server`'s: this crate
//! knows neither, so its rules are tested without a model.

mod cadence;
mod client;

pub use cadence::{CheckPoint, GrowingAnswer, Release, StreamPolicy, DEFAULT_CHECK_EVERY};
pub use client::{Deltas, Upstream, UpstreamError};
