//! The kernel kinds, what each needs of the CPU, and which this CPU runs.

/// Kernel kinds (by [`KernelKind::name`], comma-separated) the encoder must not pick though the
/// CPU has them: to compare kinds side by side on one machine, or to step around one.
pub const KERNELS_OFF_ENV: &str = "AEGIS_CPU_KERNELS_OFF";

/// Which code runs the product: chosen once per process from what the CPU reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// AMX tiles (Intel Xeon since Sapphire Rapids): `tdpbf16ps` multiplies a 16 × 32 bf16 tile
    /// by a 32 × 16 one, 256 times `vdpbf16ps`'s multiply-adds an instruction, over the same bf16
    /// weights and inputs with f32 sums.
    AmxBf16,
    /// `vpdpbusd` on 512-bit vectors, over int8 weights (a scale per output) and inputs
    /// quantized per row at each product: twice `vdpbf16ps`'s multiply-adds an instruction and
    /// half its weight bytes. Chosen by the encoder's weight format, never by [`Self::detect`].
    Avx512Vnni,
    /// AMX-INT8 tiles: `tdpbusd` multiplies a 16 × 64 tile of the input's bytes by a 64 × 16 one
    /// of weights, 256 times `vpdpbusd`'s multiply-adds an instruction, over the int8 layout and
    /// with the same bits. After [`Self::Avx512Vnni`] in the dispatch order until measured on a
    /// CPU with AMX: each block of 64 inputs ends in a trip through memory for its scales.
    AmxInt8,
    /// `vpdpbusd` on 256-bit vectors (32 multiply-adds an instruction), the same int8 layout and
    /// bits as [`Self::Avx512Vnni`]: for Intel Core since Alder Lake (AVX-VNNI, no AVX-512). An
    /// AVX-512 VNNI CPU runs it too (the instruction's EVEX encoding), so it is tested and
    /// benched there; the dispatch order puts the 512-bit kind first.
    AvxVnni,
    /// `vdpbf16ps` on 512-bit vectors, over bf16 weights and inputs.
    Avx512Bf16,
    /// f32 weights and inputs, fused multiply-adds on 256-bit vectors: for the CPUs most people
    /// have (AVX2 since 2013, no bf16 dot product), where widening bf16 costs more than it saves.
    Avx2Fma,
    /// Plain Rust over the bf16 layout, rounding as AVX-512 BF16 does: far slower (a fourteenth
    /// of AVX-512 BF16 on the dev machine), so the encoder only runs on it when asked
    /// (`EncoderArithmetic::Kernels` on a CPU with neither); it is the reference the bf16 kind
    /// is tested against.
    Portable,
}

impl KernelKind {
    /// Every kind, fastest first: the dispatch order.
    pub const ALL: [Self; 7] = [
        Self::AmxBf16,
        Self::Avx512Vnni,
        Self::AmxInt8,
        Self::AvxVnni,
        Self::Avx512Bf16,
        Self::Avx2Fma,
        Self::Portable,
    ];

    /// Every kind this CPU runs, fastest first (`Portable` always last), less those named in
    /// [`KERNELS_OFF_ENV`].
    pub fn supported() -> Vec<Self> {
        let off = std::env::var(KERNELS_OFF_ENV).unwrap_or_default();
        let off: Vec<&str> = off.split(',').map(str::trim).collect();
        Self::ALL
            .into_iter()
            .filter(|k| k.available() && (*k == Self::Portable || !off.contains(&k.name())))
            .collect()
    }

    /// Whether the kind quantizes weights and inputs to int8 (else it keeps bf16 or f32).
    pub fn quantized(self) -> bool {
        self.weights() == "int8"
    }

    /// Whether this CPU has what the kind needs (checked once, then cached by std).
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::AmxBf16 => super::amx::available(),
            #[cfg(target_arch = "x86_64")]
            Self::Avx512Vnni => super::vnni::available(),
            #[cfg(target_arch = "x86_64")]
            Self::AmxInt8 => super::amx::int8_available(),
            #[cfg(target_arch = "x86_64")]
            Self::AvxVnni => super::vnni256::available(),
            #[cfg(target_arch = "x86_64")]
            Self::Avx512Bf16 => super::avx512::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Self::AmxBf16 | Self::Avx512Vnni | Self::AmxInt8 | Self::AvxVnni | Self::Avx512Bf16 => {
                false
            }
            Self::Avx2Fma => super::f32_panels::avx2_available(),
            Self::Portable => true,
        }
    }

    /// What the kind needs of the CPU.
    pub fn needs(self) -> &'static str {
        match self {
            Self::AmxBf16 => "AMX-TILE and AMX-BF16, and Linux granting the tile state",
            Self::Avx512Vnni => "AVX-512F and AVX-512 VNNI",
            Self::AmxInt8 => "AMX-TILE and AMX-INT8, and Linux granting the tile state",
            Self::AvxVnni => "AVX2, FMA and AVX-VNNI (or AVX-512 VNNI with AVX-512VL)",
            Self::Avx512Bf16 => "AVX-512F and AVX-512 BF16",
            Self::Avx2Fma => "AVX2 and FMA",
            Self::Portable => "nothing",
        }
    }

    /// Why it is chosen where it is (the dispatch table `aegis bench` prints).
    pub fn why(self) -> &'static str {
        match self {
            Self::AmxBf16 => {
                "8,192 bf16 multiply-adds an instruction on tiles of 16 rows, the same bf16 \
                 arithmetic as avx512-bf16"
            }
            Self::Avx512Vnni => {
                "64 int8 multiply-adds an instruction: the int8 weight format, where chosen"
            }
            Self::AmxInt8 => {
                "16,384 int8 multiply-adds an instruction on tiles; after avx512-vnni until \
                 measured on AMX (AEGIS_CPU_KERNELS_OFF=avx512-vnni selects it)"
            }
            Self::AvxVnni => {
                "32 int8 multiply-adds an instruction on 256-bit vectors where AVX-512 is absent \
                 (four times an f32 FMA's): the int8 weight format, where chosen"
            }
            Self::Avx512Bf16 => "32 bf16 multiply-adds an instruction, weights and inputs in bf16",
            Self::Avx2Fma => {
                "no bf16 dot product: f32 weights and FMA, since widening bf16 to f32 cost more \
                 than the halved weights saved"
            }
            Self::Portable => {
                "the bf16 kinds' reference in tests; slower than candle's f32 GEMM, so a CPU with \
                 neither runs the encoder on candle"
            }
        }
    }

    /// The fastest kind this CPU runs that keeps weights in bf16 or f32.
    pub fn detect() -> Self {
        Self::supported()
            .into_iter()
            .find(|k| !k.quantized())
            .unwrap_or(Self::Portable)
    }

    /// The kind attention's two products run on beside layers of this kind: the same, but bf16
    /// (the fastest non-int8 kind) beside int8 layers, since attention's operands are made per
    /// message and quantizing each key and value afresh would cost more than it saves.
    pub fn for_attention(self) -> Self {
        if self.quantized() {
            Self::detect()
        } else {
            self
        }
    }

    /// The int8 kind, where this CPU runs one.
    pub fn detect_int8() -> Option<Self> {
        Self::supported().into_iter().find(|k| k.quantized())
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::AmxBf16 => "amx-bf16",
            Self::Avx512Vnni => "avx512-vnni",
            Self::AmxInt8 => "amx-int8",
            Self::AvxVnni => "avx-vnni",
            Self::Avx512Bf16 => "avx512-bf16",
            Self::Avx2Fma => "avx2-fma",
            Self::Portable => "portable",
        }
    }

    /// The number format the weights are packed in for this kind.
    pub fn weights(self) -> &'static str {
        match self {
            Self::AmxInt8 | Self::Avx512Vnni | Self::AvxVnni => "int8",
            Self::Avx2Fma => "f32",
            Self::AmxBf16 | Self::Avx512Bf16 | Self::Portable => "bf16",
        }
    }
}
