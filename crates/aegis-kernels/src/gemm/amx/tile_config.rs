//! The tile configuration: `ldtilecfg`'s and `sttilecfg`'s 64 bytes, ours and the thread's, and
//! (for tests) a foreign one as another user of the tiles would leave it.

use std::arch::asm;

#[cfg(test)]
use super::available;
use super::{TILE, TILE_ROW_BYTES};

/// `ldtilecfg`'s and `sttilecfg`'s operand: ours is palette 1, all eight tiles 16 rows of 64
/// bytes.
#[repr(C, align(64))]
pub(super) struct TileConfig([u8; 64]);

impl TileConfig {
    /// The palette: 0 where the tiles are unconfigured.
    pub(super) fn palette(&self) -> u8 {
        self.0[0]
    }

    /// Ours: palette 1, all eight tiles 16 rows of 64 bytes.
    pub(super) fn whole_tiles() -> Self {
        Self::uniform(TILE as u8, TILE_ROW_BYTES as u16)
    }

    /// Palette 1, all eight tiles `rows` rows of `row_bytes` bytes.
    pub(super) fn uniform(rows: u8, row_bytes: u16) -> Self {
        let mut bytes = [0u8; 64];
        bytes[0] = 1;
        for tile in 0..8 {
            bytes[16 + 2 * tile..18 + 2 * tile].copy_from_slice(&row_bytes.to_le_bytes());
            bytes[48 + tile] = rows;
        }
        Self(bytes)
    }

    /// `ldtilecfg`: this as the thread's configuration.
    ///
    /// # Safety
    /// The CPU has the tiles, granted to this process, and this is a valid configuration.
    pub(super) unsafe fn load(&self) {
        // SAFETY: the caller's promises; the instruction reads this value's 64 bytes.
        unsafe { asm!("ldtilecfg [{}]", in(reg) self.0.as_ptr(), options(nostack, readonly)) };
    }

    /// `sttilecfg`: the thread's configuration, all zeros where the tiles are unconfigured.
    ///
    /// # Safety
    /// The CPU has the tiles, granted to this process.
    pub(super) unsafe fn stored() -> Self {
        let mut config = Self([0; 64]);
        // SAFETY: the caller's promise; the instruction writes `config`'s 64 bytes.
        unsafe { asm!("sttilecfg [{}]", in(reg) config.0.as_mut_ptr(), options(nostack)) };
        config
    }

    /// `tilerelease`: the tiles back to unconfigured.
    ///
    /// # Safety
    /// The CPU has the tiles, granted to this process.
    pub(super) unsafe fn release() {
        // SAFETY: the caller's promise; the instruction touches no memory.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}

// The thread's tile configuration as another user of the tiles would leave it, for the test
// that holds [`Amx`] to putting it back.

/// A palette-1 configuration unlike ours: the tiles of 8 rows by 32 bytes, as candle or any
/// other library might choose.
#[cfg(test)]
pub(in crate::gemm) fn foreign_tile_configuration() -> [u8; 64] {
    TileConfig::uniform(8, 32).0
}

/// Loads [`foreign_tile_configuration`] as the thread's configuration.
#[cfg(test)]
pub(in crate::gemm) fn load_foreign_tile_configuration() {
    assert!(available(), "no tiles to configure");
    // SAFETY: the CPU has the tiles, granted (asserted); the configuration is a valid palette 1.
    unsafe { TileConfig(foreign_tile_configuration()).load() };
}

/// The thread's configuration: all zeros where the tiles are unconfigured. A `tilezero` on it
/// first, so a configuration the CPU does not hold faults here and not in a later product.
#[cfg(test)]
pub(in crate::gemm) fn thread_tile_configuration() -> [u8; 64] {
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
pub(in crate::gemm) fn release_tiles() {
    assert!(available(), "no tiles to release");
    // SAFETY: the CPU has the tiles, granted (asserted).
    unsafe { TileConfig::release() };
}
