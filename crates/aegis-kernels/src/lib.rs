//! CPU kernels for reading text with an encoder fast: the matrix products in int8 blocks where the
//! CPU has AVX-512 VNNI and the encoder asks for them, in bfloat16 with f32 accumulation on AMX
//! tiles (Intel Xeon since Sapphire Rapids) or with AVX-512 BF16's dot product (two to four
//! times its f32 FMA rate), in f32 with AVX2's fused multiply-add on the CPUs without either, in
//! portable code elsewhere; and
//! the element-wise steps between them (RMS norm, GELU, softmax, rotary positions) as loops the
//! compiler vectorises.
//!
//! Why not candle's ops: on a short message the encoder's 24 layers are some 700 small ops, and
//! candle's per-op allocation, threading and copies cost three times the arithmetic (measured:
//! 101–122 ms against a 30 ms GEMM floor). Here a layer is four matrix products over reused
//! buffers.

mod bf16;
pub mod elementwise;
mod gemm;

pub use gemm::{matmul, KernelKind, Matrix, INT8_BLOCK, KERNELS_OFF_ENV};
