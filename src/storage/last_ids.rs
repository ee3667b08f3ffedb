//! The last delivery name each queue gave, kept in memory for a short while: a queue that
//! empties loses its `ids` field with `meta{Q}`, and its next names start again from the
//! clock (`codec::next_delivery_id`), which may not have moved on since (the same ms, or a
//! transaction's fixed time). Once the clock's share passes a queue's last name its entry
//! serves no more and is pruned. (A restart or a failover takes longer than a ms.)

use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::codec;
use crate::core::fnv::FnvMap;

/// The last name given, by database and queue.
type Last = FnvMap<(i32, Vec<u8>), u64>;
static LAST: LazyLock<Mutex<Last>> = LazyLock::new(Mutex::default);

fn last_ids() -> MutexGuard<'static, Last> {
    LAST.lock().unwrap_or_else(|e| e.into_inner())
}

/// Entries kept before the ones the clock has passed are pruned.
const PRUNE_AT: usize = 64;

/// The last name queue `q` of `db` gave, if it may still matter.
pub fn last(q: &[u8], db: i32) -> Option<u64> {
    last_ids().get(&(db, q.to_vec())).copied()
}

/// Queue `q` of `db` gave names up to `last` at `now`.
pub fn note(q: &[u8], db: i32, last: u64, now: i64) {
    let mut all = last_ids();
    if all.len() >= PRUNE_AT {
        let floor = codec::next_delivery_id(None, now);
        all.retain(|_, l| *l >= floor);
    }
    all.insert((db, q.to_vec()), last);
}
