//! Blocking pops: RMQ.POP ... BLOCK ms parks the client on its queue's key
//! (RedisModule_BlockClientOnKeys). Every change that can make a message deliverable
//! signals the key (see `RedisQueue`), and the timer signals it when the next waiting
//! message comes due; Redis then retries the blocked pops first come, first served.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::commands::{now_ms, reply_popped, take};
use crate::queue;
use crate::redis_store::RedisQueue;
use crate::reply;
use crate::rstr::{bytes, rm, RStr};
use crate::stats;
use crate::timers;

/// What a blocked consumer asked for, and where it waits.
struct Waiting {
    count: usize,
    lease: i64,
    db: i32,
    queue: Vec<u8>,
}

/// How many consumers are blocked on each queue (db, name).
static WAITERS: LazyLock<Mutex<HashMap<(i32, Vec<u8>), u32>>> = LazyLock::new(Mutex::default);

fn waiters() -> MutexGuard<'static, HashMap<(i32, Vec<u8>), u32>> {
    WAITERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether consumers are blocked on the queue (one atomic load when nobody is blocked).
pub fn has_waiters(db: i32, queue: &[u8]) -> bool {
    stats::BLOCKED_CLIENTS.get() > 0 && waiters().contains_key(&(db, queue.to_vec()))
}

/// After a change to a queue: if consumers wait on it, make sure the timer wakes them when
/// its next message comes due. Called where a change is made (a command, the timer), so
/// the timer is armed before the event loop computes how long it may sleep; arming it from
/// a blocked client's callback (run just before the sleep) can be late by a whole
/// serverCron period.
pub fn schedule_wakeup(ctx: *mut RedisModuleCtx, q: &RedisQueue) {
    let db = timers::selected_db(ctx);
    if has_waiters(db, q.name().as_ref()) {
        if let Some(due) = queue::next_due_after(q, now_ms()) {
            timers::note_due(ctx, q.name().as_ref(), due);
        }
    }
}

/// Whether this call may block (not inside MULTI, a script or a module's RM_Call).
pub fn may_block(ctx: *mut RedisModuleCtx) -> bool {
    let flags = unsafe { rm!(RedisModule_GetContextFlags)(ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_MULTI | raw::REDISMODULE_CTX_FLAGS_LUA | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING) == 0
}

/// Parks the client on `q` until a message is deliverable or `timeout_ms` (0 = never).
pub fn block(ctx: *mut RedisModuleCtx, q: &RedisQueue, count: usize, lease: i64, timeout_ms: i64) {
    let mut key = q.name().ptr();
    let db = timers::selected_db(ctx);
    let queue = q.name().as_ref().to_vec();
    *waiters().entry((db, queue.clone())).or_insert(0) += 1;
    let data = Box::into_raw(Box::new(Waiting { count, lease, db, queue })) as *mut c_void;
    unsafe {
        rm!(RedisModule_BlockClientOnKeys)(ctx, Some(on_ready), Some(on_timeout), Some(on_free), timeout_ms, &mut key, 1, data);
    }
    stats::BLOCKED_CLIENTS.add(1);
    schedule_wakeup(ctx, q);
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
            schedule_wakeup(ctx, &q);
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
        let w = unsafe { Box::from_raw(data as *mut Waiting) };
        let mut map = waiters();
        if let Some(n) = map.get_mut(&(w.db, w.queue.clone())) {
            *n -= 1;
            if *n == 0 {
                map.remove(&(w.db, w.queue));
            }
        }
    }
    stats::BLOCKED_CLIENTS.sub(1);
}
