//! Keys and values of static prompt openings (template text before the user's text), kept across
//! requests so each request computes only what follows them. Entries are keyed by their tokens,
//! so an edited template can never reuse a stale entry; memory is bounded, least recently used
//! entries go first.

use std::collections::HashMap;

use crate::config::Gemma3Config;
use crate::model::KvCache;

/// Tokens of template openings the cache holds by default on a GPU: 64 openings of 512 tokens, a
/// team's validators with their variants and rejection prompts. The H100 run of 2026-11-24 had a
/// fixed 256 MiB evict the 4B's 26 MB openings 327 times in one bench.
const GPU_OPENING_TOKENS: usize = 32_768;
/// On the CPU a quarter of that: the 270M's f32 keys and values (36 KiB a token) then take
/// about what the fixed 256 MiB gave, and a 4B in host memory stays within a few GiB.
const CPU_OPENING_TOKENS: usize = 8_192;

/// The cache's default size for `config` with keys and values of `dtype_bytes` each: room for a
/// number of opening tokens that depends on the device, whatever the model's size.
pub(crate) fn default_capacity_bytes(
    config: &Gemma3Config,
    dtype_bytes: usize,
    on_gpu: bool,
) -> usize {
    let per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * dtype_bytes;
    let tokens = if on_gpu {
        GPU_OPENING_TOKENS
    } else {
        CPU_OPENING_TOKENS
    };
    per_token * tokens
}

/// What the cache holds and how it has served, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PrefixCacheStats {
    pub entries: usize,
    pub tokens: usize,
    pub bytes: usize,
    pub capacity_bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

struct Entry {
    kv: KvCache,
    bytes: usize,
    last_used: u64,
}

pub(crate) struct PrefixCache {
    entries: HashMap<Vec<u32>, Entry>,
    capacity_bytes: usize,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
}

impl PrefixCache {
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity_bytes,
            bytes: 0,
            clock: 0,
            hits: 0,
            misses: 0,
            evictions: 0,
        }
    }

    /// The cached keys and values of exactly `tokens`, counting a hit or a miss.
    pub fn get(&mut self, tokens: &[u32]) -> Option<KvCache> {
        self.clock += 1;
        match self.entries.get_mut(tokens) {
            Some(entry) => {
                entry.last_used = self.clock;
                self.hits += 1;
                Some(entry.kv.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Keeps `kv` for `tokens`, evicting the least recently used entries to stay in bounds. An
    /// entry larger than the whole capacity is not kept.
    pub fn insert(&mut self, tokens: Vec<u32>, kv: KvCache) {
        let bytes = kv.bytes();
        if bytes > self.capacity_bytes {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.entries.remove(&tokens) {
            self.bytes -= old.bytes;
        }
        while self.bytes + bytes > self.capacity_bytes {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = self.entries.remove(&oldest) {
                self.bytes -= gone.bytes;
                self.evictions += 1;
            }
        }
        self.bytes += bytes;
        self.entries.insert(
            tokens,
            Entry {
                kv,
                bytes,
                last_used: self.clock,
            },
        );
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    pub fn stats(&self) -> PrefixCacheStats {
        PrefixCacheStats {
            entries: self.entries.len(),
            tokens: self.entries.keys().map(Vec::len).sum(),
            bytes: self.bytes,
            capacity_bytes: self.capacity_bytes,
            hits: self.hits,
            misses: self.misses,
            evictions: self.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    /// A one-layer cache of `len` positions: 2 * len * 4 floats = 32 * len bytes.
    fn kv(len: usize) -> KvCache {
        let t = Tensor::zeros((1, 1, len, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
        KvCache::from_parts(vec![Some((t.clone(), t))], len)
    }

    #[test]
    fn the_default_size_follows_the_model_and_the_device() {
        let shape = |layers, kv_heads| Gemma3Config {
            vocab_size: 262_144,
            hidden_size: 640,
            intermediate_size: 2048,
            num_layers: layers,
            num_heads: 4,
            num_kv_heads: kv_heads,
            head_dim: 256,
            rms_norm_eps: 1e-6,
            rope_global_base: 1e6,
            rope_local_base: 1e4,
            rope_global_scale: 1.0,
            sliding_window: 512,
            sliding_window_pattern: 6,
            context_length: 32_768,
            query_pre_attn_scalar: 256.0,
            bidirectional: false,
        };
        // The 270M in f32 on the CPU: 36 KiB a token, 288 MiB.
        assert_eq!(default_capacity_bytes(&shape(18, 1), 4, false), 288 << 20);
        // The 4B in bf16 on a GPU: 136 KiB a token, room for 64 of its 26 MB openings.
        let four_b = default_capacity_bytes(&shape(34, 4), 2, true);
        assert_eq!(four_b, 4352 << 20);
        assert!(four_b / ((190 * 136) << 10) >= 64);
    }

    #[test]
    fn hits_and_misses_are_counted() {
        let mut cache = PrefixCache::new(1 << 20);
        assert!(cache.get(&[1, 2]).is_none());
        cache.insert(vec![1, 2], kv(2));
        assert_eq!(cache.get(&[1, 2]).map(|c| c.len()), Some(2));
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
        assert_eq!((stats.bytes, stats.tokens), (64, 2));
    }

    #[test]
    fn least_recently_used_entries_are_evicted_to_stay_in_bounds() {
        let mut cache = PrefixCache::new(32 * 10);
        cache.insert(vec![1], kv(4));
        cache.insert(vec![2], kv(4));
        cache.get(&[1]); // [2] is now the oldest
        cache.insert(vec![3], kv(4));
        assert!(cache.get(&[2]).is_none());
        assert!(cache.get(&[1]).is_some());
        assert!(cache.get(&[3]).is_some());
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.evictions), (2, 1));
        assert!(stats.bytes <= stats.capacity_bytes);
    }

    #[test]
    fn an_entry_larger_than_the_capacity_is_not_kept() {
        let mut cache = PrefixCache::new(32);
        cache.insert(vec![1], kv(4));
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn clearing_frees_everything() {
        let mut cache = PrefixCache::new(1 << 20);
        cache.insert(vec![1], kv(4));
        cache.clear();
        assert_eq!((cache.stats().entries, cache.stats().bytes), (0, 0));
    }
}
