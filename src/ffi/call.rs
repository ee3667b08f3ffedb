//! Calling a Redis command from the module (RM_Call), for the few places that need a
//! reply the module API has no direct call for (ZCOUNT, CLUSTER, CONFIG GET).

use std::ffi::CStr;

use redis_module::raw;

use super::{Ctx, RStr};

/// A call's reply, freed on drop.
pub struct Reply(*mut raw::RedisModuleCallReply);

impl Drop for Reply {
    fn drop(&mut self) {
        // SAFETY: a reply returned by RM_Call and not freed before.
        unsafe { rm!(RedisModule_FreeCallReply)(self.0) };
    }
}

/// Runs `cmd args...`; None if Redis refused the call.
pub fn call(ctx: Ctx, cmd: &CStr, args: &[&RStr]) -> Option<Reply> {
    let argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.ptr()).collect();
    // SAFETY: a valid context; "v" reads `argv.len()` live strings from `argv`.
    let reply = unsafe { rm!(RedisModule_Call)(ctx.ptr(), cmd.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len()) };
    (!reply.is_null()).then_some(Reply(reply))
}

/// The bytes of a string reply element.
fn string_of(r: *mut raw::RedisModuleCallReply) -> Option<Vec<u8>> {
    let mut len = 0usize;
    // SAFETY: `r` is a live reply (owned by the caller's `Reply`); the pointer is valid
    // for `len` bytes while that reply lives, and we copy them at once.
    unsafe {
        let p = rm!(RedisModule_CallReplyStringPtr)(r, &mut len);
        (!p.is_null()).then(|| std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec())
    }
}

impl Reply {
    /// An integer reply's value.
    pub fn integer(&self) -> Option<i64> {
        // SAFETY: a live reply.
        unsafe {
            (rm!(RedisModule_CallReplyType)(self.0) == raw::REDISMODULE_REPLY_INTEGER as i32)
                .then(|| rm!(RedisModule_CallReplyInteger)(self.0))
        }
    }

    /// An integer reply in decimal, or a string reply's bytes.
    pub fn text(&self) -> Option<Vec<u8>> {
        match self.integer() {
            Some(n) => Some(n.to_string().into_bytes()),
            None => string_of(self.0),
        }
    }

    /// The bytes of element `i` of an array reply.
    pub fn element(&self, i: usize) -> Option<Vec<u8>> {
        // SAFETY: a live reply; an out-of-range index or non-array gives NULL.
        let el = unsafe { rm!(RedisModule_CallReplyArrayElement)(self.0, i) };
        if el.is_null() {
            None
        } else {
            string_of(el)
        }
    }
}
