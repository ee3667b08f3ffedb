//! Which queues have consumers blocked on them, and making sure they are woken when the
//! queue's next message comes due.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::rules;
use crate::core::schedule::QueueId;
use crate::core::store::Store;
use crate::ffi::context::now_ms;
use crate::ffi::Ctx;
use crate::runtime::{alarm, ratelimit, settings, stats};
use crate::storage::redis_queue::RedisQueue;

/// How many consumers are blocked on each queue.
type Waiters = HashMap<QueueId, u32>;
static WAITERS: LazyLock<Mutex<Waiters>> = LazyLock::new(Mutex::default);

fn waiters() -> MutexGuard<'static, Waiters> {
    WAITERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A consumer starts waiting on a queue.
pub fn add(db: i32, queue: &[u8]) {
    *waiters().entry((db, queue.to_vec())).or_insert(0) += 1;
    stats::BLOCKED_CLIENTS.add(1);
}

/// A consumer stops waiting (served, timed out or gone).
pub fn remove(db: i32, queue: &[u8]) {
    let mut map = waiters();
    let key = (db, queue.to_vec());
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}

/// Whether consumers are blocked on the queue (one atomic load when nobody is blocked).
pub fn has_waiters(db: i32, queue: &[u8]) -> bool {
    stats::BLOCKED_CLIENTS.get() > 0 && waiters().contains_key(&(db, queue.to_vec()))
}

/// After a change to a queue: if consumers wait on it, make sure the timer wakes them when
/// its next message comes due, or its rate limit allows the next delivery. Called where a
/// change is made (a command, the timer), so the timer is armed before the event loop
/// computes how long it may sleep; arming it from a blocked client's callback (run just
/// before the sleep) can be late by a whole serverCron period.
pub fn schedule_wakeup(ctx: Ctx, q: &RedisQueue) {
    let (db, name) = (ctx.db(), q.name().as_ref());
    if has_waiters(db, name) {
        let now = now_ms();
        let refill = ratelimit::next_refill(db, name, &settings::limits(q), now).filter(|_| q.waiting_len() > 0);
        if let Some(at) = [rules::next_due_after(q, now), refill].into_iter().flatten().min() {
            alarm::note_due(ctx, name, at);
        }
    }
}
