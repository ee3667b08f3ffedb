//! Blocking pops. RMQ.POP ... BLOCK ms parks the client on its queue's key
//! (RedisModule_BlockClientOnKeys): every change that can make a message deliverable
//! signals the key (see `delivery::Opened`), and the timer signals it when the next
//! waiting message comes due; Redis then retries the blocked pops of that key first come,
//! first served.
//!
//! RMQ.TPOP ... BLOCK ms on a standalone server does the same on the keys of all its
//! topic's queues, so POP and TPOP waiters of a key are served in arrival order. Under
//! Redis Cluster a keyless command may not block on keys (they span hash slots: Valkey
//! asserts, Redis redirects the client when one slot moves), so there TPOP blocks the
//! client by hand: a change to a queue of the topic notes it (`waiters::topic_changed`)
//! and the timer, right after the command, serves the topic's waiters in arrival order.

use std::any::Any;
use std::ffi::c_int;
use std::sync::{LazyLock, Mutex, MutexGuard};

use redis_module::raw::{RedisModuleBlockedClient, RedisModuleCtx, RedisModuleString};

use crate::core::route::queue_name;
use crate::ffi::block::{self, status, Handle};
use crate::ffi::context::{now_ms, writes_paused};
use crate::ffi::guard::{caught, guard};
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{reply_popped, reply_topic, take, take_topic, Opened, TopicDelivery};
use crate::runtime::{alarm, topics, waiters};

/// What a blocked consumer asked for, and where it waits.
#[derive(Clone)]
enum Waiting {
    Queue { count: usize, lease: i64, db: i32, queue: Vec<u8> },
    Topic { count: usize, lease: Option<i64>, db: i32, topic: Vec<u8>, slots: u32 },
}

/// TPOP consumers blocked by hand (cluster mode), in arrival order.
static BY_HAND: LazyLock<Mutex<Vec<(Handle, Waiting)>>> = LazyLock::new(Mutex::default);

fn by_hand() -> MutexGuard<'static, Vec<(Handle, Waiting)>> {
    BY_HAND.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parks the client on `q` until a message is deliverable or `timeout_ms` (0 = never).
pub fn block(ctx: Ctx, q: &Opened, count: usize, lease: i64, timeout_ms: i64) {
    let db = ctx.db();
    let queue = q.name().as_ref().to_vec();
    waiters::add(db, &queue);
    let data = Waiting::Queue { count, lease, db, queue };
    block::block_on_keys(ctx, &[q.name().clone()], timeout_ms, data, on_ready, on_timeout, on_free);
    waiters::schedule_wakeup(ctx, q);
}

/// Parks the client until one of the queues of `topic` this node serves has a deliverable
/// message or `timeout_ms` (0 = never).
pub fn block_topic(ctx: Ctx, topic: &[u8], slots: u32, count: usize, lease: Option<i64>, timeout_ms: i64) {
    let db = ctx.db();
    let data = Waiting::Topic { count, lease, db, topic: topic.to_vec(), slots };
    if ctx.in_cluster() {
        waiters::add_topic(db, topic, slots, true);
        let handle = block::block_client(ctx, timeout_ms, on_served, on_timeout_by_hand, on_disconnect);
        by_hand().push((handle, data));
    } else {
        let keys: Vec<RStr> = (0..slots).map(|i| RStr::from_bytes(&queue_name(topic, i))).collect();
        waiters::add_topic(db, topic, slots, false);
        block::block_on_keys(ctx, &keys, timeout_ms, data, on_ready, on_timeout, on_free);
    }
    // Queues with messages not yet due (or held, or rate-limited) wake it when they are.
    for slot in topics::busy_slots(db, topic, slots) {
        if let Ok(q) = Opened::open(ctx, RStr::from_bytes(&queue_name(topic, slot)), false) {
            waiters::schedule_wakeup(ctx, &q);
        }
    }
}

/// Serves a key-blocked consumer now if something is deliverable; false to keep it
/// waiting.
fn serve(ctx: Ctx, w: &Waiting, key: RStr) -> bool {
    let now = now_ms();
    match w {
        Waiting::Queue { count, lease, .. } => {
            let mut q = match Opened::open(ctx, key, true) {
                Ok(q) => q,
                Err(e) => {
                    reply::error(ctx, &e.message());
                    return true;
                }
            };
            let got = take(ctx, &mut q, now, *count, *lease);
            if got.is_empty() {
                waiters::schedule_wakeup(ctx, &q);
                return false;
            }
            reply_popped(ctx, &got);
        }
        Waiting::Topic { count, lease, topic, slots, .. } => {
            let got = take_topic(ctx, topic, *slots, *count, *lease, now);
            if got.is_empty() {
                if let Ok(q) = Opened::open(ctx, key, false) {
                    waiters::schedule_wakeup(ctx, &q);
                }
                return false;
            }
            reply_topic(ctx, &got);
        }
    }
    true
}

/// A key was signalled: try the pop again. OK = served (unblocked), ERR = keep waiting.
extern "C" fn on_ready(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let ctx = Ctx::new(ctx);
    let served = caught(|| {
        let w = block::with_data(ctx, |w: &Waiting| w.clone())?;
        let key = block::ready_key(ctx)?;
        if writes_paused() {
            // No change while clients are paused: keep waiting; the timer signals again.
            alarm::note_due(ctx, key.as_ref(), now_ms() + alarm::PAUSE_RETRY_MS);
            return Some(false);
        }
        Some(serve(ctx, &w, key))
    });
    match served {
        Some(Some(served)) => status(served),
        Some(None) => status(false),
        None => {
            reply::error(ctx, "ERR internal error: the blocked pop panicked");
            status(true)
        }
    }
}

extern "C" fn on_timeout(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    guard(status(true), || {
        reply::null(Ctx::new(ctx));
        status(true)
    })
}

/// Called however a key-blocked client leaves: served, timed out or disconnected.
fn on_free(data: Box<dyn Any>) {
    if let Ok(w) = data.downcast::<Waiting>() {
        left(&w);
    }
}

/// A key-blocked consumer left: it no longer counts as waiting.
fn left(w: &Waiting) {
    match w {
        Waiting::Queue { db, queue, .. } => waiters::remove(*db, queue),
        Waiting::Topic { db, topic, slots, .. } => waiters::remove_topic(*db, topic, *slots, false),
    }
}

/// Takes a hand-blocked consumer out of the registry; None if it already left.
fn take_by_hand(h: Handle) -> Option<Waiting> {
    let mut all = by_hand();
    let i = all.iter().position(|(x, _)| *x == h)?;
    Some(all.remove(i).1)
}

/// Serves the hand-blocked TPOP consumers of every topic that changed, in arrival order,
/// each with what is deliverable now (run by the timer, after the command that changed
/// the topic).
pub fn serve_topics(ctx: Ctx) {
    let changed = waiters::take_changed_topics();
    if changed.is_empty() {
        return;
    }
    if writes_paused() {
        // No change while clients are paused: look again shortly.
        for (db, topic) in changed {
            ctx.select_db(db);
            waiters::topic_changed(ctx, &queue_name(&topic, 0));
        }
        alarm::arm(ctx, now_ms() + alarm::PAUSE_RETRY_MS);
        return;
    }
    let now = now_ms();
    for (db, changed_topic) in changed {
        ctx.select_db(db);
        let waiting: Vec<(Handle, Waiting)> = by_hand()
            .iter()
            .filter(|(_, w)| matches!(w, Waiting::Topic { db: d, topic, .. } if *d == db && *topic == changed_topic))
            .cloned()
            .collect();
        for (h, w) in waiting {
            let Waiting::Topic { count, lease, topic, slots, .. } = &w else { continue };
            let got = take_topic(ctx, topic, *slots, *count, *lease, now);
            if got.is_empty() {
                continue;
            }
            if take_by_hand(h).is_some() {
                waiters::remove_topic(db, topic, *slots, true);
                h.unblock(Some(got), drop_data);
            }
        }
    }
}

fn drop_data(_data: Box<dyn Any>) {}

/// A hand-blocked TPOP was served: reply with what `serve_topics` took for it.
extern "C" fn on_served(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let ctx = Ctx::new(ctx);
    let replied = caught(|| block::with_data(ctx, |got: &Vec<TopicDelivery>| reply_topic(ctx, got)).is_some());
    if replied != Some(true) {
        reply::error(ctx, "ERR internal error: the blocked pop was served without messages");
    }
    status(true)
}

/// A hand-blocked TPOP timed out: nil, and the module's unblock that Redis expects.
extern "C" fn on_timeout_by_hand(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let ctx = Ctx::new(ctx);
    guard(status(true), || {
        reply::null(ctx);
        if let Some(h) = Handle::of(ctx) {
            release(h);
        }
        status(true)
    })
}

/// A hand-blocked TPOP's client went away: the module's unblock that Redis expects.
extern "C" fn on_disconnect(_ctx: *mut RedisModuleCtx, bc: *mut RedisModuleBlockedClient) {
    guard((), || release(Handle::from_raw(bc)));
}

/// Unblocks a hand-blocked consumer that leaves without being served (once: a served one
/// is no longer in the registry).
fn release(h: Handle) {
    if let Some(Waiting::Topic { db, topic, slots, .. }) = take_by_hand(h) {
        waiters::remove_topic(db, &topic, slots, true);
        h.unblock(None::<()>, drop_data);
    }
}
