//! Per-queue counters shown by RMQ.INFO Q: each counts for one queue what the `INFO rmq`
//! counter of the same name counts, so every count goes through here and adds to both.
//! In memory only (a restart or a failover starts them from 0), kept when the queue
//! empties, for at most `stats-queues` queues: past that a queue not yet counted has none.

use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::fnv::FnvMap;
use crate::core::shrink::shrink;
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

/// The counted queues: their database, name and counts, and where each is by database and
/// name. A command finds its queue again at the place kept with the queue's key names
/// (`KeyNames::stats_hint`), without hashing.
#[derive(Default)]
struct Counted {
    slab: Vec<(i32, Vec<u8>, Counts)>,
    /// By name, then database (so a lookup needs no copy of the name).
    index: FnvMap<Vec<u8>, Vec<(i32, usize)>>,
}

static COUNTED: LazyLock<Mutex<Counted>> = LazyLock::new(Mutex::default);

fn counted() -> MutexGuard<'static, Counted> {
    COUNTED.lock().unwrap_or_else(|e| e.into_inner())
}

fn limit() -> usize {
    settings::STATS_QUEUES.load(Ordering::Relaxed).max(0) as usize
}

impl Counted {
    /// Forgets queues until at most `limit` are counted (the setting was lowered).
    fn trim(&mut self, limit: usize) {
        if self.slab.len() > limit {
            self.slab.truncate(limit);
            shrink(&mut self.slab);
            self.index = FnvMap::default();
            for (i, (db, q, _)) in self.slab.iter().enumerate() {
                self.index.entry(q.clone()).or_default().push((*db, i));
            }
        }
    }

    /// Where queue `q` of `db` is counted, if it is: at `hint`, else looked up.
    #[inline]
    fn find(&self, db: i32, q: &[u8], hint: usize) -> Option<usize> {
        if self.slab.get(hint).is_some_and(|(d, name, _)| *d == db && name.as_slice() == q) {
            return Some(hint);
        }
        Some(self.index.get(q)?.iter().find(|(d, _)| *d == db)?.1)
    }
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
        None if all.slab.len() < limit => {
            let i = all.slab.len();
            all.slab.push((db, q.to_vec(), [0; Stat::ALL.len()]));
            all.index.entry(q.to_vec()).or_default().push((db, i));
            i
        }
        None => return,
    };
    hint.store(i, Ordering::Relaxed);
    let entry = &mut all.slab[i].2;
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
        Some(i) => Some(all.slab[i].2),
        None => (all.slab.len() < limit).then_some([0; Stat::ALL.len()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_again_after_a_trim() {
        let mut c = Counted::default();
        for (db, q) in [(0, b"a"), (1, b"a"), (0, b"b")] {
            let i = c.slab.len();
            c.index.entry(q.to_vec()).or_default().push((db, i));
            c.slab.push((db, q.to_vec(), [1; 9]));
        }
        assert_eq!((c.find(1, b"a", 9), c.find(1, b"a", 0), c.find(0, b"b", 2), c.find(1, b"b", 2)), (Some(1), Some(1), Some(2), None));
        c.trim(2);
        assert_eq!((c.slab.len(), c.find(0, b"b", 2), c.find(1, b"a", 0)), (2, None, Some(1)));
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
