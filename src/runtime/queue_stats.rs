//! Per-queue counters shown by RMQ.INFO Q: each counts for one queue what the `INFO rmq`
//! counter of the same name counts, so every count goes through here and adds to both.
//! In memory only (a restart or a failover starts them from 0), kept when the queue
//! empties, for at most `stats-queues` queues: past that a queue not yet counted has none.

use std::hash::Hasher;
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex, MutexGuard};

use hashbrown::HashTable;

use crate::core::fnv::Fnv;
use crate::core::shrink::shrink_vec;
use crate::ffi::Ctx;
use crate::runtime::settings;
use crate::runtime::stats::{self, Counter};
use crate::storage::redis_queue::RedisQueue;

/// The per-queue counters, in RMQ.INFO's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    Pushed,
    Merged,
    Popped,
    Acked,
    Nacked,
    Expired,
    /// INFO rmq's `dead`.
    Died,
    Replayed,
    Cancelled,
}

impl Stat {
    pub const ALL: [Stat; 9] =
        [Stat::Pushed, Stat::Merged, Stat::Popped, Stat::Acked, Stat::Nacked, Stat::Expired, Stat::Died, Stat::Replayed, Stat::Cancelled];

    pub fn name(self) -> &'static str {
        ["pushed", "merged", "popped", "acked", "nacked", "expired", "died", "replayed", "cancelled"][self as usize]
    }

    fn server_wide(self) -> &'static Counter {
        static SERVER_WIDE: [&Counter; Stat::ALL.len()] = [
            &stats::PUSHED,
            &stats::MERGED,
            &stats::POPPED,
            &stats::ACKED,
            &stats::NACKED,
            &stats::EXPIRED,
            &stats::DEAD,
            &stats::REPLAYED,
            &stats::CANCELLED,
        ];
        SERVER_WIDE[self as usize]
    }
}

pub type Counts = [u64; Stat::ALL.len()];

/// A counted queue: its database, name and counts.
struct Slot {
    db: i32,
    name: Box<[u8]>,
    counts: Counts,
}

/// The counted queues, and where each is by database and name. A command finds its queue
/// again at the place kept with the queue's key names (`KeyNames::stats_hint`), without
/// hashing. Counters outlive their queues (docs/COMMANDS.md), up to `stats-queues` of them, so each
/// costs little: the name is kept once (the index holds only slab places), about 120 bytes
/// a queue with its name's allocation (up to ~180 while the slab has room to grow into).
#[derive(Default)]
struct Counted {
    slab: Vec<Slot>,
    index: HashTable<u32>,
}

static COUNTED: LazyLock<Mutex<Counted>> = LazyLock::new(Mutex::default);

fn counted() -> MutexGuard<'static, Counted> {
    COUNTED.lock().unwrap_or_else(|e| e.into_inner())
}

fn limit() -> usize {
    settings::STATS_QUEUES.load(Ordering::Relaxed).max(0) as usize
}

fn hash(db: i32, q: &[u8]) -> u64 {
    let mut h = Fnv::default();
    h.write_u64(db as u64);
    h.write(q);
    h.finish()
}

impl Counted {
    /// Forgets queues until at most `limit` are counted (the setting was lowered).
    fn trim(&mut self, limit: usize) {
        if self.slab.len() > limit {
            self.slab.truncate(limit);
            shrink_vec(&mut self.slab);
            self.index = HashTable::with_capacity(self.slab.len());
            for i in 0..self.slab.len() {
                place(&mut self.index, &self.slab, i);
            }
        }
    }

    /// Where queue `q` of `db` is counted, if it is: at `hint`, else looked up.
    #[inline]
    fn find(&self, db: i32, q: &[u8], hint: usize) -> Option<usize> {
        if self.slab.get(hint).is_some_and(|s| s.db == db && *s.name == *q) {
            return Some(hint);
        }
        let slab = &self.slab;
        self.index.find(hash(db, q), |&i| slab[i as usize].db == db && *slab[i as usize].name == *q).map(|&i| i as usize)
    }

    /// Counts queue `q` of `db` from now on; its place.
    fn add(&mut self, db: i32, q: &[u8]) -> usize {
        let i = self.slab.len();
        self.slab.push(Slot { db, name: q.into(), counts: [0; Stat::ALL.len()] });
        place(&mut self.index, &self.slab, i);
        i
    }
}

/// Indexes `slab[i]`.
fn place(index: &mut HashTable<u32>, slab: &[Slot], i: usize) {
    let at = |j: usize| hash(slab[j].db, &slab[j].name);
    index.insert_unique(at(i), i as u32, |&j| at(j as usize));
}

/// Counts what a command or the timer did to queue `q` (zero counts are skipped): on the
/// server-wide counters, and on the queue's own while it is or can be counted.
pub fn count(ctx: Ctx, queue: &RedisQueue, counts: &[(Stat, u64)]) {
    let mut any = 0;
    for &(s, n) in counts {
        s.server_wide().add(n);
        any |= n;
    }
    if any == 0 {
        return;
    }
    let (db, q, limit) = (ctx.db(), queue.name().as_ref(), limit());
    let hint = queue.names().stats_hint();
    let mut all = counted();
    if all.slab.len() > limit {
        all.trim(limit);
    }
    let i = match all.find(db, q, hint.load(Ordering::Relaxed)) {
        Some(i) => i,
        None if all.slab.len() < limit => all.add(db, q),
        None => return,
    };
    hint.store(i, Ordering::Relaxed);
    let entry = &mut all.slab[i].counts;
    for &(s, n) in counts {
        entry[s as usize] += n;
    }
}

/// Queue `q`'s counters: zeros for a queue not counted yet while there is room, None when
/// it is not counted and there is none.
pub fn of(db: i32, q: &[u8]) -> Option<Counts> {
    let limit = limit();
    let mut all = counted();
    all.trim(limit);
    match all.find(db, q, usize::MAX) {
        Some(i) => Some(all.slab[i].counts),
        None => (all.slab.len() < limit).then_some([0; Stat::ALL.len()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_again_after_a_trim() {
        let mut c = Counted::default();
        for (db, q) in [(0, &b"a"[..]), (1, b"a"), (0, b"b")] {
            c.add(db, q);
        }
        assert_eq!((c.find(1, b"a", 9), c.find(1, b"a", 0), c.find(0, b"b", 2), c.find(1, b"b", 2)), (Some(1), Some(1), Some(2), None));
        c.trim(2);
        assert_eq!((c.slab.len(), c.find(0, b"b", 2), c.find(1, b"a", 0)), (2, None, Some(1)));
        for i in 0..1000 {
            c.add(i % 3, format!("q{i}").as_bytes());
        }
        assert!((0..1000).all(|i| c.find(i % 3, format!("q{i}").as_bytes(), usize::MAX) == Some(i as usize + 2)));
        assert_eq!(c.find(1, b"q0", usize::MAX), None, "another database");
        c.trim(0);
        assert_eq!((c.find(0, b"a", 0), c.index.len()), (None, 0));
    }

    #[test]
    fn names_follow_info_rmq() {
        assert_eq!(Stat::ALL.map(|s| s.name()).len(), 9);
        assert!(std::ptr::eq(Stat::Died.server_wide(), &stats::DEAD));
        assert!(Stat::ALL.iter().enumerate().all(|(i, s)| *s as usize == i));
    }
}
