//! The product on AMX (Intel Xeon since Sapphire Rapids): eight tile registers of 16 rows by 64
//! bytes beside the vector registers, and `tdpbf16ps`, which multiplies a 16 × 32 bf16 tile by a
//! 32 × 16 one into 16 × 16 f32 sums: 8,192 multiply-adds an instruction, 256 times
//! `vdpbf16ps`'s 32.
//!
//! A block of 32 rows of `a` by one [`PANEL`] of 32 outputs is four accumulator tiles; each step
//! loads two tiles of `a` (16 rows by 16 input pairs) and two of the panel's weights (16 input
//! pairs by 16 outputs) and issues four `tdpbf16ps`. The weights are the bf16 layout the other
//! kernels read: a weight tile is 16 of a panel's pair rows, read with a 128-byte stride, which
//! is what `tdpbf16ps` wants of its second operand (pairs of one output side by side). Both
//! operands' input pairs are padded with zeros to a multiple of [`TILE`], and `a`'s rows too, so
//! every tile is whole and one tile configuration serves the whole product.
//!
//! Rust has no stable AMX intrinsics, so the instructions are inline assembly; the compiler
//! never uses the tile registers, so they keep their values from one `asm!` to the next.
#![allow(unsafe_code)]

use std::arch::asm;
use std::sync::OnceLock;

use super::tile::{Output, PackedRows, AMX_TILE as TILE, PANEL};

/// Bytes in a row of a tile.
const TILE_ROW_BYTES: usize = 64;

/// Whether the CPU has AMX-TILE and AMX-BF16 and the kernel lets this process use the tile
/// registers. Linux grants them only on request (`arch_prctl(ARCH_REQ_XCOMP_PERM)`: their 8 KiB
/// of state is saved with a thread only once asked for), made here once for the whole process.
pub(super) fn available() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| cpu_has_amx_bf16() && request_tile_state())
}

fn cpu_has_amx_bf16() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    const AMX_BF16: u32 = 1 << 22;
    const AMX_TILE: u32 = 1 << 24;
    // Leaf 7 is read only where leaf 0 says it exists.
    if __cpuid(0).eax < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    edx & AMX_TILE != 0 && edx & AMX_BF16 != 0
}

#[cfg(target_os = "linux")]
fn request_tile_state() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: this request only widens the register state the kernel saves for the process; it
    // touches no memory of ours. A kernel without AMX support answers with an error.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

/// Other systems: not tried (Windows enables the state without a request, but no one has run
/// this kernel there).
#[cfg(not(target_os = "linux"))]
fn request_tile_state() -> bool {
    false
}

/// `ldtilecfg`'s operand: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn whole_tiles() -> Self {
        let mut bytes = [0u8; 64];
        bytes[0] = 1;
        for tile in 0..8 {
            let width = u16::try_from(TILE_ROW_BYTES).unwrap_or(u16::MAX);
            bytes[16 + 2 * tile..18 + 2 * tile].copy_from_slice(&width.to_le_bytes());
            bytes[48 + tile] = TILE as u8;
        }
        Self(bytes)
    }
}

/// Input pairs a block of the product runs through before moving to the next panel: a block of
/// `a` (32 rows of 128 pairs, 16 KiB) stays in the L1 cache while each panel's weights for the
/// same pairs (16 KiB) stream past it. Without the split, `a`'s rows and a panel's weights
/// (48 KiB each at 768 inputs) both came from L2 at every step.
const CHUNK_PAIRS: usize = 128;

/// Panels `panels` of the product, whose packed weights are `panel_len` apart in `weights`. `a`
/// holds `rows` rounded up to a multiple of [`TILE`] rows, and its pairs (a multiple of
/// [`TILE`]) are the weights' pairs.
pub(super) fn panels(
    a: &PackedRows,
    rows: usize,
    weights: &[u32],
    panels: std::ops::Range<usize>,
    out: Output,
) {
    let pairs = a.pairs;
    let panel_len = pairs * PANEL;
    assert!(
        pairs.is_multiple_of(TILE) && weights.len() >= panels.end * panel_len,
        "the AMX layout pads pairs to whole tiles"
    );
    assert!(
        a.data.len() >= rows.next_multiple_of(TILE) * pairs,
        "the AMX layout pads rows to whole tiles"
    );
    let config = TileConfig::whole_tiles();
    // Four accumulator tiles per panel between chunks of pairs.
    let mut partial = vec![0f32; panels.len() * 4 * TILE * TILE];
    let (a_stride, w_stride) = (pairs * 4, PANEL * 4);
    // SAFETY: `matmul` runs this only where `available()` said yes, so the instructions exist
    // and Linux saves the tile state. Every tile load reads 16 rows of 64 bytes: `a`'s from row
    // `start` or `start + 16` below `rows` rounded up to 16 (asserted above), at a pair below
    // `pairs`; the weights' from a pair row below `pairs` of a panel below `panels.end`, columns
    // 0–15 or 16–31 (asserted above); `partial`'s from its own tiles. Stores to `c` go through
    // `store`, which writes only the panel's valid columns of rows below `rows`.
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
        for start in (0..rows).step_by(2 * TILE) {
            let a_rows = a.data.as_ptr().add(start * pairs);
            let two_row_tiles = rows - start > TILE;
            for chunk in (0..pairs).step_by(CHUNK_PAIRS) {
                let chunk_end = (chunk + CHUNK_PAIRS).min(pairs);
                let last = chunk_end == pairs;
                for (index, panel) in panels.clone().enumerate() {
                    let kept = partial.as_mut_ptr().add(index * 4 * TILE * TILE);
                    accumulators(chunk == 0, kept, false);
                    let w_panel = weights.as_ptr().add(panel * panel_len);
                    for step in (chunk..chunk_end).step_by(TILE) {
                        let a_tile = a_rows.add(step);
                        let w_tile = w_panel.add(step * PANEL);
                        if two_row_tiles {
                            asm!(
                                "tileloadd tmm4, [{a} + {a_stride} * 1]",
                                "tileloadd tmm6, [{w} + {w_stride} * 1]",
                                "tileloadd tmm7, [{w2} + {w_stride} * 1]",
                                "tdpbf16ps tmm0, tmm4, tmm6",
                                "tileloadd tmm5, [{a2} + {a_stride} * 1]",
                                "tdpbf16ps tmm1, tmm4, tmm7",
                                "tdpbf16ps tmm2, tmm5, tmm6",
                                "tdpbf16ps tmm3, tmm5, tmm7",
                                a = in(reg) a_tile,
                                a2 = in(reg) a_tile.add(TILE * pairs),
                                a_stride = in(reg) a_stride,
                                w = in(reg) w_tile,
                                w2 = in(reg) w_tile.add(TILE),
                                w_stride = in(reg) w_stride,
                                options(nostack, readonly)
                            );
                        } else {
                            asm!(
                                "tileloadd tmm4, [{a} + {a_stride} * 1]",
                                "tileloadd tmm6, [{w} + {w_stride} * 1]",
                                "tileloadd tmm7, [{w2} + {w_stride} * 1]",
                                "tdpbf16ps tmm0, tmm4, tmm6",
                                "tdpbf16ps tmm1, tmm4, tmm7",
                                a = in(reg) a_tile,
                                a_stride = in(reg) a_stride,
                                w = in(reg) w_tile,
                                w2 = in(reg) w_tile.add(TILE),
                                w_stride = in(reg) w_stride,
                                options(nostack, readonly)
                            );
                        }
                    }
                    if !last {
                        accumulators(false, kept, true);
                        continue;
                    }
                    let first_column = panel * PANEL;
                    let columns = PANEL.min(out.columns - first_column);
                    let tiles: &[usize] = if two_row_tiles {
                        &[0, 1, 2, 3]
                    } else {
                        &[0, 1]
                    };
                    for &tile in tiles {
                        let (row, half) = (start + TILE * (tile / 2), tile % 2);
                        store(
                            tile,
                            out,
                            row,
                            rows,
                            first_column + TILE * half,
                            columns.saturating_sub(TILE * half),
                        );
                    }
                }
            }
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}

/// Zeroes the four accumulator tiles (`zero`), or loads them from `kept` (four 16 × 16 f32
/// tiles side by side), or (`save`) stores them there.
///
/// # Safety
/// AMX available and configured, `kept` four tiles long.
unsafe fn accumulators(zero: bool, kept: *mut f32, save: bool) {
    let (t1, t2, t3) = (
        kept.add(TILE * TILE),
        kept.add(2 * TILE * TILE),
        kept.add(3 * TILE * TILE),
    );
    if save {
        asm!(
            "tilestored [{t0} + {s} * 1], tmm0",
            "tilestored [{t1} + {s} * 1], tmm1",
            "tilestored [{t2} + {s} * 1], tmm2",
            "tilestored [{t3} + {s} * 1], tmm3",
            t0 = in(reg) kept, t1 = in(reg) t1, t2 = in(reg) t2, t3 = in(reg) t3,
            s = in(reg) TILE_ROW_BYTES,
            options(nostack)
        );
    } else if zero {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem)
        );
    } else {
        asm!(
            "tileloadd tmm0, [{t0} + {s} * 1]",
            "tileloadd tmm1, [{t1} + {s} * 1]",
            "tileloadd tmm2, [{t2} + {s} * 1]",
            "tileloadd tmm3, [{t3} + {s} * 1]",
            t0 = in(reg) kept, t1 = in(reg) t1, t2 = in(reg) t2, t3 = in(reg) t3,
            s = in(reg) TILE_ROW_BYTES,
            options(nostack, readonly)
        );
    }
}

/// Writes accumulator tile `tile` (tmm0–tmm3) to `c` at `row`, `column`: its rows below `rows`
/// and its first `valid_columns` columns (none when 0). A whole tile goes straight to `c`; an
/// edge goes through a scratch tile, so nothing past `c`'s valid part is written.
///
/// # Safety
/// AMX available and configured, `out` as `matmul` checked it, `row < rows`, and the columns
/// this panel's alone.
unsafe fn store(
    tile: usize,
    out: Output,
    row: usize,
    rows: usize,
    column: usize,
    valid_columns: usize,
) {
    let width = valid_columns.min(TILE);
    if width == 0 {
        return;
    }
    let height = TILE.min(rows - row);
    let stride = out.ldc * 4;
    let mut scratch = [0f32; TILE * TILE];
    let whole = height == TILE && width == TILE;
    let (at, at_stride) = if whole {
        (out.ptr().add(row * out.ldc + column), stride)
    } else {
        (scratch.as_mut_ptr(), TILE_ROW_BYTES)
    };
    match tile {
        0 => {
            asm!("tilestored [{} + {} * 1], tmm0", in(reg) at, in(reg) at_stride, options(nostack))
        }
        1 => {
            asm!("tilestored [{} + {} * 1], tmm1", in(reg) at, in(reg) at_stride, options(nostack))
        }
        2 => {
            asm!("tilestored [{} + {} * 1], tmm2", in(reg) at, in(reg) at_stride, options(nostack))
        }
        _ => {
            asm!("tilestored [{} + {} * 1], tmm3", in(reg) at, in(reg) at_stride, options(nostack))
        }
    }
    if !whole {
        for r in 0..height {
            std::ptr::copy_nonoverlapping(
                scratch.as_ptr().add(r * TILE),
                out.ptr().add((row + r) * out.ldc + column),
                width,
            );
        }
    }
}
