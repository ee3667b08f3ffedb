//! Thin wrappers over the reply API.

use std::ffi::{CStr, CString};

use super::{Ctx, RStr};

// SAFETY (every function here): a valid context (module doc of `ffi`) and live arguments.

pub fn int(ctx: Ctx, v: i64) {
    unsafe { rm!(RedisModule_ReplyWithLongLong)(ctx.ptr(), v) };
}
pub fn null(ctx: Ctx) {
    unsafe { rm!(RedisModule_ReplyWithNull)(ctx.ptr()) };
}
pub fn array(ctx: Ctx, len: usize) {
    unsafe { rm!(RedisModule_ReplyWithArray)(ctx.ptr(), len as _) };
}
/// A map in RESP3, a flat field/value array in RESP2.
pub fn map(ctx: Ctx, len: usize) {
    unsafe { rm!(RedisModule_ReplyWithMap)(ctx.ptr(), len as _) };
}
pub fn string(ctx: Ctx, s: &RStr) {
    unsafe { rm!(RedisModule_ReplyWithString)(ctx.ptr(), s.ptr()) };
}
pub fn bytes(ctx: Ctx, b: &[u8]) {
    unsafe { rm!(RedisModule_ReplyWithStringBuffer)(ctx.ptr(), b.as_ptr().cast(), b.len()) };
}
pub fn simple(ctx: Ctx, s: &CStr) {
    unsafe { rm!(RedisModule_ReplyWithSimpleString)(ctx.ptr(), s.as_ptr()) };
}
pub fn opt_int(ctx: Ctx, v: Option<i64>) {
    match v {
        Some(v) => int(ctx, v),
        None => null(ctx),
    }
}
/// An error line that already carries its code (`ERR ...`, `WRONGTYPE ...`).
pub fn error(ctx: Ctx, msg: &str) {
    let c = CString::new(msg.replace(['\r', '\n', '\0'], " ")).unwrap_or_default();
    unsafe { rm!(RedisModule_ReplyWithError)(ctx.ptr(), c.as_ptr()) };
}
