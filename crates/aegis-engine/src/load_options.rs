//! How a model runs once found: the device and the load options. Below both the engine (which
//! loads with them) and the request (which finds a model, then hands them to the engine), so
//! neither imports the other's half.

use candle_core::Device;

use crate::error::{EngineError, Result};
use crate::model::WeightFormat;

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
    /// Memory for cached template openings, kept across requests (0 turns the cache off);
    /// `None` sizes it by the model and device (see `prefix_cache::default_capacity_bytes`).
    pub prefix_cache_bytes: Option<usize>,
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
            prefix_cache_bytes: None,
            beside_encoder: false,
        }
    }
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
}
