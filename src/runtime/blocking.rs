//! Blocking pops: RMQ.POP ... BLOCK ms parks the client on its queue's key, RMQ.TPOP ...
//! BLOCK ms on the keys of its topic's queues that this node serves
//! (RedisModule_BlockClientOnKeys). Every change that can make a message deliverable
//! signals the queue's key (see `delivery::Opened`), and the timer signals it when the
//! next waiting message comes due; Redis then retries the blocked pops of that key first
//! come, first served, POP and TPOP alike.

use std::any::Any;
use std::ffi::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::core::route::queue_name;
use crate::ffi::block::{self, status};
use crate::ffi::context::{now_ms, writes_paused};
use crate::ffi::guard::{caught, guard};
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{reply_popped, reply_topic, take, take_topic, Opened};
use crate::runtime::{alarm, cluster, timers, topics, waiters};

/// What a blocked consumer asked for, and where it waits.
#[derive(Clone)]
enum Waiting {
    Queue { count: usize, lease: i64, db: i32, queue: Vec<u8> },
    Topic { count: usize, lease: Option<i64>, db: i32, topic: Vec<u8>, slots: u32 },
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

/// Parks the client on the queues of `topic` this node serves until one of them has a
/// deliverable message or `timeout_ms` (0 = never).
pub fn block_topic(ctx: Ctx, topic: &[u8], slots: u32, count: usize, lease: Option<i64>, timeout_ms: i64) {
    let db = ctx.db();
    let keys: Vec<RStr> =
        (0..slots).map(|i| queue_name(topic, i)).filter(|q| cluster::serves(ctx, q)).map(|q| RStr::from_bytes(&q)).collect();
    waiters::add_topic(db, topic, slots);
    let data = Waiting::Topic { count, lease, db, topic: topic.to_vec(), slots };
    block::block_on_keys(ctx, &keys, timeout_ms, data, on_ready, on_timeout, on_free);
    // Queues with messages not yet due (or held, or rate-limited) wake it when they are.
    for slot in topics::busy_slots(db, topic, slots) {
        if let Ok(q) = Opened::open(ctx, RStr::from_bytes(&queue_name(topic, slot)), false) {
            waiters::schedule_wakeup(ctx, &q);
        }
    }
}

/// Serves a blocked consumer now if something is deliverable; false to keep it waiting.
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
            alarm::note_due(ctx, key.as_ref(), now_ms() + timers::PAUSE_RETRY_MS);
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

/// Called however the client leaves: served, timed out or disconnected.
fn on_free(data: Box<dyn Any>) {
    match data.downcast::<Waiting>().map(|w| *w) {
        Ok(Waiting::Queue { db, queue, .. }) => waiters::remove(db, &queue),
        Ok(Waiting::Topic { db, topic, slots, .. }) => waiters::remove_topic(db, &topic, slots),
        Err(_) => {}
    }
}
