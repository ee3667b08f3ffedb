//! Blocking a client on keys (RedisModule_BlockClientOnKeys), with typed private data.

use std::any::Any;
use std::ffi::{c_int, c_void};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::{guard::guard, Ctx, RStr};

/// A blocked client's reply or timeout callback.
pub type CmdFn = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

/// What a blocked client carries: the caller's data and what to do with it when the client
/// leaves (served, timed out or disconnected).
struct Private {
    data: Box<dyn Any>,
    on_free: fn(Box<dyn Any>),
}

extern "C" fn free_private(_ctx: *mut RedisModuleCtx, p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` is the `Private` boxed by `block_on_keys`; Redis calls this once.
    let private = unsafe { Box::from_raw(p as *mut Private) };
    guard((), || (private.on_free)(private.data));
}

/// Parks the client on `keys` until a callback serves it or `timeout_ms` passes (0 =
/// never). `on_ready` runs when a key is signalled (return OK when served, ERR to keep
/// waiting); `on_free` gets `data` back however the client leaves.
pub fn block_on_keys<T: Any>(
    ctx: Ctx,
    keys: &[RStr],
    timeout_ms: i64,
    data: T,
    on_ready: CmdFn,
    on_timeout: CmdFn,
    on_free: fn(Box<dyn Any>),
) {
    let mut ptrs: Vec<*mut RedisModuleString> = keys.iter().map(RStr::ptr).collect();
    let private = Box::into_raw(Box::new(Private { data: Box::new(data), on_free })) as *mut c_void;
    // SAFETY: a valid command context; Redis retains the key names it keeps; `private` is
    // released by `free_private` only.
    unsafe {
        rm!(RedisModule_BlockClientOnKeys)(
            ctx.ptr(),
            Some(on_ready),
            Some(on_timeout),
            Some(free_private),
            timeout_ms,
            ptrs.as_mut_ptr(),
            ptrs.len() as c_int,
            private,
        );
    }
}

/// Runs `f` on the data of the client being served (inside `on_ready`/`on_timeout`).
pub fn with_data<T: Any, R>(ctx: Ctx, f: impl FnOnce(&T) -> R) -> Option<R> {
    // SAFETY: inside a blocked client's callback the private data is the `Private` boxed
    // by `block_on_keys`, alive until `free_private` runs after this callback.
    let p = unsafe { rm!(RedisModule_GetBlockedClientPrivateData)(ctx.ptr()) } as *const Private;
    if p.is_null() {
        return None;
    }
    let private = unsafe { &*p };
    private.data.downcast_ref::<T>().map(f)
}

/// The key whose signal woke the client being served.
pub fn ready_key(ctx: Ctx) -> Option<RStr> {
    // SAFETY: inside `on_ready`, the key is live for the callback's duration.
    let key = unsafe { rm!(RedisModule_GetBlockedClientReadyKey)(ctx.ptr()) };
    (!key.is_null()).then(|| unsafe { RStr::retain(key) })
}

/// The return value of a blocked client's callback.
pub fn status(served: bool) -> c_int {
    if served {
        raw::REDISMODULE_OK as c_int
    } else {
        raw::REDISMODULE_ERR as c_int
    }
}
