//! What the machine running the bench has: the CPU kernels the encoder can run on, and the memory
//! this process holds.

use std::process::Command;

use aegis_engine::KernelKind;
use serde_json::{json, Value};

/// The dispatch table: every CPU kernel kind in the order the encoder tries them, whether this CPU
/// has it, and what the encoder runs on it (its weight format names the kernel its layers run
/// on, and attention runs beside them as `KernelKind::for_attention` says; none on a GPU or a
/// server).
pub(super) fn cpu_kernels(encoder_format: &str) -> Value {
    let layers = KernelKind::ALL
        .into_iter()
        .find(|kind| encoder_format.contains(&format!("({} kernels)", kind.name())));
    let attention = layers.map(KernelKind::for_attention);
    KernelKind::ALL
        .map(|kind| {
            let runs_for = match (Some(kind) == layers, Some(kind) == attention) {
                (true, true) => Some("layers and attention"),
                (true, false) => Some("layers"),
                (false, true) => Some("attention"),
                (false, false) => None,
            };
            json!({
                "kind": kind.name(), "weights": kind.weights(), "needs": kind.needs(),
                "available": kind.available(),
                "runs": runs_for.is_some(), "runs_for": runs_for,
                "why": kind.why(),
            })
        })
        .into()
}

/// This process's GPU memory as `nvidia-smi` reports it (the CUDA context and candle's pool
/// included); `None` without a GPU or nvidia-smi.
pub(super) fn gpu_memory_mib() -> Option<f64> {
    let output = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .ok()?;
    let pid = std::process::id().to_string();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once(','))
        .find(|(p, _)| p.trim() == pid)
        .and_then(|(_, mib)| mib.trim().parse().ok())
}

/// A field of /proc/self/status in KiB (0 where there is none).
pub(super) fn memory_kib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0.0)
}
