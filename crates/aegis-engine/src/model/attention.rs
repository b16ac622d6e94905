//! Attention over one forward step's rows, after the projections, norms and RoPE have run on
//! every row at once. Two layouts:
//!
//! - **Groups**: each group of rows attends to its own keys, one small product per group. Rows
//!   packed together never pay for each other's keys, which suits the CPU, where work is cost.
//! - **Padded**: the sequences an encoder reads side by side are laid out in buckets of equal
//!   width (similar lengths together, padding masked), and each bucket's attention is one batched
//!   product. On a GPU the cost of a batch is kernel launches, not arithmetic: per layer the
//!   groups take about ten launches a sequence, the padded layout about fifteen a bucket.

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

/// Sequences read side by side from empty caches (an encoder's batch), laid out for batched
/// attention: buckets of similar lengths padded to the longest in each.
pub(super) struct PaddedBatch {
    buckets: Vec<Bucket>,
    /// For each row of the step, its row in the buckets' outputs laid end to end.
    restore: Tensor,
}

struct Bucket {
    sequences: usize,
    width: usize,
    /// For each padded cell (sequence-major), the step row it reads; padding reads its
    /// sequence's first row, whose key it then masks.
    gather: Tensor,
    /// `[sequences, 1, 1, width, width]` additive masks for global and sliding layers; `None`
    /// where every cell is a real key within reach.
    masks: (Option<Tensor>, Option<Tensor>),
}

/// A bucket grows while its padding stays under a quarter of its cells, or under this many rows.
const PADDING_SLACK_ROWS: usize = 64;

impl PaddedBatch {
    /// The layout for sequences of `lengths` whose rows follow one another in the step.
    /// `window`: how far a sliding layer sees (keys less than `window` away on either side).
    pub fn new(lengths: &[usize], window: usize, device: &Device, dtype: DType) -> Result<Self> {
        let mut starts = Vec::with_capacity(lengths.len());
        let mut at = 0;
        for &len in lengths {
            starts.push(at);
            at += len;
        }
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&i| (lengths[i], i));
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut tokens = 0;
        for &i in &order {
            let fits = members.last().is_some_and(|bucket| {
                // Sorted ascending: the newcomer sets the width.
                let cells = (bucket.len() + 1) * lengths[i];
                let real = tokens + lengths[i];
                cells - real <= (cells / 4).max(PADDING_SLACK_ROWS)
            });
            if !fits {
                members.push(Vec::new());
                tokens = 0;
            }
            members.last_mut().expect("a bucket").push(i);
            tokens += lengths[i];
        }
        let mut restore = vec![0u32; at];
        let mut offset = 0;
        let mut buckets = Vec::with_capacity(members.len());
        for bucket in members {
            let width = bucket.iter().map(|&i| lengths[i]).max().unwrap_or(0);
            let mut gather = Vec::with_capacity(bucket.len() * width);
            for (slot, &i) in bucket.iter().enumerate() {
                for p in 0..width {
                    gather.push((starts[i] + if p < lengths[i] { p } else { 0 }) as u32);
                }
                for p in 0..lengths[i] {
                    restore[starts[i] + p] = (offset + slot * width + p) as u32;
                }
            }
            let bucket_lengths: Vec<usize> = bucket.iter().map(|&i| lengths[i]).collect();
            let mask = |window: Option<usize>| padded_mask(&bucket_lengths, width, window);
            let to_device = |mask: Option<Vec<f32>>| -> Result<Option<Tensor>> {
                mask.map(|m| {
                    Ok(
                        Tensor::from_vec(m, (bucket.len(), 1, 1, width, width), device)?
                            .to_dtype(dtype)?,
                    )
                })
                .transpose()
            };
            buckets.push(Bucket {
                sequences: bucket.len(),
                width,
                gather: Tensor::from_vec(gather, bucket.len() * width, device)?,
                masks: (to_device(mask(None))?, to_device(mask(Some(window)))?),
            });
            offset += bucket.len() * width;
        }
        Ok(Self {
            buckets,
            restore: Tensor::from_vec(restore, at, device)?,
        })
    }

    /// Attention of each sequence to its own keys (`q`, `k`, `v` `[1, heads, rows, dim]` over
    /// the step's rows): `[rows, heads * dim]`, as [`attend_groups`] gives it.
    pub fn attend(
        &self,
        heads: &Heads,
        sliding: bool,
        (q, k, v): (&Tensor, &Tensor, &Tensor),
    ) -> Result<Tensor> {
        let (hq, hkv, hd, per_kv) = (heads.query, heads.kv, heads.dim, heads.per_kv());
        let mut outputs = Vec::with_capacity(self.buckets.len());
        for bucket in &self.buckets {
            let (n, w) = (bucket.sequences, bucket.width);
            // [1, heads, rows, dim] -> [n, heads, w, dim]
            let pad = |t: &Tensor, count: usize| -> Result<Tensor> {
                Ok(t.index_select(&bucket.gather, 2)?
                    .reshape((count, n, w, hd))?
                    .transpose(0, 1)?
                    .contiguous()?)
            };
            let q = pad(q, hq)?.reshape((n, hkv, per_kv * w, hd))?;
            let (k, v) = (pad(k, hkv)?, pad(v, hkv)?);
            let scores = (q.matmul(&k.t()?)? * heads.scale)?.reshape((n, hkv, per_kv, w, w))?;
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
                candle_nn::ops::softmax_last_dim(&scores)?.reshape((n, hkv, per_kv * w, w))?;
            outputs.push(
                probs
                    .matmul(&v)? // [n, hkv, per_kv*w, dim]
                    .reshape((n, hq, w, hd))?
                    .transpose(1, 2)?
                    .contiguous()?
                    .reshape((n * w, hq * hd))?,
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

/// The additive mask of a bucket, `lengths.len() × width × width` (query, then key): a key is
/// seen when it is real and, on sliding layers, less than `window` away. A padding query sees its
/// sequence's first key only, so its row stays finite (it is dropped). `None` when nothing is
/// hidden.
fn padded_mask(lengths: &[usize], width: usize, window: Option<usize>) -> Option<Vec<f32>> {
    let hides = |len: usize| len < width || window.is_some_and(|w| len > w);
    if !lengths.iter().any(|&len| hides(len)) {
        return None;
    }
    let mut mask = Vec::with_capacity(lengths.len() * width * width);
    for &len in lengths {
        for query in 0..width {
            for key in 0..width {
                let visible = if query < len {
                    key < len && window.is_none_or(|w| query.abs_diff(key) < w)
                } else {
                    key == 0
                };
                mask.push(if visible { 0.0 } else { f32::NEG_INFINITY });
            }
        }
    }
    Some(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gemma3, WeightFormat};
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
        for (a, b) in grouped.iter().zip(&padded) {
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
        let batch = PaddedBatch::new(&lengths, 512, &Device::Cpu, DType::F32).unwrap();
        let shapes: Vec<(usize, usize)> = batch
            .buckets
            .iter()
            .map(|b| (b.sequences, b.width))
            .collect();
        assert_eq!(shapes, [(4, 32), (2, 410)]);
        // Every row comes back to its place, from its own sequence's cell.
        let restore: Vec<u32> = batch.restore.to_vec1().unwrap();
        assert_eq!(restore.len(), lengths.iter().sum::<usize>());
        let mut sorted = restore.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), restore.len(), "two rows land in one cell");
        let gathered: Vec<u32> = Tensor::cat(
            &batch.buckets.iter().map(|b| &b.gather).collect::<Vec<_>>(),
            0,
        )
        .unwrap()
        .to_vec1()
        .unwrap();
        for (row, &cell) in restore.iter().enumerate() {
            assert_eq!(gathered[cell as usize] as usize, row);
        }
    }

    #[test]
    fn the_mask_hides_padding_and_what_lies_beyond_the_window() {
        assert_eq!(padded_mask(&[3, 3], 3, None), None);
        assert_eq!(padded_mask(&[3, 3], 3, Some(4)), None);
        let mask = padded_mask(&[2], 3, Some(2)).unwrap();
        let inf = f32::NEG_INFINITY;
        #[rustfmt::skip]
        let expected = [
            0.0, 0.0, inf, // query 0 sees keys 0 and 1
            0.0, 0.0, inf, // query 1 sees keys 0 and 1 (1 away)
            0.0, inf, inf, // padding sees its first key only
        ];
        assert_eq!(mask, expected);
        let mask = padded_mask(&[3], 3, Some(2)).unwrap();
        assert_eq!(
            &mask[..3],
            [0.0, 0.0, inf],
            "2 away is beyond a window of 2"
        );
    }
}
