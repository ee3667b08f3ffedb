//! Thin wrappers over the reply API.

use std::ffi::CString;

use redis_module::raw::RedisModuleCtx;

use crate::rstr::{rm, RStr};

pub type Ctx = *mut RedisModuleCtx;

pub fn int(ctx: Ctx, v: i64) {
    unsafe { rm!(RedisModule_ReplyWithLongLong)(ctx, v) };
}
pub fn null(ctx: Ctx) {
    unsafe { rm!(RedisModule_ReplyWithNull)(ctx) };
}
pub fn array(ctx: Ctx, len: usize) {
    unsafe { rm!(RedisModule_ReplyWithArray)(ctx, len as _) };
}
/// A map in RESP3, a flat field/value array in RESP2.
pub fn map(ctx: Ctx, len: usize) {
    unsafe { rm!(RedisModule_ReplyWithMap)(ctx, len as _) };
}
pub fn string(ctx: Ctx, s: &RStr) {
    unsafe { rm!(RedisModule_ReplyWithString)(ctx, s.ptr()) };
}
pub fn bytes(ctx: Ctx, b: &[u8]) {
    unsafe { rm!(RedisModule_ReplyWithStringBuffer)(ctx, b.as_ptr().cast(), b.len()) };
}
pub fn simple(ctx: Ctx, s: &std::ffi::CStr) {
    unsafe { rm!(RedisModule_ReplyWithSimpleString)(ctx, s.as_ptr()) };
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
    unsafe { rm!(RedisModule_ReplyWithError)(ctx, c.as_ptr()) };
}
