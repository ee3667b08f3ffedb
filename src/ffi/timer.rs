//! Module timers and event-loop one-shots.

use std::ffi::c_void;
use std::sync::OnceLock;

use redis_module::raw::{self, RedisModuleCtx};

use super::{Ctx, OK};

pub type TimerId = raw::RedisModuleTimerID;
pub type TimerFn = extern "C" fn(*mut RedisModuleCtx, *mut c_void);
pub type OneShotFn = extern "C" fn(*mut c_void);

/// Runs `f` on the main thread after `delay_ms` (no data passed).
pub fn create(ctx: Ctx, delay_ms: i64, f: TimerFn) -> TimerId {
    // SAFETY: a valid context; `f` takes no data, so the NULL data pointer is never read.
    unsafe { rm!(RedisModule_CreateTimer)(ctx.ptr(), delay_ms, Some(f), std::ptr::null_mut()) }
}

/// Stops a timer (a timer that already fired is ignored by Redis).
pub fn stop(ctx: Ctx, id: TimerId) {
    // SAFETY: a valid context; Redis checks the id; the data (NULL) is not wanted back.
    unsafe { rm!(RedisModule_StopTimer)(ctx.ptr(), id, std::ptr::null_mut()) };
}

/// A context for arming timers from outside any callback (an event-loop one-shot).
static DETACHED: OnceLock<usize> = OnceLock::new();

/// Makes the detached context (at load). False where the server lacks the API.
pub fn init_detached(ctx: Ctx) -> bool {
    // SAFETY: a valid context at load; the detached context lives as long as the module.
    match unsafe { raw::RedisModule_GetDetachedThreadSafeContext } {
        Some(detach) => {
            DETACHED.get_or_init(|| unsafe { detach(ctx.ptr()) } as usize);
            true
        }
        None => false,
    }
}

pub fn detached() -> Option<Ctx> {
    DETACHED.get().map(|&c| Ctx::new(c as *mut RedisModuleCtx))
}

/// Queues `f` to run once in the event loop's next pass (file-event phase). False where
/// the server lacks one-shots or no detached context exists.
pub fn one_shot(f: OneShotFn) -> bool {
    // SAFETY: `f` takes no data, so the NULL data pointer is never read.
    match (unsafe { raw::RedisModule_EventLoopAddOneShot }, DETACHED.get()) {
        (Some(add), Some(_)) => unsafe { add(Some(f), std::ptr::null_mut()) == OK },
        _ => false,
    }
}
