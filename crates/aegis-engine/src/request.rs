//! Which model to load and how: the one way the CLI, the app, the server and the bench load a
//! model, from a spec ("default", a file, a folder or a hub repo) to a running engine.

use candle_core::Device;

use crate::engine::GemmaEngine;
use crate::error::{EngineError, Result};
use crate::model::WeightFormat;
use crate::source::{resolve, DownloadListener, HubOptions, ModelSpec, ResolvedModel};

/// Which device to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA when compiled in and a GPU is present, else CPU.
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| EngineError::UnknownDevice(other.to_string())),
        }
    }
}

impl DeviceChoice {
    /// The device, and its name as reports show it (`cpu`, `cuda:0`).
    pub fn open(self) -> Result<(Device, String)> {
        let cuda = |ordinal: usize| -> Result<(Device, String)> {
            if !candle_core::utils::cuda_is_available() {
                return Err(EngineError::CudaNotBuilt);
            }
            let device = Device::new_cuda(ordinal).map_err(|e| {
                // candle appends a backtrace to driver errors; the first line is the cause.
                let cause = e.to_string();
                let cause = cause.lines().next().unwrap_or_default().to_string();
                EngineError::DeviceUnavailable(format!("cuda:{ordinal}: {cause}"))
            })?;
            Ok((device, format!("cuda:{ordinal}")))
        };
        match self {
            Self::Cpu => Ok((Device::Cpu, "cpu".to_string())),
            Self::Cuda(n) => cuda(n),
            // A CUDA build on a machine whose GPU is missing or busy still runs, on the CPU.
            Self::Auto if candle_core::utils::cuda_is_available() => cuda(0).or_else(|e| {
                tracing::warn!(error = %e, "no usable GPU; running on the CPU");
                Ok((Device::Cpu, "cpu".to_string()))
            }),
            Self::Auto => Ok((Device::Cpu, "cpu".to_string())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub device: DeviceChoice,
    /// `None`: the best format for the device (`WeightFormat::best_for`).
    pub weight_format: Option<WeightFormat>,
    /// Cap on prompt length in tokens; the model's own context when larger is never exceeded.
    pub max_context: usize,
    /// Memory for cached template openings, kept across requests (0 turns the cache off).
    pub prefix_cache_bytes: usize,
    /// A sentence encoder shares the host's memory and decides the hot path: with no format
    /// asked for, keep the file's quantized blocks on CPU instead of dequantizing to f32.
    pub beside_encoder: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            device: DeviceChoice::Auto,
            weight_format: None,
            // Attention here is computed densely; 4,096 tokens keeps one request's scratch memory
            // in the low hundreds of MiB on CPU while covering any chat message.
            max_context: 4096,
            // 36 KiB per token for the 270M model, 136 KiB for 4B: room for many templates.
            prefix_cache_bytes: 256 << 20,
            beside_encoder: false,
        }
    }
}

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

    #[test]
    fn parses_devices() {
        assert_eq!("cpu".parse::<DeviceChoice>().ok(), Some(DeviceChoice::Cpu));
        assert_eq!(
            "cuda:1".parse::<DeviceChoice>().ok(),
            Some(DeviceChoice::Cuda(1))
        );
        assert!("tpu".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn the_cpu_opens_under_its_own_name() {
        let (device, name) = DeviceChoice::Cpu.open().expect("cpu");
        assert!(device.is_cpu());
        assert_eq!(name, "cpu");
    }

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
