//! FNV-1a hashing for the module's in-memory maps, keyed by short names (queues, topics,
//! users) looked up on every command, where SipHash cost more than the rest of a lookup.
//! The keys are not chosen by an attacker who could profit from collisions: they are the
//! names of keys the caller may already write.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }

    /// An integer (a client id, a name's length prefix) in one step, not byte by byte.
    fn write_u64(&mut self, v: u64) {
        let h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        self.0 = (h ^ v).wrapping_mul(0x100_0000_01b3);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

pub type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;
pub type FnvSet<K> = HashSet<K, BuildHasherDefault<Fnv>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_test_vectors() {
        let hash = |b: &[u8]| {
            let mut h = Fnv::default();
            h.write(b);
            h.finish()
        };
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
        let mut m: FnvMap<Vec<u8>, u32> = FnvMap::default();
        m.insert(b"q".to_vec(), 1);
        assert_eq!(m.get(&b"q"[..]), Some(&1));
    }

    #[test]
    fn integers_in_one_step_still_spread() {
        let hash = |v: u64| {
            let mut h = Fnv::default();
            h.write_u64(v);
            h.finish()
        };
        // Client ids come in sequence: their buckets (low bits) must differ.
        let low: FnvSet<u64> = (1..=1024).map(|id| hash(id) & 1023).collect();
        assert_eq!(low.len(), 1024);
        let mut m: FnvMap<u64, u64> = FnvMap::default();
        m.extend((0..10_000).map(|id| (id, id * 2)));
        assert!((0..10_000).all(|id| m.get(&id) == Some(&(id * 2))));
    }
}
