//! Many prompts as one forward pass: their tokens after a cached context are merged into a token
//! trie (a shared opening is computed once), laid out in one packed sequence, and kept apart by an
//! attention mask in which each token sees only its own ancestors and its own cached context.

use std::collections::HashMap;

/// One prompt to pack: the cached context it continues (if any) and its tokens after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackRequest<'a> {
    /// Index into the contexts passed to the forward pass, and that context's length in tokens.
    pub context: Option<(usize, usize)>,
    pub rest: &'a [u32],
}

/// The unique tokens of a set of prompts, parents before children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PackedBatch {
    pub tokens: Vec<u32>,
    /// Position of each token in its own sequence (context included): what RoPE sees.
    pub positions: Vec<usize>,
    /// The previous token of the same sequence, when it is in the pack.
    pub parents: Vec<Option<usize>>,
    /// The cached context each token continues: `(index, length)`.
    pub contexts: Vec<Option<(usize, usize)>>,
    /// For every prompt, the pack index of each of its tokens after its context.
    pub rows: Vec<Vec<usize>>,
}

impl PackedBatch {
    pub fn build(requests: &[PackRequest<'_>]) -> Self {
        let mut batch = Self::default();
        // (context, parent, token) -> pack index: identical openings become one node.
        let mut nodes: HashMap<(Option<usize>, Option<usize>, u32), usize> = HashMap::new();
        for request in requests {
            let start = request.context.map_or(0, |(_, len)| len);
            let context_index = request.context.map(|(index, _)| index);
            let mut parent = None;
            let mut rows = Vec::with_capacity(request.rest.len());
            for (offset, &token) in request.rest.iter().enumerate() {
                let index = *nodes
                    .entry((context_index, parent, token))
                    .or_insert_with(|| {
                        batch.tokens.push(token);
                        batch.positions.push(start + offset);
                        batch.parents.push(parent);
                        batch.contexts.push(request.context);
                        batch.tokens.len() - 1
                    });
                rows.push(index);
                parent = Some(index);
            }
            batch.rows.push(rows);
        }
        batch
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// `rows` split into runs that share a context and a first pack row (one prompt, or prompts
    /// sharing an opening): each run attends to its own keys only.
    pub fn attention_groups(&self, rows: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
        let mut roots = vec![0usize; rows.end];
        for n in 0..rows.end {
            roots[n] = self.parents[n].map_or(n, |p| roots[p]);
        }
        let key = |n: usize| (self.contexts[n].map(|(c, _)| c), roots[n]);
        let mut groups = Vec::new();
        let mut start = rows.start;
        for n in rows.start + 1..rows.end {
            if key(n) != key(n - 1) {
                groups.push(start..n);
                start = n;
            }
        }
        if start < rows.end {
            groups.push(start..rows.end);
        }
        groups
    }

    /// What the rows `rows` can see: the contexts they continue and the pack rows on their
    /// ancestor chains (themselves included). Attention is computed over these keys only, so
    /// unrelated prompts in the same pack cost nothing but their own rows.
    pub fn visible(&self, rows: std::ops::Range<usize>) -> Visible {
        let mut seen = vec![false; rows.end];
        let mut contexts = Vec::new();
        for row in rows {
            let mut node = Some(row);
            while let Some(n) = node {
                if seen[n] {
                    break; // The rest of this chain is already in.
                }
                seen[n] = true;
                node = self.parents[n];
            }
            if let Some((index, len)) = self.contexts[row] {
                if !contexts.iter().any(|&(i, _)| i == index) {
                    contexts.push((index, len));
                }
            }
        }
        contexts.sort_unstable();
        Visible {
            contexts,
            rows: (0..seen.len()).filter(|&n| seen[n]).collect(),
        }
    }

    /// Additive attention mask for pack rows `rows` over the keys of `visible`, in its order:
    /// every visible context's positions, then the visible pack rows. `window`: a sliding layer
    /// sees only keys fewer than `window` positions back.
    pub fn mask(
        &self,
        rows: std::ops::Range<usize>,
        visible: &Visible,
        window: Option<usize>,
    ) -> Vec<f32> {
        let context_total: usize = visible.contexts.iter().map(|&(_, len)| len).sum();
        let columns = context_total + visible.rows.len();
        let mut column_of = vec![usize::MAX; rows.end];
        for (column, &row) in visible.rows.iter().enumerate() {
            column_of[row] = context_total + column;
        }
        let mut mask = vec![f32::NEG_INFINITY; rows.len() * columns];
        let near = |query: usize, key: usize| window.is_none_or(|w| query - key < w);
        for (r, row) in rows.clone().enumerate() {
            let line = &mut mask[r * columns..(r + 1) * columns];
            let query = self.positions[row];
            let mut node = Some(row);
            while let Some(n) = node {
                if !near(query, self.positions[n]) {
                    break;
                }
                line[column_of[n]] = 0.0;
                node = self.parents[n];
            }
            if let Some((index, len)) = self.contexts[row] {
                let mut offset = 0;
                for &(i, l) in &visible.contexts {
                    if i == index {
                        break;
                    }
                    offset += l;
                }
                for key in 0..len {
                    if near(query, key) {
                        line[offset + key] = 0.0;
                    }
                }
            }
        }
        mask
    }
}

/// The keys a chunk of pack rows attends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Visible {
    /// `(context index, length)`, by index.
    pub contexts: Vec<(usize, usize)>,
    /// Pack rows, ascending.
    pub rows: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_openings_are_packed_once() {
        let batch = PackedBatch::build(&[
            PackRequest {
                context: None,
                rest: &[1, 2, 3],
            },
            PackRequest {
                context: None,
                rest: &[1, 2, 4, 5],
            },
        ]);
        assert_eq!(batch.tokens, vec![1, 2, 3, 4, 5]);
        assert_eq!(batch.positions, vec![0, 1, 2, 2, 3]);
        assert_eq!(
            batch.parents,
            vec![None, Some(0), Some(1), Some(1), Some(3)]
        );
        assert_eq!(batch.rows, vec![vec![0, 1, 2], vec![0, 1, 3, 4]]);
    }

    #[test]
    fn different_contexts_never_share_tokens() {
        let batch = PackedBatch::build(&[
            PackRequest {
                context: Some((0, 10)),
                rest: &[7, 8],
            },
            PackRequest {
                context: Some((1, 4)),
                rest: &[7, 8],
            },
        ]);
        assert_eq!(batch.len(), 4);
        assert_eq!(batch.positions, vec![10, 11, 4, 5]);
    }

    #[test]
    fn identical_prompts_share_every_row() {
        let batch = PackedBatch::build(&[
            PackRequest {
                context: None,
                rest: &[1, 2],
            },
            PackRequest {
                context: None,
                rest: &[1, 2],
            },
        ]);
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.rows[0], batch.rows[1]);
    }

    #[test]
    fn a_token_sees_its_context_and_its_ancestors_only() {
        // Context 0 has 2 tokens; prompt A = ctx0 + [5, 6], prompt B = [5, 7] without context.
        let batch = PackedBatch::build(&[
            PackRequest {
                context: Some((0, 2)),
                rest: &[5, 6],
            },
            PackRequest {
                context: None,
                rest: &[5, 7],
            },
        ]);
        let keys = batch.visible(0..batch.len());
        assert_eq!(keys.contexts, vec![(0, 2)]);
        assert_eq!(keys.rows, vec![0, 1, 2, 3]);
        let mask = batch.mask(0..batch.len(), &keys, None);
        let visible: Vec<Vec<bool>> = mask
            .chunks(2 + batch.len())
            .map(|line| line.iter().map(|v| *v == 0.0).collect())
            .collect();
        let (t, f) = (true, false);
        assert_eq!(
            visible,
            vec![
                // ctx0 ctx1 | A5 A6 B5 B7
                vec![t, t, t, f, f, f],
                vec![t, t, t, t, f, f],
                vec![f, f, f, f, t, f],
                vec![f, f, f, f, t, t],
            ]
        );
    }

    #[test]
    fn rows_split_into_groups_by_context_and_root() {
        let batch = PackedBatch::build(&[
            PackRequest {
                context: Some((0, 3)),
                rest: &[1, 2],
            },
            PackRequest {
                context: Some((0, 3)),
                rest: &[1, 3],
            },
            PackRequest {
                context: Some((1, 3)),
                rest: &[1, 2],
            },
            PackRequest {
                context: None,
                rest: &[9],
            },
        ]);
        // Pack: [1, 2, 3] under context 0 (one root), [1, 2] under context 1, [9] alone.
        assert_eq!(batch.attention_groups(0..6), vec![0..3, 3..5, 5..6]);
        assert_eq!(batch.attention_groups(1..4), vec![1..3, 3..4]);
    }

    #[test]
    fn sliding_window_hides_distant_keys() {
        let batch = PackedBatch::build(&[PackRequest {
            context: Some((0, 3)),
            rest: &[1, 2],
        }]);
        // Row for position 4 with a window of 2 sees positions 3 and 4 only.
        let mask = batch.mask(1..2, &batch.visible(1..2), Some(2));
        let visible: Vec<bool> = mask.iter().map(|v| *v == 0.0).collect();
        assert_eq!(visible, vec![false, false, false, true, true]);
    }

    #[test]
    fn a_chunk_attends_only_to_its_own_chains() {
        // Two unrelated prompts; the chunk holding the second's rows sees none of the first's.
        let batch = PackedBatch::build(&[
            PackRequest {
                context: Some((0, 5)),
                rest: &[1, 2, 3],
            },
            PackRequest {
                context: Some((1, 4)),
                rest: &[4, 5],
            },
        ]);
        let keys = batch.visible(3..5);
        assert_eq!(keys.contexts, vec![(1, 4)]);
        assert_eq!(keys.rows, vec![3, 4]);
        let mask = batch.mask(4..5, &batch.visible(4..5), None);
        assert_eq!(mask, vec![0.0; 6]);
    }
}
