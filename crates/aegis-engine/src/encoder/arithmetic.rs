//! How the encoder computes its layers: the user's `--encoder-weights`, and which kernel kind
//! that picks on this device.

use aegis_kernels::KernelKind;

/// How the encoder's layers are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncoderArithmetic {
    /// The device's fastest that keeps the shipped heads' verdicts: [`Self::Int8`] on a CPU with
    /// AVX-512 VNNI (measured: every encoder test text within cosine 0.9991 of f32, the heads'
    /// ROC AUC on the dev set within 0.0004, the benign rates no higher), else
    /// [`Self::Precise`]. Also on an Intel Xeon with AMX: there int8 on VNNI read short texts
    /// faster than bf16 on tiles (17.9 against 21.5 ms; half the weight bytes to stream) and
    /// batches of them as fast (71 against 74 a second).
    #[default]
    Fast,
    /// The device's fastest without int8: on a CPU with AMX or AVX-512 BF16 the packed bfloat16
    /// kernels (`aegis-kernels`, 3 to 5 times candle's f32 here; on an Intel Xeon's AMX tiles
    /// 1.8 to 3.2 times its AVX-512 BF16, and a little faster than int8 there on a 1,000-token
    /// text and on batches), on one with AVX2 and FMA the packed f32 kernels (candle's GEMM
    /// rate without its per-op overhead), on other CPUs candle in f32 (the kernels' portable code
    /// is slower than candle's GEMM there), on a GPU candle in bf16.
    /// What training reads where it should not depend on int8's rounding.
    Precise,
    /// candle in f32 throughout: the arithmetic of the model's reference implementation, for
    /// checking the model itself (and the fast path against it).
    Exact,
    /// The packed kernels whatever the CPU (the fastest kind it runs; the portable bf16 code
    /// where it has neither AVX-512 BF16 nor AVX2): what the tests compare with `Exact` on any
    /// machine.
    Kernels,
    /// The layers' weights and their inputs in int8, a scale per block of
    /// [`aegis_kernels::INT8_BLOCK`] inputs on each side, on AVX-512 VNNI (twice bf16's
    /// multiply-adds an instruction): embeddings within cosine 0.999 of [`Self::Exact`]'s, not
    /// bf16's 0.9999. Where the CPU has no VNNI, or on a GPU, as [`Self::Precise`].
    Int8,
}

impl std::str::FromStr for EncoderArithmetic {
    type Err = String;

    /// The user's words for it: `auto`, `precise`, `int8`.
    fn from_str(raw: &str) -> std::result::Result<Self, String> {
        match raw.trim() {
            "auto" | "" => Ok(Self::Fast),
            "precise" => Ok(Self::Precise),
            "int8" => Ok(Self::Int8),
            other => Err(format!(
                "unknown encoder weights {other:?}: use auto, precise or int8"
            )),
        }
    }
}

impl EncoderArithmetic {
    /// The kernel kind that runs the layers on `device`, or `None` for candle.
    pub(super) fn layer_kernel(self, device: &candle_core::Device) -> Option<KernelKind> {
        if !device.is_cpu() {
            return None;
        }
        let precise = KernelKind::detect();
        match self {
            Self::Exact => None,
            Self::Kernels => Some(precise),
            Self::Fast | Self::Int8 => {
                KernelKind::detect_int8().or(Self::Precise.layer_kernel(device))
            }
            Self::Precise => (precise != KernelKind::Portable).then_some(precise),
        }
    }
}
