//! A packed batch's forward pass (see `packing`): the prompts' rows after their cached openings,
//! in chunks; on the CPU each attention group attends alone, on a GPU the groups attend side by
//! side in padded buckets (see `attention`).

use std::ops::Range;

use candle_core::Tensor;

use super::attention::{Attend, AttentionGroup, KeySelect, Member, PaddedBatch};
use super::{Gemma3, KvCache, Output};
use crate::error::{EngineError, Result};
use crate::packing::PackedBatch;

impl Gemma3 {
    /// Runs a packed batch (see `packing`) after the cached `contexts` it refers to, `chunk` pack
    /// rows at a time so scratch memory stays bounded however long the prompts are. Returns what
    /// `output` asks for, each `[batch.len(), hidden]`: the final-normed hidden state of every
    /// pack row, or the residual stream after each tapped layer.
    pub(crate) fn forward_packed(
        &self,
        batch: &PackedBatch,
        contexts: &[KvCache],
        chunk: usize,
        output: Output<'_>,
    ) -> Result<Vec<Tensor>> {
        if batch.len() == 0 {
            return Err(EngineError::EmptyPrompt);
        }
        if self.config.bidirectional {
            // Packing shares prefixes causally; an encoder's early rows read its later ones.
            return Err(EngineError::Unsupported(
                "packed batches on a bidirectional encoder",
            ));
        }
        output.check(self.layers.len())?;
        let prefix = if self.padded_attention {
            Some(ContextPrefix::of(contexts, self.layers.len())?)
        } else {
            None
        };
        let mut slots = vec![None; self.layers.len()];
        let mut chunks: Vec<Vec<Tensor>> = Vec::new();
        let mut start = 0;
        while start < batch.len() {
            let end = (start + chunk.max(1)).min(batch.len());
            let groups = batch.attention_groups(start..end);
            let attend = match &prefix {
                Some(prefix) => {
                    Attend::Padded(self.packed_layout(batch, groups, start..end, prefix)?)
                }
                None => Attend::Groups(
                    groups
                        .into_iter()
                        .map(|rows| self.attention_group(batch, contexts, rows, start))
                        .collect::<Result<Vec<_>>>()?,
                ),
            };
            chunks.push(self.run_layers(
                &batch.tokens[start..end],
                &batch.positions[start..end],
                &attend,
                &mut slots,
                output,
            )?);
            start = end;
        }
        let outputs = chunks.first().map_or(0, Vec::len);
        (0..outputs)
            .map(|i| {
                let parts: Vec<&Tensor> = chunks.iter().map(|c| &c[i]).collect();
                Ok(Tensor::cat(&parts, 0)?)
            })
            .collect()
    }

    /// The attention `groups` of the pack rows `chunk` side by side (see `PaddedBatch`): each
    /// reads its context's keys in `prefix`, then the pack rows it sees.
    fn packed_layout(
        &self,
        batch: &PackedBatch,
        groups: Vec<Range<usize>>,
        chunk: Range<usize>,
        prefix: &ContextPrefix,
    ) -> Result<PaddedBatch> {
        let window = self.config.sliding_window;
        let members = groups
            .into_iter()
            .map(|rows| {
                let visible = batch.visible(rows.clone());
                let mut key_columns = Vec::new();
                for &(context, len) in &visible.contexts {
                    let at = prefix.offsets[context];
                    key_columns.extend((at..at + len).map(|c| c as u32));
                }
                key_columns.extend(visible.rows.iter().map(|&r| (prefix.total + r) as u32));
                Member {
                    query_rows: (rows.start - chunk.start..rows.end - chunk.start)
                        .map(|r| r as u32)
                        .collect(),
                    key_columns,
                    global: Some(batch.mask(rows.clone(), &visible, None)),
                    sliding: Some(batch.mask(rows, &visible, Some(window))),
                }
            })
            .collect();
        PaddedBatch::new(
            members,
            chunk.len(),
            prefix.layers.clone(),
            &self.device,
            self.dtype,
        )
    }

    /// The keys pack rows `rows` (a chunk starting at `chunk_start`) attend to, and their masks.
    fn attention_group(
        &self,
        batch: &PackedBatch,
        contexts: &[KvCache],
        rows: Range<usize>,
        chunk_start: usize,
    ) -> Result<AttentionGroup> {
        let visible = batch.visible(rows.clone());
        let fixed = (0..self.layers.len())
            .map(|layer| {
                let parts: Vec<&(Tensor, Tensor)> = visible
                    .contexts
                    .iter()
                    .filter_map(|&(c, _)| contexts[c].layers.get(layer).and_then(Option::as_ref))
                    .collect();
                Ok(match parts.as_slice() {
                    [] => None,
                    [one] => Some((*one).clone()),
                    many => {
                        let keys: Vec<&Tensor> = many.iter().map(|(k, _)| k).collect();
                        let values: Vec<&Tensor> = many.iter().map(|(_, v)| v).collect();
                        Some((Tensor::cat(&keys, 2)?, Tensor::cat(&values, 2)?))
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let columns: Vec<u32> = visible.rows.iter().map(|&r| r as u32).collect();
        let keys = visible.contexts.iter().map(|&(_, len)| len).sum::<usize>() + columns.len();
        let mask = |window| {
            Tensor::from_vec(
                batch.mask(rows.clone(), &visible, window),
                (rows.len(), keys),
                &self.device,
            )?
            .to_dtype(self.dtype)
        };
        Ok(AttentionGroup {
            masks: (
                Some(mask(None)?),
                Some(mask(Some(self.config.sliding_window))?),
            ),
            rows: rows.start - chunk_start..rows.end - chunk_start,
            fixed,
            select: KeySelect::Columns(Tensor::new(columns.as_slice(), &self.device)?),
        })
    }
}

/// A packed pass's cached contexts end to end, per layer: the keys its padded layout reads
/// first, laid out once a pass.
struct ContextPrefix {
    layers: Vec<Option<(Tensor, Tensor)>>,
    /// Where each context's keys begin.
    offsets: Vec<usize>,
    total: usize,
}

impl ContextPrefix {
    fn of(contexts: &[KvCache], layers: usize) -> Result<Self> {
        let mut offsets = Vec::with_capacity(contexts.len());
        let mut total = 0;
        for context in contexts {
            offsets.push(total);
            total += context.len;
        }
        let layers = (0..layers)
            .map(|layer| {
                let parts: Vec<&(Tensor, Tensor)> = contexts
                    .iter()
                    .filter_map(|c| c.layers.get(layer).and_then(Option::as_ref))
                    .collect();
                if parts.is_empty() {
                    return Ok(None);
                }
                if parts.len() < contexts.len() {
                    // Offsets count every context's keys: one missing a layer would shift the rest.
                    return Err(EngineError::Unsupported(
                        "a cached context without every layer",
                    ));
                }
                let keys: Vec<&Tensor> = parts.iter().map(|(k, _)| k).collect();
                let values: Vec<&Tensor> = parts.iter().map(|(_, v)| v).collect();
                Ok(Some((Tensor::cat(&keys, 2)?, Tensor::cat(&values, 2)?)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            layers,
            offsets,
            total,
        })
    }
}
