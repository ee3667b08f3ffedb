//! `RStr`: an owned reference to a Redis string, cheap to clone (a refcount), binary-safe.
//! Messages travel as these from argv to the sorted sets and the replication stream
//! without being copied.

use std::ptr::NonNull;

use redis_module::raw;

/// Transparent: a command's argv can be lent as `&[RStr]` (`Argv::members`).
#[repr(transparent)]
pub struct RStr(NonNull<raw::RedisModuleString>);

impl RStr {
    /// Takes a new reference to a string Redis passed in (argv, a callback's key name).
    ///
    /// # Safety
    /// `p` must point to a live Redis string.
    pub(super) unsafe fn retain(p: *mut raw::RedisModuleString) -> RStr {
        // SAFETY: the caller guarantees `p` is live; retaining with a NULL context makes
        // the reference ours until `Drop`.
        unsafe {
            rm!(RedisModule_RetainString)(std::ptr::null_mut(), p);
            RStr::adopt(p)
        }
    }

    /// Takes over a string whose reference the caller owns (a fresh one from the API).
    ///
    /// # Safety
    /// `p` must be a live string whose one reference passes to the result.
    pub(super) unsafe fn adopt(p: *mut raw::RedisModuleString) -> RStr {
        RStr(NonNull::new(p).expect("Redis returned a null string"))
    }

    pub fn from_bytes(b: &[u8]) -> RStr {
        // SAFETY: CreateString copies `b` and returns a new string we own.
        unsafe { RStr::adopt(rm!(RedisModule_CreateString)(std::ptr::null_mut(), b.as_ptr().cast(), b.len())) }
    }

    pub fn from_i64(v: i64) -> RStr {
        // SAFETY: a new string we own.
        unsafe { RStr::adopt(rm!(RedisModule_CreateStringFromLongLong)(std::ptr::null_mut(), v)) }
    }

    /// A score as ZADD reads it: integers exactly, anything else in full precision.
    pub fn from_score(s: f64) -> RStr {
        if s.fract() == 0.0 && s.abs() < 9.0e18 {
            RStr::from_i64(s as i64)
        } else {
            // SAFETY: a new string we own.
            unsafe { RStr::adopt(rm!(RedisModule_CreateStringFromDouble)(std::ptr::null_mut(), s)) }
        }
    }

    pub(super) fn ptr(&self) -> *mut raw::RedisModuleString {
        self.0.as_ptr()
    }
}

/// The bytes of a Redis string.
///
/// # Safety
/// `p` must point to a live string that outlives `'a` and is not modified meanwhile.
pub(super) unsafe fn bytes<'a>(p: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `p` is live (caller); StringPtrLen returns its buffer and length.
    let data = unsafe { rm!(RedisModule_StringPtrLen)(p, &mut len) };
    if data.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the buffer holds `len` bytes and lives as long as the string (caller).
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
}

/// A string used only on Redis's main thread (every module callback runs there), so it
/// may sit in a static (a name kept for the life of the process, a delivery in flight).
pub struct Shared(pub RStr);
// SAFETY: only ever touched from Redis's main thread (see above).
unsafe impl Send for Shared {}
// SAFETY: as for Send.
unsafe impl Sync for Shared {}

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref()
    }
}

impl AsRef<[u8]> for RStr {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: we hold a reference, so the string lives as long as `self`; Redis never
        // modifies a string shared by refcount.
        unsafe { bytes(self.ptr()) }
    }
}

impl Clone for RStr {
    fn clone(&self) -> RStr {
        // SAFETY: `self` keeps the string live.
        unsafe { RStr::retain(self.ptr()) }
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        // SAFETY: we own one reference (retained or adopted).
        unsafe { rm!(RedisModule_FreeString)(std::ptr::null_mut(), self.ptr()) }
    }
}

/// A command's arguments: the argv Redis passed in, valid for the whole call.
#[derive(Clone, Copy)]
pub struct Argv<'a>(&'a [*mut raw::RedisModuleString]);

impl<'a> Argv<'a> {
    /// # Safety
    /// `argv` must hold `argc` live strings that outlive `'a` (a command's arguments do).
    pub(super) unsafe fn new(argv: *mut *mut raw::RedisModuleString, argc: i32) -> Argv<'a> {
        if argv.is_null() || argc < 1 {
            return Argv(&[]);
        }
        // SAFETY: the caller guarantees `argc` entries.
        Argv(unsafe { std::slice::from_raw_parts(argv, argc as usize) })
    }

    /// The arguments after the command name.
    pub fn tail(self) -> Argv<'a> {
        Argv(self.0.get(1..).unwrap_or(&[]))
    }

    /// Calls `f` with the bytes of every argument, for parsing: in a buffer on the stack
    /// for the usual few (a vector's allocation and free cost ~200 instructions a command).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[&'a [u8]]) -> R) -> R {
        const ON_STACK: usize = 16;
        // SAFETY: argv strings outlive 'a (constructor).
        let each = self.0.iter().map(|p| unsafe { bytes(*p) });
        if self.0.len() <= ON_STACK {
            let mut buf: [&[u8]; ON_STACK] = [&[]; ON_STACK];
            for (b, a) in buf.iter_mut().zip(each) {
                *b = a;
            }
            f(&buf[..self.0.len()])
        } else {
            f(&each.collect::<Vec<_>>())
        }
    }

    /// A reference to argument `i` (panics when out of range: parse first).
    pub fn get(self, i: usize) -> RStr {
        // SAFETY: argv strings are live (constructor).
        unsafe { RStr::retain(self.0[i]) }
    }

    /// The arguments from `from` on, lent: no reference taken (and dropped) per argument
    /// and no vector made, as a PUSH or ACK of many messages did (empty if out of range).
    pub fn members(self, from: usize) -> &'a [RStr] {
        let args = self.0.get(from..).unwrap_or(&[]);
        // SAFETY: RStr is a transparent non-null pointer and argv's strings are live and
        // non-null for 'a (constructor). A shared slice never drops its elements, so the
        // references stay Redis's; a clone takes a reference of its own.
        unsafe { std::slice::from_raw_parts(args.as_ptr().cast::<RStr>(), args.len()) }
    }
}
