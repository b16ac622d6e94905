//! Rotary position tables, built once per model rather than on every forward pass. A table
//! covers positions from 0 and grows (by doubling, up to the context length) when a longer
//! prompt arrives, so a short-prompt workload never holds tables for 32k positions.

use std::sync::RwLock;

use candle_core::{DType, Device, Tensor};

use crate::error::Result;

/// Positions a table covers at first; prompts to the guard are mostly shorter.
const FIRST_ROWS: usize = 512;

pub(super) struct Rope {
    base: f64,
    /// Linear position scaling (positions are divided by it).
    scale: f64,
    head_dim: usize,
    /// The context length: positions at or past it are never asked for.
    limit: usize,
    device: Device,
    dtype: DType,
    /// cos and sin, `[rows, head_dim / 2]` each, for positions `0..rows`.
    table: RwLock<Option<(Tensor, Tensor)>>,
}

impl Rope {
    pub(super) fn new(
        base: f64,
        scale: f64,
        head_dim: usize,
        limit: usize,
        device: &Device,
        dtype: DType,
    ) -> Self {
        Self {
            base,
            scale,
            head_dim,
            limit,
            device: device.clone(),
            dtype,
            table: RwLock::new(None),
        }
    }

    /// cos and sin rows for `positions`, `[positions.len(), head_dim / 2]` each (rotate-half
    /// RoPE). Contiguous positions are a view of the table; a packed batch's are gathered.
    pub(super) fn at(&self, positions: &[usize]) -> Result<(Tensor, Tensor)> {
        let needed = positions.iter().max().map_or(0, |&p| p + 1);
        let (cos, sin) = self.covering(needed)?;
        let first = positions.first().copied().unwrap_or(0);
        let contiguous = positions.iter().enumerate().all(|(i, &p)| p == first + i);
        if contiguous {
            return Ok((
                cos.narrow(0, first, positions.len())?,
                sin.narrow(0, first, positions.len())?,
            ));
        }
        let ids: Vec<u32> = positions.iter().map(|&p| p as u32).collect();
        let ids = Tensor::new(ids.as_slice(), &self.device)?;
        Ok((cos.index_select(&ids, 0)?, sin.index_select(&ids, 0)?))
    }

    /// The table, grown first if it covers fewer than `rows` positions.
    fn covering(&self, rows: usize) -> Result<(Tensor, Tensor)> {
        // A poisoned lock only means another thread panicked mid-build; the table it guards is
        // either the old complete one or None, both safe to read.
        if let Some((cos, sin)) = self
            .table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            if cos.dim(0)? >= rows {
                return Ok((cos.clone(), sin.clone()));
            }
        }
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        if let Some((cos, sin)) = table.as_ref() {
            if cos.dim(0)? >= rows {
                return Ok((cos.clone(), sin.clone()));
            }
        }
        let size = rows
            .next_power_of_two()
            .max(FIRST_ROWS)
            .min(self.limit.max(rows));
        let built = self.build(size)?;
        *table = Some(built.clone());
        Ok(built)
    }

    fn build(&self, rows: usize) -> Result<(Tensor, Tensor)> {
        let (cos, sin) = rope_table(self.base, self.scale, self.head_dim, rows, &self.device)?;
        Ok((cos.to_dtype(self.dtype)?, sin.to_dtype(self.dtype)?))
    }
}

/// cos and sin of rotate-half RoPE for positions `0..rows` (divided by `scale`), `[rows,
/// head_dim / 2]` each in f32: the table the forward pass reads, and an adapter's training too.
pub fn rope_table(
    base: f64,
    scale: f64,
    head_dim: usize,
    rows: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(rows * half);
    let mut sin = Vec::with_capacity(rows * half);
    for pos in 0..rows {
        let pos = pos as f64 / scale;
        for i in 0..half {
            let inv_freq = base.powf(-(2.0 * i as f64) / head_dim as f64);
            let angle = pos * inv_freq;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (rows, half), device)?,
        Tensor::from_vec(sin, (rows, half), device)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope() -> Rope {
        Rope::new(10_000.0, 1.0, 8, 4096, &Device::Cpu, DType::F32)
    }

    fn rows(t: &Tensor) -> Vec<Vec<f32>> {
        t.to_vec2().unwrap()
    }

    #[test]
    fn gathered_and_sliced_rows_are_the_table_rows() {
        let rope = rope();
        let (cos, sin) = rope.at(&[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let (packed_cos, packed_sin) = rope.at(&[5, 0, 7]).unwrap();
        let (cos, sin) = (rows(&cos), rows(&sin));
        assert_eq!(
            rows(&packed_cos),
            vec![cos[5].clone(), cos[0].clone(), cos[7].clone()]
        );
        assert_eq!(
            rows(&packed_sin),
            vec![sin[5].clone(), sin[0].clone(), sin[7].clone()]
        );
        assert_eq!(cos[0], vec![1.0; 4]);
    }

    #[test]
    fn grows_past_its_first_size_without_changing_earlier_rows() {
        let rope = rope();
        let (before, _) = rope.at(&[10, 11]).unwrap();
        let (after, _) = rope.at(&[10, 11, 2000]).unwrap();
        assert_eq!(rows(&after)[..2], rows(&before)[..]);
        assert!(
            rope.table
                .read()
                .unwrap()
                .as_ref()
                .unwrap()
                .0
                .dim(0)
                .unwrap()
                >= 2001
        );
    }
}
