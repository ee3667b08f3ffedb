//! Blocking pops: RMQ.POP ... BLOCK ms parks the client on its queue's key
//! (RedisModule_BlockClientOnKeys). Every change that can make a message deliverable
//! signals the key (see `delivery::Opened`), and the timer signals it when the next
//! waiting message comes due; Redis then retries the blocked pops first come, first served.

use std::any::Any;
use std::ffi::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::ffi::block::{self, status};
use crate::ffi::context::{now_ms, writes_paused};
use crate::ffi::guard::{caught, guard};
use crate::ffi::{reply, Ctx};
use crate::runtime::delivery::{reply_popped, take, Opened};
use crate::runtime::{alarm, timers, waiters};

/// What a blocked consumer asked for, and where it waits.
struct Waiting {
    count: usize,
    lease: i64,
    db: i32,
    queue: Vec<u8>,
}

/// Parks the client on `q` until a message is deliverable or `timeout_ms` (0 = never).
pub fn block(ctx: Ctx, q: &Opened, count: usize, lease: i64, timeout_ms: i64) {
    let db = ctx.db();
    let queue = q.name().as_ref().to_vec();
    waiters::add(db, &queue);
    let data = Waiting { count, lease, db, queue };
    block::block_on_keys(ctx, &[q.name().clone()], timeout_ms, data, on_ready, on_timeout, on_free);
    waiters::schedule_wakeup(ctx, q);
}

/// The key was signalled: try the pop again. OK = served (unblocked), ERR = keep waiting.
extern "C" fn on_ready(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let ctx = Ctx::new(ctx);
    let served = caught(|| {
        let (count, lease) = block::with_data(ctx, |w: &Waiting| (w.count, w.lease))?;
        let key = block::ready_key(ctx)?;
        if writes_paused() {
            // No change while clients are paused: keep waiting; the timer signals again.
            alarm::note_due(ctx, key.as_ref(), now_ms() + timers::PAUSE_RETRY_MS);
            return Some(false);
        }
        let mut q = match Opened::open(ctx, key, true) {
            Ok(q) => q,
            Err(e) => {
                reply::error(ctx, &e.message());
                return Some(true);
            }
        };
        let got = take(ctx, &mut q, now_ms(), count, lease);
        if got.is_empty() {
            waiters::schedule_wakeup(ctx, &q);
            return Some(false);
        }
        reply_popped(ctx, &got);
        Some(true)
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
    if let Ok(w) = data.downcast::<Waiting>() {
        waiters::remove(w.db, &w.queue);
    }
}
