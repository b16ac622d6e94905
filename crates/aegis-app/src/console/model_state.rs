//! The model's state as the window sees it: what the console's events and `model_state` carry.
//! Nothing here reads the console, so the console's own types can hold it.

use serde::Serialize;

/// Where loading the model stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum LoadStatus {
    Loading,
    Ready,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelState {
    pub status: LoadStatus,
    pub model: String,
    /// cpu or cuda:N.
    pub device: String,
    /// f32, bf16 or quantized.
    pub weights: String,
    /// Random weights for speed tests (`aegis model synth`): verdicts mean nothing.
    pub synthetic: bool,
    /// Why it failed, or what it is doing while loading.
    pub message: String,
    pub download: Option<Download>,
    /// From the start of loading to ready.
    pub load_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Download {
    pub file: String,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub downloaded: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub total: u64,
}

impl ModelState {
    /// Loading `model`, doing what `message` says.
    pub fn loading(model: &str, message: &str) -> Self {
        Self {
            status: LoadStatus::Loading,
            model: model.into(),
            device: String::new(),
            weights: String::new(),
            synthetic: false,
            message: message.into(),
            download: None,
            load_ms: None,
        }
    }
}
