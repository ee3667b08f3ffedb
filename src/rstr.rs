//! `RStr`: an owned reference to a Redis string, cheap to clone (a refcount), binary-safe.
//! Messages travel as these from argv to the sorted sets and the replication stream
//! without being copied.

use std::ptr::NonNull;

use redis_module::raw;

/// A Redis module API function (all are set once the module is initialised); use inside
/// `unsafe`.
macro_rules! rm {
    ($f:ident) => {
        redis_module::raw::$f.expect(concat!(stringify!($f), " is not available"))
    };
}
pub(crate) use rm;

pub struct RStr(NonNull<raw::RedisModuleString>);

impl RStr {
    /// Takes a new reference to a string owned elsewhere (argv, for instance).
    pub fn retain(p: *mut raw::RedisModuleString) -> RStr {
        unsafe { rm!(RedisModule_RetainString)(std::ptr::null_mut(), p) };
        RStr::adopt(p)
    }

    /// Takes over a string whose reference the caller owns (a fresh one from the API).
    pub fn adopt(p: *mut raw::RedisModuleString) -> RStr {
        RStr(NonNull::new(p).expect("Redis returned a null string"))
    }

    pub fn from_bytes(b: &[u8]) -> RStr {
        RStr::adopt(unsafe { rm!(RedisModule_CreateString)(std::ptr::null_mut(), b.as_ptr().cast(), b.len()) })
    }

    pub fn from_i64(v: i64) -> RStr {
        RStr::adopt(unsafe { rm!(RedisModule_CreateStringFromLongLong)(std::ptr::null_mut(), v) })
    }

    /// A score as ZADD reads it: integers exactly, anything else in full precision.
    pub fn from_score(s: f64) -> RStr {
        if s.fract() == 0.0 && s.abs() < 9.0e18 {
            RStr::from_i64(s as i64)
        } else {
            RStr::adopt(unsafe { rm!(RedisModule_CreateStringFromDouble)(std::ptr::null_mut(), s) })
        }
    }

    pub fn ptr(&self) -> *mut raw::RedisModuleString {
        self.0.as_ptr()
    }
}

/// The bytes of a Redis string.
pub fn bytes<'a>(p: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    let data = unsafe { rm!(RedisModule_StringPtrLen)(p, &mut len) };
    if data.is_null() || len == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
}

/// A string kept for the life of the process and used only on Redis's main thread (every
/// module callback runs there), so it may sit in a static.
pub struct Shared(pub RStr);
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl AsRef<[u8]> for RStr {
    fn as_ref(&self) -> &[u8] {
        bytes(self.ptr())
    }
}

impl Clone for RStr {
    fn clone(&self) -> RStr {
        RStr::retain(self.ptr())
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        unsafe { rm!(RedisModule_FreeString)(std::ptr::null_mut(), self.ptr()) }
    }
}
