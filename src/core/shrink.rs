//! Process-wide tables give memory back when they empty: a hash map or vector keeps
//! the capacity of its peak (20,000 queues created and removed held their tables' peak
//! size for good). After a removal, a table whose length fell below a quarter of its
//! capacity is shrunk to twice its length: between two reallocations at least a quarter
//! of the capacity is removed or added, so the cost is amortised O(1) per change and a
//! table that hovers around one size never reallocates on every call.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// Below this capacity a table is not worth shrinking.
const MIN_CAPACITY: usize = 64;

/// The capacity to shrink a table of `len` entries and `capacity` to, if it should be.
pub fn target(len: usize, capacity: usize) -> Option<usize> {
    (capacity > MIN_CAPACITY && len < capacity / 4).then_some((len * 2).max(MIN_CAPACITY / 2))
}

/// Shrinks map `m` if it is sparse (see the module's comment); call after removals.
pub fn shrink<K: Eq + Hash, V, S: BuildHasher>(m: &mut HashMap<K, V, S>) {
    if let Some(n) = target(m.len(), m.capacity()) {
        m.shrink_to(n);
    }
}

/// Shrinks vector `v` if it is sparse; call after removals.
pub fn shrink_vec<T>(v: &mut Vec<T>) {
    if let Some(n) = target(v.len(), v.capacity()) {
        v.shrink_to(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        assert_eq!(target(0, 64), None, "small tables stay");
        assert_eq!(target(0, 1024), Some(32));
        assert_eq!(target(255, 1024), Some(510));
        assert_eq!(target(256, 1024), None, "a quarter full stays");
        assert_eq!(target(1000, 1024), None);
    }

    #[test]
    fn an_emptied_map_gives_its_memory_back() {
        let mut m: HashMap<u32, [u8; 64]> = HashMap::new();
        for i in 0..100_000 {
            m.insert(i, [0; 64]);
        }
        let peak = m.capacity();
        let mut reallocs = 0;
        for i in 0..100_000 {
            m.remove(&i);
            let before = m.capacity();
            shrink(&mut m);
            reallocs += (m.capacity() != before) as usize;
            // Below a quarter full, then shrunk to twice the length (the map rounds its
            // buckets up to a power of two): never more than 8 times the length.
            assert!(m.capacity() < 8 * m.len().max(MIN_CAPACITY), "{} for {} (peak {peak})", m.capacity(), m.len());
        }
        assert!(m.capacity() <= MIN_CAPACITY, "{}", m.capacity());
        assert!(reallocs <= 20, "a shrink per halving, not per removal: {reallocs}");
    }

    #[test]
    fn a_table_hovering_at_a_size_does_not_reallocate_each_call() {
        let mut v: Vec<u64> = (0..1000).collect();
        v.truncate(200);
        shrink_vec(&mut v);
        let cap = v.capacity();
        assert!((400..1000).contains(&cap), "{cap}");
        for i in 0..10_000 {
            if i % 2 == 0 {
                v.push(i);
            } else {
                v.pop();
                shrink_vec(&mut v);
            }
            assert_eq!(v.capacity(), cap);
        }
        let mut m: HashMap<u64, u64> = (0..1000).map(|x| (x, x)).collect();
        m.retain(|&x, _| x < 10);
        shrink(&mut m);
        assert!(m.capacity() < 100, "{}", m.capacity());
    }
}
