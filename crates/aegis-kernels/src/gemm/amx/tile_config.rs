//! The tile configuration: `ldtilecfg`'s and `sttilecfg`'s 64 bytes, ours and the thread's, which
//! [`super::Amx`] saves and puts back.

use std::arch::asm;

use crate::gemm::tile::AMX_TILE as TILE;

/// Bytes in a row of a tile.
pub(crate) const TILE_ROW_BYTES: usize = 64;

/// `ldtilecfg`'s and `sttilecfg`'s operand: ours is palette 1, all eight tiles 16 rows of 64
/// bytes.
#[repr(C, align(64))]
pub(super) struct TileConfig(pub(super) [u8; 64]);

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
