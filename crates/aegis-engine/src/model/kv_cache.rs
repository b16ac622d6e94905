//! The per-sequence KV cache, owned by the caller so a prefix can be snapshotted and extended.

use candle_core::Tensor;

use crate::error::Result;

/// Keys and values seen so far by one sequence, per layer. Cloning is cheap (tensors are shared)
/// and is how a prefix is snapshotted: extending a clone leaves the original untouched.
#[derive(Clone, Default)]
pub struct KvCache {
    pub(super) layers: Vec<Option<(Tensor, Tensor)>>,
    pub(super) len: usize,
}

impl KvCache {
    /// Number of positions already in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub(crate) fn from_parts(layers: Vec<Option<(Tensor, Tensor)>>, len: usize) -> Self {
        Self { layers, len }
    }

    /// Memory the keys and values take.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .flatten()
            .map(|(k, v)| (k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes())
            .sum()
    }

    /// The first `len` positions, in storage of their own (a view would keep the whole alive).
    pub fn truncated(&self, len: usize) -> Result<Self> {
        let len = len.min(self.len);
        let layers = self
            .layers
            .iter()
            .map(|slot| {
                slot.as_ref()
                    .map(|(k, v)| -> Result<(Tensor, Tensor)> {
                        Ok((k.narrow(2, 0, len)?.copy()?, v.narrow(2, 0, len)?.copy()?))
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { layers, len })
    }
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache").field("len", &self.len).finish()
    }
}
