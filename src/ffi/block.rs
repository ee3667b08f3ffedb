//! Blocking clients, with typed private data: on keys (RedisModule_BlockClientOnKeys,
//! served by Redis when a key is signalled), or by hand (RedisModule_BlockClient, served
//! when the module unblocks it).

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

/// A client blocked by hand (`block_client`): the module must unblock it once, whether it
/// is served, times out or disconnects.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Handle(*mut raw::RedisModuleBlockedClient);
// SAFETY: a handle is only used on Redis's main thread (every module callback runs there).
unsafe impl Send for Handle {}

/// Called when a client blocked by hand disconnects.
pub type DisconnectFn = extern "C" fn(*mut RedisModuleCtx, *mut raw::RedisModuleBlockedClient);

impl Handle {
    /// The handle a disconnect callback receives.
    pub fn from_raw(bc: *mut raw::RedisModuleBlockedClient) -> Handle {
        Handle(bc)
    }

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

/// Blocks the client until the module unblocks it (`Handle::unblock`) or `timeout_ms`
/// passes (0 = never); `on_disconnect` runs if the client goes away meanwhile.
pub fn block_client(ctx: Ctx, timeout_ms: i64, on_reply: CmdFn, on_timeout: CmdFn, on_disconnect: DisconnectFn) -> Handle {
    // SAFETY: a valid command context; `free_private` releases what `unblock` passes.
    unsafe {
        let bc = rm!(RedisModule_BlockClient)(ctx.ptr(), Some(on_reply), Some(on_timeout), Some(free_private), timeout_ms);
        rm!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect));
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
pub fn status(served: bool) -> c_int {
    if served {
        raw::REDISMODULE_OK as c_int
    } else {
        raw::REDISMODULE_ERR as c_int
    }
}
