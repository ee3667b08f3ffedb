//! The Redis module API, wrapped: the only place with `unsafe` (`layout_tests` checks).
//! Everything above this layer calls safe functions that take a `Ctx` and `RStr`s; what
//! makes one from a raw pointer is `unsafe` and private to this layer, and every callback
//! Redis calls (commands, events, timers, blocked clients) is an `extern "C"` trampoline
//! here that hands a plain function a `Ctx`, behind the panic guard.
//!
//! Why the wrappers are sound, once for all of them: every module callback, command and
//! timer runs on Redis's main thread with the context Redis passed in, which stays valid
//! for the callback's duration; the API function pointers are set before any of our code
//! runs (`RedisModule_Init` in the crate's `redis_module!`), so `rm!` never fails on a
//! function that Redis 7.0 has (the few newer ones are checked for `None` where used).

/// A Redis module API function; use inside `unsafe`.
macro_rules! rm {
    ($f:ident) => {
        redis_module::raw::$f.expect(concat!(stringify!($f), " is not available"))
    };
}

pub mod block;
pub mod call;
pub mod command;
pub mod context;
pub mod guard;
pub mod key;
pub mod reply;
pub mod rstr;
pub mod server_callbacks;
pub mod stream;
pub mod timer;
pub mod user_acl;

pub use context::Ctx;
pub use rstr::RStr;

/// `REDISMODULE_OK` as the API's `int`.
pub const OK: i32 = redis_module::raw::REDISMODULE_OK as i32;
