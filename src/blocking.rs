//! Blocking pops: RMQ.POP ... BLOCK ms parks the client on its queue's key
//! (RedisModule_BlockClientOnKeys). Every change that can make a message deliverable
//! signals the key (see `RedisQueue`), and the timer signals it when the next waiting
//! message comes due; Redis then retries the blocked pops first come, first served.

use std::ffi::{c_int, c_void};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::commands::{now_ms, reply_popped, take};
use crate::queue;
use crate::redis_store::RedisQueue;
use crate::reply;
use crate::rstr::{bytes, rm, RStr};
use crate::stats;
use crate::timers;

/// What a blocked consumer asked for.
struct Waiting {
    count: usize,
    lease: i64,
}

/// Whether this call may block (not inside MULTI, a script or a module's RM_Call).
pub fn may_block(ctx: *mut RedisModuleCtx) -> bool {
    let flags = unsafe { rm!(RedisModule_GetContextFlags)(ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_MULTI | raw::REDISMODULE_CTX_FLAGS_LUA | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING) == 0
}

/// Parks the client on `q` until a message is deliverable or `timeout_ms` (0 = never).
pub fn block(ctx: *mut RedisModuleCtx, q: &RedisQueue, count: usize, lease: i64, timeout_ms: i64) {
    let mut key = q.name().ptr();
    let data = Box::into_raw(Box::new(Waiting { count, lease })) as *mut c_void;
    unsafe {
        rm!(RedisModule_BlockClientOnKeys)(ctx, Some(on_ready), Some(on_timeout), Some(on_free), timeout_ms, &mut key, 1, data);
    }
    stats::BLOCKED_CLIENTS.add(1);
    if let Some(due) = queue::next_due_after(q, now_ms()) {
        timers::note_due(ctx, q.name().as_ref(), due);
    }
}

/// The key was signalled: try the pop again. OK = served (unblocked), ERR = keep waiting.
extern "C" fn on_ready(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let served = std::panic::catch_unwind(|| {
        let w = unsafe { &*(rm!(RedisModule_GetBlockedClientPrivateData)(ctx) as *const Waiting) };
        let key = unsafe { rm!(RedisModule_GetBlockedClientReadyKey)(ctx) };
        if timers::writes_paused() {
            // No change while clients are paused: keep waiting; the timer signals again.
            timers::note_due(ctx, bytes(key), now_ms() + timers::PAUSE_RETRY_MS);
            return false;
        }
        let mut q = match RedisQueue::open(ctx, RStr::retain(key), true) {
            Ok(q) => q,
            Err(e) => {
                reply::error(ctx, &e.message());
                return true;
            }
        };
        let now = now_ms();
        let got = take(ctx, &mut q, now, w.count, w.lease);
        if got.is_empty() {
            if let Some(due) = queue::next_due_after(&q, now) {
                timers::note_due(ctx, q.name().as_ref(), due);
            }
            return false;
        }
        reply_popped(ctx, &got);
        true
    });
    match served {
        Ok(true) => raw::REDISMODULE_OK as c_int,
        Ok(false) => raw::REDISMODULE_ERR as c_int,
        Err(_) => {
            reply::error(ctx, "ERR internal error: the blocked pop panicked");
            raw::REDISMODULE_OK as c_int
        }
    }
}

extern "C" fn on_timeout(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    reply::null(ctx);
    raw::REDISMODULE_OK as c_int
}

/// Called however the client leaves: served, timed out or disconnected.
extern "C" fn on_free(_ctx: *mut RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        drop(unsafe { Box::from_raw(data as *mut Waiting) });
    }
    stats::BLOCKED_CLIENTS.sub(1);
}
