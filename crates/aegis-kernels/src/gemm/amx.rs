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
//! never uses the tile registers, so they keep their values from one `asm!` to the next. The
//! loops issue them through [`Tiles`], which tests on any CPU implement in plain Rust
//! ([`Emulated`]): the blocking, padding and edges are checked everywhere, the instructions
//! where the CPU has them.
#![allow(unsafe_code)]

use std::arch::asm;
use std::sync::OnceLock;

use super::tile::{Output, PackedRows, AMX_TILE as TILE, PANEL};
#[cfg(test)]
use crate::bf16::bf16_to_f32;

mod tile_config;

use tile_config::TileConfig;
pub(super) use tile_config::TILE_ROW_BYTES;

/// Whether the CPU has AMX-TILE and AMX-BF16 and the kernel lets this process use the tile
/// registers. Linux grants them only on request (`arch_prctl(ARCH_REQ_XCOMP_PERM)`: their 8 KiB
/// of state is saved with a thread only once asked for), made here once for the whole process.
pub(super) fn available() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| cpu_has_amx_bf16() && request_tile_state())
}

/// As [`available`], for AMX-INT8 (`tdpbusd`).
pub(super) fn int8_available() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| cpu_has_amx(AMX_INT8) && request_tile_state())
}

/// CPUID leaf 7's EDX bits for the tile unit's parts.
const AMX_BF16: u32 = 1 << 22;
const AMX_TILE: u32 = 1 << 24;
const AMX_INT8: u32 = 1 << 25;

fn cpu_has_amx_bf16() -> bool {
    cpu_has_amx(AMX_BF16)
}

/// Whether the CPU has the tiles and the product `part` names.
fn cpu_has_amx(part: u32) -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // Leaf 7 is read only where leaf 0 says it exists.
    if __cpuid(0).eax < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    edx & AMX_TILE != 0 && edx & part != 0
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

/// The accumulator tiles (a block of 32 rows by 32 outputs, as rows 0–15 and 16–31 by outputs
/// 0–15 and 16–31), the tiles of `a`'s two row halves, and of the weights' two column halves.
pub(super) const ACCUMULATORS: [usize; 4] = [0, 1, 2, 3];
pub(super) const A_TILES: [usize; 2] = [4, 5];
pub(super) const W_TILES: [usize; 2] = [6, 7];

/// What the loops do to the eight tile registers (each 16 rows of 64 bytes).
pub(super) trait Tiles {
    /// Tile `tile` from 16 rows of 64 bytes, `stride` bytes apart, at `from`.
    ///
    /// # Safety
    /// The 16 rows (64 bytes at `from + k * stride`, `k` below 16) are readable.
    unsafe fn load(&mut self, tile: usize, from: *const u8, stride: usize);
    /// Tile `tile` to 16 rows of 64 bytes, `stride` bytes apart, at `to`.
    ///
    /// # Safety
    /// The 16 rows (64 bytes at `to + k * stride`, `k` below 16) are writable and no one
    /// else's.
    unsafe fn store(&mut self, tile: usize, to: *mut u8, stride: usize);
    /// Tile `tile` to zeros.
    fn zero(&mut self, tile: usize);
    /// `tdpbf16ps`: accumulator `c` (16 × 16 f32) += tile `a` (16 rows of 16 bf16 pairs) times
    /// tile `b` (16 pair rows of 16 columns' pairs).
    fn dot(&mut self, c: usize, a: usize, b: usize);
    /// `tdpbusd`: accumulator `c` (16 × 16 i32) += tile `a` (16 rows of 16 quads of unsigned
    /// bytes) times tile `b` (16 quad rows of 16 columns' quads of signed bytes).
    fn dot_int8(&mut self, c: usize, a: usize, b: usize);
}

/// The CPU's own tiles. Making one saves the thread's tile configuration and loads ours;
/// dropping it puts the saved one back.
///
/// The configuration belongs to the thread, not to us: candle's quantized matmuls configure the
/// tiles once per thread and remember that they did (a thread-local), and the worker thread runs
/// both the encoder's products and the guard model's. Releasing the tiles on drop left candle's
/// next `tilezero` unconfigured (a #UD that killed `aegis serve` on an AMX Xeon); leaving ours
/// loaded would have had candle compute on our tile shapes. Restoring what was there serves
/// every other user of the tiles, whatever it assumed.
pub(super) struct Amx {
    previous: TileConfig,
}

impl Amx {
    /// The tiles configured as [`TileConfig::whole_tiles`] has them, until dropped.
    ///
    /// # Safety
    /// [`available`] or [`int8_available`] said yes: the CPU has the tiles and Linux granted
    /// their state to this process.
    pub(super) unsafe fn configure() -> Self {
        // SAFETY: the instructions exist and may run (the caller's promise); ours is a valid
        // palette-1 configuration.
        unsafe {
            let previous = TileConfig::stored();
            TileConfig::whole_tiles().load();
            Self { previous }
        }
    }
}

impl Drop for Amx {
    fn drop(&mut self) {
        // SAFETY: configured in `configure`, so the instructions exist. Palette 0 is the
        // unconfigured state, which a release returns to; any other is the configuration
        // `sttilecfg` read back from the CPU, so `ldtilecfg` accepts it.
        unsafe {
            if self.previous.palette() == 0 {
                TileConfig::release();
            } else {
                self.previous.load();
            }
        }
    }
}

/// An instruction on tile `$tile`, written as the template around the register's name: a
/// register is part of an instruction's encoding, and the tile is a constant at every call, so
/// the match folds away.
macro_rules! on_tile {
    ($tile:expr, $before:literal, $after:literal, $($operands:tt)*) => {
        match $tile {
            0 => asm!(concat!($before, "tmm0", $after), $($operands)*),
            1 => asm!(concat!($before, "tmm1", $after), $($operands)*),
            2 => asm!(concat!($before, "tmm2", $after), $($operands)*),
            3 => asm!(concat!($before, "tmm3", $after), $($operands)*),
            4 => asm!(concat!($before, "tmm4", $after), $($operands)*),
            5 => asm!(concat!($before, "tmm5", $after), $($operands)*),
            6 => asm!(concat!($before, "tmm6", $after), $($operands)*),
            _ => asm!(concat!($before, "tmm7", $after), $($operands)*),
        }
    };
}

impl Tiles for Amx {
    /// `tileloadd`.
    ///
    /// # Safety
    /// As [`Tiles::load`] says.
    #[inline(always)]
    unsafe fn load(&mut self, tile: usize, from: *const u8, stride: usize) {
        // SAFETY: `Amx` exists only once configured, every tile 16 rows of 64 bytes; those rows
        // are readable at `from` (the caller's promise).
        unsafe {
            on_tile!(
                tile,
                "tileloadd ",
                ", [{from} + {stride} * 1]",
                from = in(reg) from,
                stride = in(reg) stride,
                options(nostack, readonly)
            )
        };
    }

    /// `tilestored`.
    ///
    /// # Safety
    /// As [`Tiles::store`] says.
    #[inline(always)]
    unsafe fn store(&mut self, tile: usize, to: *mut u8, stride: usize) {
        // SAFETY: `Amx` exists only once configured, every tile 16 rows of 64 bytes; those rows
        // are writable at `to` and no one else's (the caller's promise).
        unsafe {
            on_tile!(
                tile,
                "tilestored [{to} + {stride} * 1], ",
                "",
                to = in(reg) to,
                stride = in(reg) stride,
                options(nostack)
            )
        };
    }

    #[inline(always)]
    fn zero(&mut self, tile: usize) {
        // SAFETY: `Amx` exists only once configured; zeroing a tile touches no memory.
        unsafe { on_tile!(tile, "tilezero ", "", options(nostack, nomem)) }
    }

    #[inline(always)]
    fn dot(&mut self, c: usize, a: usize, b: usize) {
        // SAFETY: `Amx` exists only once configured; the product reads and writes tiles only.
        unsafe {
            match (c, a, b) {
                (0, 4, 6) => asm!("tdpbf16ps tmm0, tmm4, tmm6", options(nostack, nomem)),
                (1, 4, 7) => asm!("tdpbf16ps tmm1, tmm4, tmm7", options(nostack, nomem)),
                (2, 5, 6) => asm!("tdpbf16ps tmm2, tmm5, tmm6", options(nostack, nomem)),
                (3, 5, 7) => asm!("tdpbf16ps tmm3, tmm5, tmm7", options(nostack, nomem)),
                _ => unreachable!("the loops pair accumulator, row half and column half so"),
            }
        }
    }

    #[inline(always)]
    fn dot_int8(&mut self, c: usize, a: usize, b: usize) {
        // SAFETY: as `dot`.
        unsafe {
            match (c, a, b) {
                (0, 4, 6) => asm!("tdpbusd tmm0, tmm4, tmm6", options(nostack, nomem)),
                (1, 4, 7) => asm!("tdpbusd tmm1, tmm4, tmm7", options(nostack, nomem)),
                (2, 5, 6) => asm!("tdpbusd tmm2, tmm5, tmm6", options(nostack, nomem)),
                (3, 5, 7) => asm!("tdpbusd tmm3, tmm5, tmm7", options(nostack, nomem)),
                _ => unreachable!("the loops pair accumulator, row half and column half so"),
            }
        }
    }
}

/// The tiles in plain Rust, with `tdpbf16ps`'s arithmetic (bf16 products exact in f32, summed
/// in f32): the loops' reference on CPUs without AMX.
#[cfg(test)]
pub(super) struct Emulated {
    tiles: [[u8; TILE * TILE_ROW_BYTES]; 8],
}

#[cfg(test)]
impl Default for Emulated {
    fn default() -> Self {
        Self {
            tiles: [[0; TILE * TILE_ROW_BYTES]; 8],
        }
    }
}

#[cfg(test)]
impl Emulated {
    fn word(&self, tile: usize, row: usize, column: usize) -> u32 {
        let at = row * TILE_ROW_BYTES + column * 4;
        u32::from_le_bytes(self.tiles[tile][at..at + 4].try_into().unwrap_or_default())
    }
}

#[cfg(test)]
impl Tiles for Emulated {
    /// # Safety
    /// As [`Tiles::load`] says.
    unsafe fn load(&mut self, tile: usize, from: *const u8, stride: usize) {
        for row in 0..TILE {
            // SAFETY: row `row < 16` is 64 readable bytes at `from + row * stride` (the
            // caller's promise).
            let source =
                unsafe { std::slice::from_raw_parts(from.add(row * stride), TILE_ROW_BYTES) };
            self.tiles[tile][row * TILE_ROW_BYTES..(row + 1) * TILE_ROW_BYTES]
                .copy_from_slice(source);
        }
    }

    /// # Safety
    /// As [`Tiles::store`] says.
    unsafe fn store(&mut self, tile: usize, to: *mut u8, stride: usize) {
        for row in 0..TILE {
            // SAFETY: row `row < 16` is 64 writable bytes at `to + row * stride`, no one
            // else's (the caller's promise).
            let target =
                unsafe { std::slice::from_raw_parts_mut(to.add(row * stride), TILE_ROW_BYTES) };
            target.copy_from_slice(
                &self.tiles[tile][row * TILE_ROW_BYTES..(row + 1) * TILE_ROW_BYTES],
            );
        }
    }

    fn zero(&mut self, tile: usize) {
        self.tiles[tile] = [0; TILE * TILE_ROW_BYTES];
    }

    fn dot(&mut self, c: usize, a: usize, b: usize) {
        for m in 0..TILE {
            for n in 0..TILE {
                let mut sum = f32::from_bits(self.word(c, m, n));
                for k in 0..TILE {
                    let (x, w) = (self.word(a, m, k), self.word(b, k, n));
                    sum += bf16_to_f32(x as u16) * bf16_to_f32(w as u16);
                    sum += bf16_to_f32((x >> 16) as u16) * bf16_to_f32((w >> 16) as u16);
                }
                let at = m * TILE_ROW_BYTES + n * 4;
                self.tiles[c][at..at + 4].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }

    fn dot_int8(&mut self, c: usize, a: usize, b: usize) {
        for m in 0..TILE {
            for n in 0..TILE {
                let mut sum = self.word(c, m, n) as i32;
                for k in 0..TILE {
                    let (x, w) = (
                        self.word(a, m, k).to_le_bytes(),
                        self.word(b, k, n).to_le_bytes(),
                    );
                    for q in 0..4 {
                        sum = sum.wrapping_add(i32::from(x[q]) * i32::from(w[q] as i8));
                    }
                }
                let at = m * TILE_ROW_BYTES + n * 4;
                self.tiles[c][at..at + 4].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }
}

/// Panels `panels` of the product on this CPU's tiles, whose packed weights are `pairs *
/// PANEL` apart in `weights`. `a` holds `rows` rounded up to a multiple of [`TILE`] rows, and its
/// pairs (a multiple of [`TILE`]) are the weights' pairs.
///
/// # Safety
/// [`available`] said yes. (The sizes are checked in [`panels_on`].)
pub(super) unsafe fn panels(
    a: &PackedRows,
    rows: usize,
    weights: &[u32],
    panels: std::ops::Range<usize>,
    out: Output,
) {
    // SAFETY: `available()` said yes (the caller's promise).
    let mut tiles = unsafe { Amx::configure() };
    panels_on(&mut tiles, a, rows, weights, panels, out);
}

/// [`panels`] on `tiles`.
pub(super) fn panels_on(
    tiles: &mut impl Tiles,
    a: &PackedRows,
    rows: usize,
    weights: &[u32],
    panels: std::ops::Range<usize>,
    out: Output,
) {
    let pairs = a.pairs;
    let panel_len = pairs * PANEL;
    // The tiles load through raw pointers on the strength of these, in checked arithmetic.
    assert!(
        pairs.is_multiple_of(TILE)
            && panels
                .end
                .checked_mul(panel_len)
                .is_some_and(|n| weights.len() >= n),
        "the AMX layout pads pairs to whole tiles"
    );
    assert!(
        rows.checked_next_multiple_of(TILE)
            .and_then(|padded| padded.checked_mul(pairs))
            .is_some_and(|n| a.data.len() >= n),
        "the AMX layout pads rows to whole tiles"
    );
    let (a_stride, w_stride) = (pairs * 4, PANEL * 4);
    // A panel's weights (48 KiB at 768 inputs) stay in L2 while its rows go by: measured, this
    // order ran at 380 to 940 GFLOP/s on two cores of an Intel Xeon with AMX.
    for panel in panels {
        let w_panel = weights[panel * panel_len..].as_ptr();
        let first_column = panel * PANEL;
        let columns = PANEL.min(out.columns - first_column);
        for start in (0..rows).step_by(2 * TILE) {
            // One row tile where 16 or fewer rows are left; its accumulators 2 and 3 go unused.
            let row_tiles = if rows - start > TILE { 2 } else { 1 };
            let used = &ACCUMULATORS[..2 * row_tiles];
            for &c in used {
                tiles.zero(c);
            }
            for step in (0..pairs).step_by(TILE) {
                // SAFETY: `a`'s tiles: rows `start` to `start + 16 * row_tiles` within `rows`
                // rounded up to 16, pairs `step` to `step + 16` within `pairs` (both asserted
                // above); the weights': pair rows `step` to `step + 16` of this panel
                // (`panel_len` long, within `weights` as asserted above).
                unsafe {
                    let a_tile = a.data.as_ptr().add(start * pairs + step);
                    let w_tile = w_panel.add(step * PANEL);
                    if row_tiles == 2 {
                        step_on::<2>(tiles, a_tile, a_stride, w_tile, w_stride);
                    } else {
                        step_on::<1>(tiles, a_tile, a_stride, w_tile, w_stride);
                    }
                }
            }
            for &c in used {
                let (row, half) = (start + TILE * (c / 2), c % 2);
                // SAFETY: `row < rows` (a second row tile exists only past 16 rows), and the
                // columns are this panel's.
                unsafe {
                    write(
                        tiles,
                        c,
                        out,
                        row,
                        rows,
                        first_column + TILE * half,
                        columns.saturating_sub(TILE * half),
                    )
                };
            }
        }
    }
}

/// One step of 16 pairs for `ROW_TILES` row tiles of `a` (at `a_tile`, the second 16 rows
/// further) by both column halves of the weights (at `w_tile`, the second 16 u32 further), in
/// accumulators 0–1 and, with two row tiles, 2–3. A constant count, so every tile number is one.
///
/// # Safety
/// The tiles readable: `ROW_TILES` tiles of `a` and two of weights as above, each 16 rows of 64
/// bytes, `a_stride` and `w_stride` bytes apart.
#[inline(always)]
unsafe fn step_on<const ROW_TILES: usize>(
    tiles: &mut impl Tiles,
    a_tile: *const u32,
    a_stride: usize,
    w_tile: *const u32,
    w_stride: usize,
) {
    for (half, &w) in W_TILES.iter().enumerate() {
        // SAFETY: the weights' column half `half` is a readable tile (the caller's promise).
        unsafe { tiles.load(w, w_tile.add(TILE * half).cast(), w_stride) };
    }
    for (r, &tile) in A_TILES.iter().enumerate().take(ROW_TILES) {
        // SAFETY: `a`'s row tile `r < ROW_TILES` is a readable tile (the caller's promise).
        unsafe { tiles.load(tile, a_tile.byte_add(TILE * r * a_stride).cast(), a_stride) };
        for (half, &w) in W_TILES.iter().enumerate() {
            tiles.dot(ACCUMULATORS[2 * r + half], tile, w);
        }
    }
}

/// Writes accumulator tile `tile` to `c` at `row`, `column`: its rows below `rows` and its first
/// `valid_columns` columns (none when 0). A whole tile goes straight to `c`; an edge goes
/// through a scratch tile, so nothing past `c`'s valid part is written.
///
/// # Safety
/// `out` as `matmul` checked it, holding `rows` rows; `row < rows`; and the columns from
/// `column`, `valid_columns` of them (16 at most are written), within `out.columns` and this
/// panel's alone.
unsafe fn write(
    tiles: &mut impl Tiles,
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
    if height == TILE && width == TILE {
        // SAFETY: rows `row` to `row + 16` lie within `rows`, and their 16 columns from `column`
        // within the valid ones, this panel's alone (the caller's promise).
        unsafe {
            let at = out.ptr().add(row * out.ldc + column);
            tiles.store(tile, at.cast(), out.ldc * 4);
        }
        return;
    }
    let mut scratch = [0f32; TILE * TILE];
    // SAFETY: `scratch` is 16 rows of 64 bytes, ours.
    unsafe { tiles.store(tile, scratch.as_mut_ptr().cast(), TILE_ROW_BYTES) };
    for (r, scratch_row) in scratch.chunks_exact(TILE).take(height).enumerate() {
        // SAFETY: row `row + r` lies within `rows`, and its `width` columns from `column` within
        // the valid ones, this panel's alone (the caller's promise).
        unsafe {
            std::ptr::copy_nonoverlapping(
                scratch_row.as_ptr(),
                out.ptr().add((row + r) * out.ldc + column),
                width,
            )
        };
    }
}

// The thread's tile configuration as another user of the tiles would leave it, for the test
// that holds [`Amx`] to putting it back.

/// A palette-1 configuration unlike ours: the tiles of 8 rows by 32 bytes, as candle or any
/// other library might choose.
#[cfg(test)]
pub(super) fn foreign_tile_configuration() -> [u8; 64] {
    TileConfig::uniform(8, 32).0
}

/// Loads [`foreign_tile_configuration`] as the thread's configuration.
#[cfg(test)]
pub(super) fn load_foreign_tile_configuration() {
    assert!(available(), "no tiles to configure");
    // SAFETY: the CPU has the tiles, granted (asserted); the configuration is a valid palette 1.
    unsafe { TileConfig(foreign_tile_configuration()).load() };
}

/// The thread's configuration: all zeros where the tiles are unconfigured. A `tilezero` on it
/// first, so a configuration the CPU does not hold faults here and not in a later product.
#[cfg(test)]
pub(super) fn thread_tile_configuration() -> [u8; 64] {
    assert!(available(), "no tiles to read");
    // SAFETY: the CPU has the tiles, granted (asserted).
    let config = unsafe { TileConfig::stored() };
    if config.palette() != 0 {
        // SAFETY: the tiles are configured, so tile 0 exists.
        unsafe { asm!("tilezero tmm0", options(nostack, nomem)) };
    }
    config.0
}

/// The tiles back to unconfigured.
#[cfg(test)]
pub(super) fn release_tiles() {
    assert!(available(), "no tiles to release");
    // SAFETY: the CPU has the tiles, granted (asserted).
    unsafe { TileConfig::release() };
}
