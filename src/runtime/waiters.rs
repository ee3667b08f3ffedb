//! Which queues have consumers blocked on them, and making sure they are woken when the
//! queue's next message comes due.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::due_index::QueueId;
use crate::core::queue_store::Store;
use crate::core::route;
use crate::core::rules;
use crate::core::shrink::shrink;
use crate::ffi::context::now_ms;
use crate::ffi::Ctx;
use crate::runtime::{alarm, ratelimit, settings, stats};
use crate::storage::redis_queue::RedisQueue;

/// Distinct `slots` a TPOP may ask for: the powers of two from 1 to 16384.
const SLOT_SIZES: usize = route::MAX_SLOTS.trailing_zeros() as usize + 1;

/// How many consumers are blocked on each queue (POP), and on each topic (TPOP, counted by
/// how many slots they asked for: a queue's topic waiters are found in constant time).
#[derive(Default)]
struct Waiters {
    queues: HashMap<QueueId, u32>,
    topics: HashMap<QueueId, [u32; SLOT_SIZES]>,
    /// Topics with blocked consumers that may now have a deliverable message.
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
            shrink(&mut w.queues);
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}

/// Where TPOPs of `slots` slots are counted (`slots` is a power of two).
fn size_index(slots: u32) -> usize {
    (slots.trailing_zeros() as usize).min(SLOT_SIZES - 1)
}

/// A consumer starts waiting on the first `slots` queues of a topic.
pub fn add_topic(db: i32, topic: &[u8], slots: u32) {
    waiters().topics.entry((db, topic.to_vec())).or_default()[size_index(slots)] += 1;
    stats::BLOCKED_CLIENTS.add(1);
}

/// A topic consumer stops waiting.
pub fn remove_topic(db: i32, topic: &[u8], slots: u32) {
    let mut w = waiters();
    let key = (db, topic.to_vec());
    if let Some(counts) = w.topics.get_mut(&key) {
        let n = &mut counts[size_index(slots)];
        *n = n.saturating_sub(1);
        if counts.iter().all(|&n| n == 0) {
            w.topics.remove(&key);
            shrink(&mut w.topics);
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}

/// Whether TPOP consumers of `topic` wait on its slot `slot`.
fn topic_waits(w: &Waiters, db: i32, topic: &[u8], slot: u32) -> bool {
    w.topics.get(&(db, topic.to_vec())).is_some_and(|counts| counts.iter().enumerate().any(|(i, &n)| n > 0 && slot < 1 << i))
}

/// Whether any consumer is blocked (one atomic read: sorted-set writes on the server ask
/// before anything else, `hooks`).
#[inline]
pub fn anyone_blocked() -> bool {
    stats::BLOCKED_CLIENTS.get() > 0
}

/// Whether consumers are blocked on the queue, directly or through its topic (one atomic
/// load when nobody is blocked).
pub fn has_waiters(db: i32, queue: &[u8]) -> bool {
    if !anyone_blocked() {
        return false;
    }
    let w = waiters();
    w.queues.contains_key(&(db, queue.to_vec())) || route::split(queue).is_some_and(|(topic, slot)| topic_waits(&w, db, topic, slot))
}

/// Queue `queue` may have a deliverable message: if consumers of its topic are blocked,
/// the timer serves them at once (after the command: see `blocking::serve_topics`). Only
/// `possibly_deliverable` calls it, once it has seen a consumer blocked.
fn topic_changed(ctx: Ctx, queue: &[u8]) {
    let Some((topic, slot)) = route::split(queue) else { return };
    let db = ctx.db();
    let mut w = waiters();
    if topic_waits(&w, db, topic, slot) && w.changed.insert((db, topic.to_vec())) {
        drop(w);
        alarm::arm(ctx, now_ms());
    }
}

/// Notes that `topic` of the selected db may have a deliverable message (its waiters are
/// looked at again by the timer: while writes are paused, say).
pub fn retry_topic(ctx: Ctx, topic: &[u8]) {
    waiters().changed.insert((ctx.db(), topic.to_vec()));
}

/// The topics noted since the last call.
pub fn take_changed_topics() -> Vec<QueueId> {
    std::mem::take(&mut waiters().changed).into_iter().collect()
}

/// Queue `q` may have a message deliverable now (a push, a rollback, an ACK that frees a
/// group or a content, a replay, a due time, a refill, a resume, a key written by another
/// command ...): wakes the consumers blocked on it — POP waiters through its key, TPOP
/// waiters of its topic through the timer — and makes sure the timer looks again when its
/// next message comes due. The one call for anything that can make a message deliverable.
pub fn possibly_deliverable(ctx: Ctx, q: &RedisQueue) {
    // Nobody blocked (each consumer is counted before it blocks: `add`, `add_topic`): no
    // one to wake, nor a wake-up to schedule (~150 instructions an ACK that ends one).
    if stats::BLOCKED_CLIENTS.get() == 0 {
        return;
    }
    ctx.signal_ready(q.name());
    topic_changed(ctx, q.name().as_ref());
    schedule_wakeup(ctx, q);
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
