//! Blocking clients, with typed private data: on keys (RedisModule_BlockClientOnKeys,
//! served by Redis when a key is signalled), or by hand (RedisModule_BlockClient, served
//! when the module unblocks it). What the client's callbacks do is a `Blocked` type's
//! plain functions, given a `Ctx`; the `extern "C"` trampolines Redis calls are here.

use std::any::Any;
use std::ffi::{c_int, c_void};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::{guard::guard, Ctx, RStr};

/// What a blocked client's callbacks do (each its own type, so the trampolines below are
/// made for it at compile time: the API gives reply and timeout callbacks no data of
/// their own).
pub trait Blocked {
    /// Serves the client (a key was signalled, or the module unblocked it): replies and
    /// returns true, or returns false to keep waiting (on keys).
    fn reply(ctx: Ctx) -> bool;
    /// Its time ran out (or CLIENT UNBLOCK): replies.
    fn timeout(ctx: Ctx);
    /// A client blocked by hand went away.
    fn disconnected(_h: Handle) {}
}

extern "C" fn reply_with<B: Blocked>(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    // SAFETY: the context Redis passed to this callback.
    let ctx = unsafe { Ctx::new(ctx) };
    status(guard(true, || B::reply(ctx)))
}

extern "C" fn timeout_with<B: Blocked>(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    // SAFETY: as in `reply_with`.
    let ctx = unsafe { Ctx::new(ctx) };
    guard((), || B::timeout(ctx));
    status(true)
}

extern "C" fn disconnected_with<B: Blocked>(_ctx: *mut RedisModuleCtx, bc: *mut raw::RedisModuleBlockedClient) {
    guard((), || B::disconnected(Handle(bc)));
}

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

/// Parks the client on `keys` until `B::reply` serves it or `timeout_ms` passes (0 =
/// never); `B::reply` runs when a key is signalled; `on_free` gets `data` back however
/// the client leaves.
pub fn block_on_keys<B: Blocked, T: Any>(ctx: Ctx, keys: &[RStr], timeout_ms: i64, data: T, on_free: fn(Box<dyn Any>)) {
    let mut ptrs: Vec<*mut RedisModuleString> = keys.iter().map(RStr::ptr).collect();
    let private = Box::into_raw(Box::new(Private { data: Box::new(data), on_free })) as *mut c_void;
    // SAFETY: a valid command context; Redis retains the key names it keeps; `private` is
    // released by `free_private` only.
    unsafe {
        rm!(RedisModule_BlockClientOnKeys)(
            ctx.ptr(),
            Some(reply_with::<B>),
            Some(timeout_with::<B>),
            Some(free_private),
            timeout_ms,
            ptrs.as_mut_ptr(),
            ptrs.len() as c_int,
            private,
        );
    }
}

/// A client blocked by hand (`block_client`): the module must unblock it once, whether it
/// is served, times out or disconnects.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Handle(*mut raw::RedisModuleBlockedClient);
// SAFETY: a handle is only used on Redis's main thread (every module callback runs there).
unsafe impl Send for Handle {}

impl Handle {
    /// The handle of the client a reply or timeout callback serves.
    pub fn of(ctx: Ctx) -> Option<Handle> {
        // SAFETY: a valid blocked-client context.
        let bc = unsafe { rm!(RedisModule_GetBlockedClientHandle)(ctx.ptr()) };
        (!bc.is_null()).then_some(Handle(bc))
    }

    /// Unblocks the client: `on_reply` then runs with `data` (see `with_data`), unless the
    /// client timed out or is gone; `on_free` gets `data` back either way.
    pub fn unblock<T: Any>(self, data: Option<T>, on_free: fn(Box<dyn Any>)) {
        let private = data.map_or(std::ptr::null_mut(), |d| Box::into_raw(Box::new(Private { data: Box::new(d), on_free })) as *mut c_void);
        // SAFETY: a handle Redis gave us, not unblocked before (the caller's registry
        // guarantees once); `private` is released by `free_private` only.
        unsafe { rm!(RedisModule_UnblockClient)(self.0, private) };
    }
}

/// Blocks the client until the module unblocks it (`Handle::unblock`; `B::reply` then
/// runs) or `timeout_ms` passes (0 = never); `B::disconnected` runs if the client goes
/// away meanwhile.
pub fn block_client<B: Blocked>(ctx: Ctx, timeout_ms: i64) -> Handle {
    // SAFETY: a valid command context; `free_private` releases what `unblock` passes.
    unsafe {
        let bc = rm!(RedisModule_BlockClient)(ctx.ptr(), Some(reply_with::<B>), Some(timeout_with::<B>), Some(free_private), timeout_ms);
        rm!(RedisModule_SetDisconnectCallback)(bc, Some(disconnected_with::<B>));
        Handle(bc)
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
fn status(served: bool) -> c_int {
    if served {
        raw::REDISMODULE_OK as c_int
    } else {
        raw::REDISMODULE_ERR as c_int
    }
}
