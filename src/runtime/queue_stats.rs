//! Per-queue counters shown by RMQ.INFO Q: each counts for one queue what the `INFO rmq`
//! counter of the same name counts, so every count goes through here and adds to both.
//! In memory only (a restart or a failover starts them from 0), kept when the queue
//! empties, for at most `stats-queues` queues: past that a queue not yet counted has none.

use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::fnv::FnvMap;
use crate::ffi::{Ctx, RStr};
use crate::runtime::settings;
use crate::runtime::stats::{self, Counter};

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
        [
            &stats::PUSHED,
            &stats::MERGED,
            &stats::POPPED,
            &stats::ACKED,
            &stats::NACKED,
            &stats::EXPIRED,
            &stats::DEAD,
            &stats::REPLAYED,
            &stats::CANCELLED,
        ][self as usize]
    }
}

pub type Counts = [u64; Stat::ALL.len()];

/// Counted queues by database (index) and name, and how many in all.
#[derive(Default)]
struct Counted {
    dbs: Vec<FnvMap<Vec<u8>, Counts>>,
    total: usize,
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
        for db in &mut self.dbs {
            let excess = self.total.saturating_sub(limit);
            if excess == 0 {
                return;
            }
            let gone: Vec<Vec<u8>> = db.keys().take(excess).cloned().collect();
            for q in gone {
                db.remove(&q);
                self.total -= 1;
            }
        }
    }
}

/// Counts what a command or the timer did to queue `q` (zero counts are skipped): on the
/// server-wide counters, and on the queue's own while it is or can be counted.
pub fn count(ctx: Ctx, q: &RStr, counts: &[(Stat, u64)]) {
    let mut any = false;
    for &(s, n) in counts {
        s.server_wide().add(n);
        any |= n > 0;
    }
    if !any {
        return;
    }
    let Ok(db) = usize::try_from(ctx.db()) else { return };
    let limit = limit();
    let mut all = counted();
    if all.total > limit {
        all.trim(limit);
    }
    let Counted { dbs, total } = &mut *all;
    if dbs.len() <= db {
        dbs.resize_with(db + 1, FnvMap::default);
    }
    let entry = match dbs[db].get_mut(q.as_ref()) {
        Some(e) => e,
        None if *total < limit => {
            *total += 1;
            dbs[db].entry(q.as_ref().to_vec()).or_default()
        }
        None => return,
    };
    for &(s, n) in counts {
        entry[s as usize] += n;
    }
}

/// Queue `q`'s counters: zeros for a queue not counted yet while there is room, None when
/// it is not counted and there is none.
pub fn of(db: i32, q: &[u8]) -> Option<Counts> {
    let limit = limit();
    let mut all = counted();
    if all.total > limit {
        all.trim(limit);
    }
    let found = usize::try_from(db).ok().and_then(|db| all.dbs.get(db)?.get(q).copied());
    found.or((all.total < limit).then_some([0; Stat::ALL.len()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_keeps_at_most_the_limit() {
        let mut c = Counted::default();
        c.dbs.resize_with(2, FnvMap::default);
        for i in 0..5u8 {
            c.dbs[0].insert(vec![i], [1; 9]);
            c.dbs[1].insert(vec![i], [1; 9]);
        }
        c.total = 10;
        c.trim(7);
        assert_eq!((c.total, c.dbs[0].len() + c.dbs[1].len()), (7, 7));
        c.trim(0);
        assert_eq!((c.total, c.dbs[0].len() + c.dbs[1].len()), (0, 0));
    }

    #[test]
    fn names_follow_info_rmq() {
        assert_eq!(Stat::ALL.map(|s| s.name()).len(), 9);
        assert!(std::ptr::eq(Stat::Died.server_wide(), &stats::DEAD));
        assert!(Stat::ALL.iter().enumerate().all(|(i, s)| *s as usize == i));
    }
}
