//! Which model to load and how: the one way the CLI, the app, the server and the bench load a
//! model, from a spec ("default", a file, a folder or a hub repo) to a running engine.

use crate::engine::GemmaEngine;
use crate::error::{EngineError, Result};
use crate::load_options::LoadOptions;
use crate::source::{resolve, DownloadListener, HubOptions, ModelSpec, ResolvedModel};

/// How a download in progress is reported.
#[derive(Clone, Default)]
pub enum DownloadReport {
    #[default]
    Quiet,
    /// A progress bar on the terminal (the CLI).
    TerminalBar,
    /// Every downloaded chunk told to a listener (the app's progress events).
    Listener(DownloadListener),
}

impl std::fmt::Debug for DownloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Quiet => "Quiet",
            Self::TerminalBar => "TerminalBar",
            Self::Listener(_) => "Listener",
        })
    }
}

/// Everything that says which model to load and how.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// "default", a .gguf file, a folder (safetensors + config.json + tokenizer.json), or a
    /// Hugging Face repo id.
    pub model: String,
    pub options: LoadOptions,
    /// Never reach the hub; only local files and the Hugging Face cache. `HF_HUB_OFFLINE` set
    /// to anything but a false value (`0`, `false`, `no`, `off`, empty) turns it on as well.
    pub offline: bool,
    pub download: DownloadReport,
}

impl ModelRequest {
    /// The model `model` with default options.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            options: LoadOptions::default(),
            offline: false,
            download: DownloadReport::Quiet,
        }
    }

    /// The device and weight format as users type them (`cpu`, `cuda:1`, `auto`; `f32`, `bf16`,
    /// `quantized`, `auto`).
    pub fn with_device_and_weights(mut self, device: &str, weights: &str) -> Result<Self> {
        self.options.device = device.parse()?;
        self.options.weight_format = match weights {
            "auto" | "" => None,
            other => Some(other.parse().map_err(EngineError::UnknownWeightFormat)?),
        };
        Ok(self)
    }

    /// Whether the hub is off limits, by the request or the environment.
    pub fn is_offline(&self) -> bool {
        self.offline || offline_by_environment()
    }

    /// Where the model's files are, downloading them first if needed and allowed.
    pub fn resolve(&self) -> Result<ResolvedModel> {
        let spec = ModelSpec::parse(&self.model)?;
        let hub = HubOptions {
            offline: self.is_offline(),
            progress: matches!(self.download, DownloadReport::TerminalBar),
            on_download: match &self.download {
                DownloadReport::Listener(listener) => Some(listener.clone()),
                _ => None,
            },
            ..HubOptions::default()
        };
        resolve(&spec, &hub)
    }

    /// The engine, and the files it was loaded from.
    pub fn load(&self) -> Result<(GemmaEngine, ResolvedModel)> {
        let resolved = self.resolve()?;
        let engine = GemmaEngine::load(&resolved, &self.options)?;
        Ok((engine, resolved))
    }
}

/// `HF_HUB_OFFLINE`, read the way Hugging Face's own clients read it.
fn offline_by_environment() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_options::DeviceChoice;
    use crate::model::WeightFormat;

    #[test]
    fn device_and_weights_parse_as_typed() {
        let request = ModelRequest::new("default")
            .with_device_and_weights("cpu", "bf16")
            .expect("valid");
        assert_eq!(request.options.device, DeviceChoice::Cpu);
        assert_eq!(request.options.weight_format, Some(WeightFormat::Bf16));
        let auto = ModelRequest::new("default")
            .with_device_and_weights("auto", "auto")
            .expect("valid");
        assert_eq!(auto.options.weight_format, None);
        assert!(ModelRequest::new("default")
            .with_device_and_weights("cpu", "int3")
            .is_err());
    }
}
