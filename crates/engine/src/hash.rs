//! Hashing of integer keys (stored codes, `f64` bits) for the hash-mapped
//! groupings and value counts: one multiply per key instead of SipHash's
//! rounds. Keys come from the dataset itself, not from a network, so
//! resistance to chosen collisions buys nothing here; on the census a
//! `freq` of a wide variable (INCTOT, ~10^5 distinct values over 14.1 M
//! rows) measured 751 ms with the standard hasher (docs/BENCHMARKS.md).

use std::hash::{BuildHasherDefault, Hasher};

/// Multiplicative hasher for integer keys (Fibonacci hashing, with the
/// high half folded into the low bits the table indexes by).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IntHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(K);
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// A `HashMap` keyed by integers with [`IntHasher`].
pub(crate) type IntMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<IntHasher>>;
/// A `HashSet` of integers with [`IntHasher`].
pub(crate) type IntSet<K> = std::collections::HashSet<K, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_and_strided_keys_spread_over_buckets() {
        // The low 10 bits of the hash (a 1024-bucket table) of 8192
        // sequential keys, and of keys strided by 1024, fill every bucket
        // about evenly.
        for stride in [1u64, 1024, 1 << 20] {
            let mut buckets = [0u32; 1024];
            for i in 0..8192u64 {
                let mut h = IntHasher::default();
                h.write_u64(i * stride);
                buckets[(h.finish() & 1023) as usize] += 1;
            }
            let max = *buckets.iter().max().unwrap();
            assert!(
                max <= 24,
                "stride {stride}: a bucket holds {max} of 8192 keys"
            );
        }
    }
}
