//! Module timers and event-loop one-shots. Each runs a plain function, passed through the
//! API's data pointer (no closure: `create_timer` with a capturing one is unsound in the
//! crate), behind the panic guard; timers hand it the context.

use std::ffi::c_void;
use std::sync::OnceLock;

use redis_module::raw::{self, RedisModuleCtx};

use super::guard::guard;
use super::{Ctx, OK};

pub type TimerId = raw::RedisModuleTimerID;
pub type TimerFn = fn(Ctx);
pub type OneShotFn = fn();

extern "C" fn run_timer(ctx: *mut RedisModuleCtx, data: *mut c_void) {
    // SAFETY: `create` made `data` from a `TimerFn` (a function pointer is a data pointer's
    // size on every platform Redis runs on); the context is this callback's.
    let (f, ctx) = unsafe { (std::mem::transmute::<*mut c_void, TimerFn>(data), Ctx::new(ctx)) };
    guard((), || f(ctx));
}

/// Runs `f` on the main thread after `delay_ms`.
pub fn create(ctx: Ctx, delay_ms: i64, f: TimerFn) -> TimerId {
    // SAFETY: a valid context; `run_timer` reads the data back as the `TimerFn` it is.
    unsafe { rm!(RedisModule_CreateTimer)(ctx.ptr(), delay_ms, Some(run_timer), f as *mut c_void) }
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
    // SAFETY: the detached context made at load, valid for the module's life.
    DETACHED.get().map(|&c| unsafe { Ctx::new(c as *mut RedisModuleCtx) })
}

extern "C" fn run_one_shot(data: *mut c_void) {
    // SAFETY: `one_shot` made `data` from a `OneShotFn` (see `run_timer`).
    let f = unsafe { std::mem::transmute::<*mut c_void, OneShotFn>(data) };
    guard((), f);
}

/// Queues `f` to run once in the event loop's next pass (file-event phase). False where
/// the server lacks one-shots or no detached context exists.
pub fn one_shot(f: OneShotFn) -> bool {
    // SAFETY: `run_one_shot` reads the data back as the `OneShotFn` it is.
    match (unsafe { raw::RedisModule_EventLoopAddOneShot }, DETACHED.get()) {
        (Some(add), Some(_)) => unsafe { add(Some(run_one_shot), f as *mut c_void) == OK },
        _ => false,
    }
}
