//! Attention over one forward step's rows, after the projections, norms and RoPE have run on
//! every row at once. Two layouts:
//!
//! - **Groups**: each group of rows attends to its own keys, one small product per group. Rows
//!   packed together never pay for each other's keys, which suits the CPU, where work is cost.
//! - **Padded**: the sequences an encoder reads side by side, or a packed pass's groups after
//!   their cached openings, are laid out in buckets of equal width (similar widths together,
//!   padding masked), and each bucket's attention is one batched product. On a GPU the cost of a
//!   batch is kernel launches, not arithmetic: per layer the groups take about ten launches a
//!   sequence, the padded layout about fifteen a bucket.

use candle_core::{DType, Device, Tensor};

use crate::error::Result;

/// Rows of one forward step that attend to the same keys: the cached contexts they continue
/// and the pack rows on their chains. The linear layers still run on the whole step.
pub(super) struct AttentionGroup {
    /// Rows of the step.
    pub rows: std::ops::Range<usize>,
    /// Per layer, the cached contexts' keys and values (prepended).
    pub fixed: Vec<Option<(Tensor, Tensor)>>,
    /// Which of the keys computed so far in this pass (earlier steps, then this one) it sees.
    pub select: KeySelect,
    /// Additive masks over its keys, for global and for sliding layers; `None` where every key
    /// is visible (an encoder's text shorter than the window), which saves the addition.
    pub masks: (Option<Tensor>, Option<Tensor>),
}

pub(super) enum KeySelect {
    All,
    /// A contiguous stretch: a view, where a list of columns would copy the keys every layer.
    Range(std::ops::Range<usize>),
    Columns(Tensor),
}

/// How a step's rows attend.
pub(super) enum Attend {
    Groups(Vec<AttentionGroup>),
    Padded(PaddedBatch),
}

/// The attention heads' shape: query heads, key/value heads, their width, the score scale.
pub(super) struct Heads {
    pub query: usize,
    pub kv: usize,
    pub dim: usize,
    pub scale: f64,
}

impl Heads {
    /// Grouped-query attention without copying K/V: each KV head's queries folded into rows.
    fn per_kv(&self) -> usize {
        self.query / self.kv
    }
}

/// Attention of each group (`q` `[1, heads, rows, dim]`, `k`/`v` every key so far) to its keys:
/// `[rows, heads * dim]`.
pub(super) fn attend_groups(
    heads: &Heads,
    layer_index: usize,
    sliding: bool,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    groups: &[AttentionGroup],
) -> Result<Tensor> {
    let (hq, hkv, hd, per_kv) = (heads.query, heads.kv, heads.dim, heads.per_kv());
    let mut outputs = Vec::with_capacity(groups.len());
    for group in groups {
        let rows = group.rows.len();
        let q = q.narrow(2, group.rows.start, rows)?.contiguous()?;
        let (k, v) = match &group.select {
            KeySelect::Columns(columns) => {
                (k.index_select(columns, 2)?, v.index_select(columns, 2)?)
            }
            KeySelect::Range(keys) => (
                k.narrow(2, keys.start, keys.len())?.contiguous()?,
                v.narrow(2, keys.start, keys.len())?.contiguous()?,
            ),
            KeySelect::All => (k.clone(), v.clone()),
        };
        let (k, v) = match &group.fixed[layer_index] {
            Some((fk, fv)) => (Tensor::cat(&[fk, &k], 2)?, Tensor::cat(&[fv, &v], 2)?),
            None => (k, v),
        };
        let mask = if sliding {
            &group.masks.1
        } else {
            &group.masks.0
        };
        let seen = k.dim(2)?;
        let q = q.reshape((hkv, per_kv * rows, hd))?;
        let k = k.reshape((hkv, seen, hd))?;
        let v = v.reshape((hkv, seen, hd))?;
        let scores = (q.matmul(&k.t()?)? * heads.scale)?.reshape((hkv, per_kv, rows, seen))?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(mask)?,
            None => scores,
        };
        let probs =
            candle_nn::ops::softmax_last_dim(&scores)?.reshape((hkv, per_kv * rows, seen))?;
        let out = probs.matmul(&v)?; // [hkv, per_kv*rows, hd]
        outputs.push(
            out.reshape((hq, rows, hd))?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((rows, hq * hd))?,
        );
    }
    Ok(if outputs.len() == 1 {
        outputs.remove(0)
    } else {
        Tensor::cat(&outputs, 0)?
    })
}

/// Rows of one step that attend side by side in buckets of equal width, each bucket's attention
/// one batched product: an encoder's sequences read from empty caches
/// ([`PaddedBatch::independent`]), or the attention groups of a packed pass after their cached
/// contexts (`Gemma3::packed_layout`, in `packed.rs`). Similar widths share a bucket; padding is
/// masked.
pub(super) struct PaddedBatch {
    buckets: Vec<Bucket>,
    /// For each row of the step, its row in the buckets' outputs laid end to end.
    restore: Tensor,
    /// Per layer, keys and values laid before the pass's own (the cached contexts, end to end);
    /// key columns count from the first of them.
    prefix: Vec<Option<(Tensor, Tensor)>>,
}

struct Bucket {
    sequences: usize,
    /// Query cells per sequence.
    queries: usize,
    /// Key cells per sequence.
    keys: usize,
    /// For each query cell (sequence-major), the step row it reads; padding reads the sequence's
    /// first row and is dropped.
    query_rows: Tensor,
    /// For each key cell, its column among the prefix's keys then the pass's; padding reads the
    /// sequence's first key, which the mask then hides.
    key_columns: Tensor,
    /// `[sequences, 1, 1, queries, keys]` additive masks for global and sliding layers; `None`
    /// where every cell is a real key within reach.
    masks: (Option<Tensor>, Option<Tensor>),
}

/// One sequence of a padded layout: the step rows that query, the key columns they read, and
/// which of those each query sees (`query_rows.len() × key_columns.len()`, additive; `None`:
/// every key).
pub(super) struct Member {
    pub query_rows: Vec<u32>,
    pub key_columns: Vec<u32>,
    pub global: Option<Vec<f32>>,
    pub sliding: Option<Vec<f32>>,
}

/// A bucket grows while its padding stays under a quarter of its cells, or under this many rows.
const PADDING_SLACK_ROWS: usize = 64;

impl PaddedBatch {
    /// The layout for sequences of `lengths` whose rows follow one another in the step, each
    /// reading all of itself (bidirectionally). `window`: how far a sliding layer sees (keys less
    /// than `window` away on either side).
    pub fn independent(
        lengths: &[usize],
        window: usize,
        device: &Device,
        dtype: DType,
    ) -> Result<Self> {
        let mut members = Vec::with_capacity(lengths.len());
        let mut at = 0u32;
        for &len in lengths {
            let rows: Vec<u32> = (at..at + len as u32).collect();
            at += len as u32;
            members.push(Member {
                key_columns: rows.clone(),
                query_rows: rows,
                global: None,
                sliding: (len > window).then(|| window_mask(len, window)),
            });
        }
        Self::new(members, at as usize, Vec::new(), device, dtype)
    }

    /// The layout of `members` over a step of `rows` rows, after `prefix`'s keys.
    pub fn new(
        members: Vec<Member>,
        rows: usize,
        prefix: Vec<Option<(Tensor, Tensor)>>,
        device: &Device,
        dtype: DType,
    ) -> Result<Self> {
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by_key(|&i| (members[i].key_columns.len(), i));
        let mut grouped: Vec<Vec<usize>> = Vec::new();
        let mut cells_used = 0;
        for &i in &order {
            let width = members[i].key_columns.len();
            let fits = grouped.last().is_some_and(|bucket| {
                // Sorted ascending: the newcomer sets the width.
                let cells = (bucket.len() + 1) * width;
                let real = cells_used + width;
                cells - real <= (cells / 4).max(PADDING_SLACK_ROWS)
            });
            if !fits {
                grouped.push(Vec::new());
                cells_used = 0;
            }
            grouped.last_mut().expect("a bucket").push(i);
            cells_used += width;
        }
        let mut restore = vec![0u32; rows];
        let mut offset = 0;
        let mut buckets = Vec::with_capacity(grouped.len());
        for bucket in grouped {
            let bucket: Vec<&Member> = bucket.iter().map(|&i| &members[i]).collect();
            let queries = bucket.iter().map(|m| m.query_rows.len()).max().unwrap_or(0);
            let keys = bucket
                .iter()
                .map(|m| m.key_columns.len())
                .max()
                .unwrap_or(0);
            let mut query_rows = Vec::with_capacity(bucket.len() * queries);
            let mut key_columns = Vec::with_capacity(bucket.len() * keys);
            for (slot, member) in bucket.iter().enumerate() {
                let first_row = member.query_rows.first().copied().unwrap_or(0);
                let first_key = member.key_columns.first().copied().unwrap_or(0);
                for p in 0..queries {
                    query_rows.push(member.query_rows.get(p).copied().unwrap_or(first_row));
                }
                for p in 0..keys {
                    key_columns.push(member.key_columns.get(p).copied().unwrap_or(first_key));
                }
                for (p, &row) in member.query_rows.iter().enumerate() {
                    restore[row as usize] = (offset + slot * queries + p) as u32;
                }
            }
            let to_device = |mask: Option<Vec<f32>>| -> Result<Option<Tensor>> {
                mask.map(|m| {
                    Ok(
                        Tensor::from_vec(m, (bucket.len(), 1, 1, queries, keys), device)?
                            .to_dtype(dtype)?,
                    )
                })
                .transpose()
            };
            let global = bucket_mask(&bucket, queries, keys, |m| m.global.as_deref());
            let sliding = bucket_mask(&bucket, queries, keys, |m| m.sliding.as_deref());
            // Short prompts see every key on sliding layers too: one mask, sent once.
            let masks = if global == sliding {
                let mask = to_device(global)?;
                (mask.clone(), mask)
            } else {
                (to_device(global)?, to_device(sliding)?)
            };
            buckets.push(Bucket {
                sequences: bucket.len(),
                queries,
                keys,
                query_rows: Tensor::from_vec(query_rows, bucket.len() * queries, device)?,
                key_columns: Tensor::from_vec(key_columns, bucket.len() * keys, device)?,
                masks,
            });
            offset += bucket.len() * queries;
        }
        Ok(Self {
            buckets,
            restore: Tensor::from_vec(restore, rows, device)?,
            prefix,
        })
    }

    /// Attention of each sequence to its own keys (`q` `[1, heads, rows, dim]` over the step's
    /// rows, `k`/`v` every key of the pass so far, as [`attend_groups`] takes them):
    /// `[rows, heads * dim]`, as [`attend_groups`] gives it.
    pub fn attend(
        &self,
        heads: &Heads,
        layer_index: usize,
        sliding: bool,
        (q, k, v): (&Tensor, &Tensor, &Tensor),
    ) -> Result<Tensor> {
        let (hq, hkv, hd, per_kv) = (heads.query, heads.kv, heads.dim, heads.per_kv());
        let (k, v) = match self.prefix.get(layer_index).and_then(Option::as_ref) {
            Some((pk, pv)) => (Tensor::cat(&[pk, k], 2)?, Tensor::cat(&[pv, v], 2)?),
            None => (k.clone(), v.clone()),
        };
        let mut outputs = Vec::with_capacity(self.buckets.len());
        for bucket in &self.buckets {
            let n = bucket.sequences;
            // [1, heads, rows, dim] -> [n, heads, width, dim]
            let pad = |t: &Tensor, cells: &Tensor, count: usize, width: usize| -> Result<Tensor> {
                Ok(t.index_select(cells, 2)?
                    .reshape((count, n, width, hd))?
                    .transpose(0, 1)?
                    .contiguous()?)
            };
            let (wq, wk) = (bucket.queries, bucket.keys);
            let q = pad(q, &bucket.query_rows, hq, wq)?.reshape((n, hkv, per_kv * wq, hd))?;
            let k = pad(&k, &bucket.key_columns, hkv, wk)?;
            let v = pad(&v, &bucket.key_columns, hkv, wk)?;
            let scores = (q.matmul(&k.t()?)? * heads.scale)?.reshape((n, hkv, per_kv, wq, wk))?;
            let mask = if sliding {
                &bucket.masks.1
            } else {
                &bucket.masks.0
            };
            let scores = match mask {
                Some(mask) => scores.broadcast_add(mask)?,
                None => scores,
            };
            let probs =
                candle_nn::ops::softmax_last_dim(&scores)?.reshape((n, hkv, per_kv * wq, wk))?;
            outputs.push(
                probs
                    .matmul(&v)? // [n, hkv, per_kv*wq, dim]
                    .reshape((n, hq, wq, hd))?
                    .transpose(1, 2)?
                    .contiguous()?
                    .reshape((n * wq, hq * hd))?,
            );
        }
        let laid_out = if outputs.len() == 1 {
            outputs.remove(0)
        } else {
            Tensor::cat(&outputs, 0)?
        };
        Ok(laid_out.index_select(&self.restore, 0)?)
    }
}

/// A bidirectional sequence's sliding mask, `len × len`: keys less than `window` away.
fn window_mask(len: usize, window: usize) -> Vec<f32> {
    let mut mask = Vec::with_capacity(len * len);
    for query in 0..len {
        for key in 0..len {
            let visible = query.abs_diff(key) < window;
            mask.push(if visible { 0.0 } else { f32::NEG_INFINITY });
        }
    }
    mask
}

/// A bucket's additive mask, `members.len() × queries × keys` (query, then key): each member's
/// own where it has one, every real key where not, padding keys hidden. A padding query sees its
/// sequence's first key only, so its row stays finite (it is dropped). `None` when nothing is
/// hidden.
fn bucket_mask(
    members: &[&Member],
    queries: usize,
    keys: usize,
    own: impl Fn(&Member) -> Option<&[f32]>,
) -> Option<Vec<f32>> {
    let hides =
        |m: &Member| own(m).is_some() || m.key_columns.len() < keys || m.query_rows.len() < queries;
    if !members.iter().any(|m| hides(m)) {
        return None;
    }
    let mut mask = vec![f32::NEG_INFINITY; members.len() * queries * keys];
    for (slot, member) in members.iter().enumerate() {
        let (rows, width) = (member.query_rows.len(), member.key_columns.len());
        let block = &mut mask[slot * queries * keys..(slot + 1) * queries * keys];
        for query in 0..queries {
            let line = &mut block[query * keys..(query + 1) * keys];
            if query >= rows {
                line[0] = 0.0;
                continue;
            }
            match own(member) {
                Some(own) => {
                    line[..width].copy_from_slice(&own[query * width..(query + 1) * width])
                }
                None => line[..width].fill(0.0),
            }
        }
    }
    Some(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gemma3, KvCache, Output, WeightFormat};
    use crate::packing::{PackRequest, PackedBatch};
    use crate::source::WeightFiles;
    use crate::synthetic::{write_synthetic_gguf, GemmaShape, SyntheticSpec};

    /// The tiny synthetic Gemma read as an encoder (bidirectional), in f32 on the CPU.
    fn tiny_encoder() -> (tempfile::TempDir, Gemma3) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        let spec = SyntheticSpec {
            shape: GemmaShape::tiny(),
            seed: 7,
            dtype: candle_core::quantized::GgmlDType::F32,
        };
        write_synthetic_gguf(&path, &spec, &mut |_, _| {}).unwrap();
        let mut model = Gemma3::load(&WeightFiles::Gguf(path), WeightFormat::F32, &Device::Cpu)
            .expect("the tiny model loads");
        model.config.bidirectional = true;
        (dir, model)
    }

    #[test]
    fn the_padded_layout_reads_each_sequence_as_the_groups_do() {
        let (_dir, mut model) = tiny_encoder();
        // Shorter and longer than the tiny model's window of 16, in two buckets.
        let sequences: Vec<Vec<u32>> = [5usize, 20, 3, 40, 18]
            .iter()
            .enumerate()
            .map(|(s, &len)| (0..len).map(|i| (s * 97 + i * 13) as u32 % 2000).collect())
            .collect();
        let sequences: Vec<&[u32]> = sequences.iter().map(Vec::as_slice).collect();
        let taps = [1, 6];
        model.padded_attention = false;
        let grouped = model.forward_independent_taps(&sequences, &taps).unwrap();
        model.padded_attention = true;
        let padded = model.forward_independent_taps(&sequences, &taps).unwrap();
        assert_close(&grouped, &padded);
    }

    #[test]
    fn a_packed_pass_reads_the_same_padded_as_in_groups() {
        let (_dir, mut model) = tiny_encoder();
        model.config.bidirectional = false;
        // Two cached openings (one past the window of 16), prompts after each and after none,
        // two sharing their first tokens.
        let openings: [Vec<u32>; 2] = [(1..6).collect(), (30..50).collect()];
        let contexts: Vec<KvCache> = openings
            .iter()
            .map(|opening| {
                let mut kv = KvCache::default();
                model.forward(opening, &mut kv).unwrap();
                kv
            })
            .collect();
        let (first, second): (Vec<u32>, Vec<u32>) = ((60..80).collect(), vec![90]);
        let requests = [
            (Some((0, 5)), &[7, 8, 9][..]),
            (Some((0, 5)), &[7, 8, 10, 11, 12][..]),
            (Some((1, 20)), &first[..]),
            (None, &[3, 4][..]),
            (Some((1, 20)), &second[..]),
        ]
        .map(|(context, rest)| PackRequest { context, rest });
        let batch = PackedBatch::build(&requests);
        for chunk in [6, 512] {
            for output in [Output::Final, Output::Taps(&[1, 3])] {
                model.padded_attention = false;
                let grouped = model
                    .forward_packed(&batch, &contexts, chunk, output)
                    .unwrap();
                model.padded_attention = true;
                let padded = model
                    .forward_packed(&batch, &contexts, chunk, output)
                    .unwrap();
                assert_close(&grouped, &padded);
            }
        }
    }

    fn assert_close(want: &[Tensor], got: &[Tensor]) {
        assert_eq!(want.len(), got.len());
        for (a, b) in want.iter().zip(got) {
            assert_eq!(a.dims(), b.dims());
            let diff: f32 = (a - b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar()
                .unwrap();
            let scale: f32 = a.abs().unwrap().max_all().unwrap().to_scalar().unwrap();
            assert!(
                diff <= 1e-5 * scale.max(1.0),
                "differ by {diff} (scale {scale})"
            );
        }
    }

    #[test]
    fn buckets_keep_similar_lengths_together_and_padding_bounded() {
        let lengths = [30, 31, 29, 400, 32, 410];
        let batch = PaddedBatch::independent(&lengths, 512, &Device::Cpu, DType::F32).unwrap();
        let shapes: Vec<(usize, usize, usize)> = batch
            .buckets
            .iter()
            .map(|b| (b.sequences, b.queries, b.keys))
            .collect();
        assert_eq!(shapes, [(4, 32, 32), (2, 410, 410)]);
        // Every row comes back to its place, from its own sequence's cell.
        let restore: Vec<u32> = batch.restore.to_vec1().unwrap();
        assert_eq!(restore.len(), lengths.iter().sum::<usize>());
        let mut sorted = restore.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), restore.len(), "two rows land in one cell");
        let gathered: Vec<u32> = Tensor::cat(
            &batch
                .buckets
                .iter()
                .map(|b| &b.query_rows)
                .collect::<Vec<_>>(),
            0,
        )
        .unwrap()
        .to_vec1()
        .unwrap();
        for (row, &cell) in restore.iter().enumerate() {
            assert_eq!(gathered[cell as usize] as usize, row);
        }
    }

    fn member(rows: usize, keys: usize, own: Option<Vec<f32>>) -> Member {
        Member {
            query_rows: (0..rows as u32).collect(),
            key_columns: (0..keys as u32).collect(),
            global: own,
            sliding: None,
        }
    }

    #[test]
    fn the_mask_hides_padding_and_what_lies_beyond_the_window() {
        let full = [member(3, 3, None), member(3, 3, None)];
        let full: Vec<&Member> = full.iter().collect();
        assert_eq!(bucket_mask(&full, 3, 3, |m| m.global.as_deref()), None);
        let inf = f32::NEG_INFINITY;
        let short = member(2, 2, None);
        #[rustfmt::skip]
        let expected = [
            0.0, 0.0, inf, // query 0 sees keys 0 and 1
            0.0, 0.0, inf, // query 1 sees keys 0 and 1
            0.0, inf, inf, // padding sees its first key only
        ];
        assert_eq!(
            bucket_mask(&[&short], 3, 3, |m| m.global.as_deref()).unwrap(),
            expected
        );
        assert_eq!(
            &window_mask(3, 2)[..3],
            [0.0, 0.0, inf],
            "2 away is beyond a window of 2"
        );
        // A member's own mask (a causal chain after one context key) is kept, padding added.
        let causal = member(2, 3, Some(vec![0.0, 0.0, inf, 0.0, 0.0, 0.0]));
        #[rustfmt::skip]
        let expected = [
            0.0, 0.0, inf, inf,
            0.0, 0.0, 0.0, inf,
        ];
        assert_eq!(
            bucket_mask(&[&causal], 2, 4, |m| m.global.as_deref()).unwrap(),
            expected
        );
    }
}
