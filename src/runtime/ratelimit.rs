//! Rate limits at run time: one token bucket per rate-limited queue, in memory (the
//! limit is flow control, not data: a restart or a failover starts new buckets, see
//! `core::bucket`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::bucket::Bucket;
use crate::core::due_index::QueueId;
use crate::core::policy::Limits;
use crate::core::shrink::shrink;

type Buckets = HashMap<QueueId, Bucket>;
static BUCKETS: LazyLock<Mutex<Buckets>> = LazyLock::new(Mutex::default);

/// Past this many buckets, full ones are forgotten (a new one allows less, never more).
const MAX_BUCKETS: usize = 100_000;

fn buckets() -> MutexGuard<'static, Buckets> {
    BUCKETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many of `count` deliveries queue `q` may make now.
pub fn allowance(db: i32, q: &[u8], lim: &Limits, now: i64, count: usize) -> usize {
    if lim.rate == 0 {
        return count;
    }
    let mut all = buckets();
    if all.len() >= MAX_BUCKETS && !all.contains_key(&(db, q.to_vec())) {
        all.retain(|_, b| !b.is_full(now, lim.rate, lim.rate_window_ms));
        shrink(&mut *all);
    }
    let b = all.entry((db, q.to_vec())).or_insert_with(|| Bucket::new(now, lim.rate, lim.rate_window_ms));
    (b.available(now, lim.rate, lim.rate_window_ms) as usize).min(count)
}

/// Queue `q` made `n` deliveries.
pub fn consumed(db: i32, q: &[u8], lim: &Limits, n: usize) {
    if lim.rate > 0 && n > 0 {
        if let Some(b) = buckets().get_mut(&(db, q.to_vec())) {
            b.take(n as u64);
        }
    }
}

/// When queue `q`'s empty bucket next holds a token (None when it is not empty, or the
/// queue has no limit).
pub fn next_refill(db: i32, q: &[u8], lim: &Limits, now: i64) -> Option<i64> {
    if lim.rate == 0 {
        return None;
    }
    let mut all = buckets();
    let b = all.get_mut(&(db, q.to_vec()))?;
    (b.available(now, lim.rate, lim.rate_window_ms) == 0).then(|| b.next_token_at(lim.rate, lim.rate_window_ms))
}

/// Forgets queue `q`'s bucket (its policy changed).
pub fn forget(db: i32, q: &[u8]) {
    let mut all = buckets();
    if all.remove(&(db, q.to_vec())).is_some() {
        shrink(&mut *all);
    }
}
