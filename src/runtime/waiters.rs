//! Which queues have consumers blocked on them, and making sure they are woken when the
//! queue's next message comes due.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::route;
use crate::core::rules;
use crate::core::schedule::QueueId;
use crate::core::store::Store;
use crate::ffi::context::now_ms;
use crate::ffi::Ctx;
use crate::runtime::{alarm, ratelimit, settings, stats};
use crate::storage::redis_queue::RedisQueue;

/// How many consumers are blocked on each queue (POP), and on each topic (TPOP: how many
/// slots they asked for, and whether they were blocked by hand, not on keys).
#[derive(Default)]
struct Waiters {
    queues: HashMap<QueueId, u32>,
    topics: HashMap<QueueId, Vec<(u32, bool)>>,
    /// Topics with consumers blocked by hand that may now have a deliverable message.
    changed: BTreeSet<QueueId>,
}
static WAITERS: LazyLock<Mutex<Waiters>> = LazyLock::new(Mutex::default);

fn waiters() -> MutexGuard<'static, Waiters> {
    WAITERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A consumer starts waiting on a queue.
pub fn add(db: i32, queue: &[u8]) {
    *waiters().queues.entry((db, queue.to_vec())).or_insert(0) += 1;
    stats::BLOCKED_CLIENTS.add(1);
}

/// A consumer stops waiting (served, timed out or gone).
pub fn remove(db: i32, queue: &[u8]) {
    let mut w = waiters();
    let key = (db, queue.to_vec());
    if let Some(n) = w.queues.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            w.queues.remove(&key);
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}

/// A consumer starts waiting on the first `slots` queues of a topic (`by_hand`: blocked
/// by the module, which serves it when the topic changes, see `topic_changed`).
pub fn add_topic(db: i32, topic: &[u8], slots: u32, by_hand: bool) {
    waiters().topics.entry((db, topic.to_vec())).or_default().push((slots, by_hand));
    stats::BLOCKED_CLIENTS.add(1);
}

/// A topic consumer stops waiting.
pub fn remove_topic(db: i32, topic: &[u8], slots: u32, by_hand: bool) {
    let mut w = waiters();
    let key = (db, topic.to_vec());
    if let Some(v) = w.topics.get_mut(&key) {
        if let Some(i) = v.iter().position(|&e| e == (slots, by_hand)) {
            v.swap_remove(i);
        }
        if v.is_empty() {
            w.topics.remove(&key);
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}

/// Whether consumers are blocked on the queue, directly or through its topic (one atomic
/// load when nobody is blocked).
pub fn has_waiters(db: i32, queue: &[u8]) -> bool {
    if stats::BLOCKED_CLIENTS.get() == 0 {
        return false;
    }
    let w = waiters();
    w.queues.contains_key(&(db, queue.to_vec()))
        || route::split(queue)
            .is_some_and(|(topic, slot)| w.topics.get(&(db, topic.to_vec())).is_some_and(|v| v.iter().any(|&(slots, _)| slot < slots)))
}

/// Queue `queue` may have a deliverable message: if consumers of its topic are blocked by
/// hand, the timer serves them at once (after the command: see `blocking::serve_topics`).
pub fn topic_changed(ctx: Ctx, queue: &[u8]) {
    if stats::BLOCKED_CLIENTS.get() == 0 {
        return;
    }
    let Some((topic, slot)) = route::split(queue) else { return };
    let key = (ctx.db(), topic.to_vec());
    let mut w = waiters();
    if w.topics.get(&key).is_some_and(|v| v.iter().any(|&(slots, by_hand)| by_hand && slot < slots)) && w.changed.insert(key) {
        drop(w);
        alarm::arm(ctx, now_ms());
    }
}

/// The topics `topic_changed` noted since the last call.
pub fn take_changed_topics() -> Vec<QueueId> {
    std::mem::take(&mut waiters().changed).into_iter().collect()
}

/// After a change to a queue: if consumers wait on it, make sure the timer wakes them when
/// its next message comes due, or its rate limit allows the next delivery. Called where a
/// change is made (a command, the timer), so the timer is armed before the event loop
/// computes how long it may sleep; arming it from a blocked client's callback (run just
/// before the sleep) can be late by a whole serverCron period.
pub fn schedule_wakeup(ctx: Ctx, q: &RedisQueue) {
    let (db, name) = (ctx.db(), q.name().as_ref());
    if has_waiters(db, name) {
        let lim = settings::limits(q);
        if lim.paused {
            // Nothing comes due while paused: the resume (RMQ.POLICY) wakes them.
            return;
        }
        let now = now_ms();
        let refill = ratelimit::next_refill(db, name, &lim, now).filter(|_| q.waiting_len() > 0);
        if let Some(at) = [rules::next_due_after(q, now), refill].into_iter().flatten().min() {
            alarm::note_due(ctx, name, at);
        }
    }
}
