//! An open key and the raw sorted-set and hash calls on it. `Key` closes itself on drop.

use redis_module::raw;

use super::{Ctx, RStr, OK};

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    Empty,
    ZSet,
    Hash,
    String,
    Stream,
    Other,
}

/// An open key (a null handle stands for a key opened for reading that does not exist).
/// Its methods take `&self`: the handle is a pointer, and Redis runs one command at a time.
pub struct Key(*mut raw::RedisModuleKey);

impl Drop for Key {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: opened by `open` and not closed before.
            unsafe { rm!(RedisModule_CloseKey)(self.0) }
        }
    }
}

/// What an open key handle (or null: none) holds.
pub(super) fn type_of(key: *mut raw::RedisModuleKey) -> KeyType {
    if key.is_null() {
        return KeyType::Empty;
    }
    // SAFETY: a non-null open key handle.
    match unsafe { rm!(RedisModule_KeyType)(key) } as isize {
        raw::REDISMODULE_KEYTYPE_EMPTY => KeyType::Empty,
        raw::REDISMODULE_KEYTYPE_ZSET => KeyType::ZSet,
        raw::REDISMODULE_KEYTYPE_HASH => KeyType::Hash,
        raw::REDISMODULE_KEYTYPE_STRING => KeyType::String,
        raw::REDISMODULE_KEYTYPE_STREAM => KeyType::Stream,
        _ => KeyType::Other,
    }
}

// SAFETY (every method below): the handle is null or open (see `open`); null handles are
// checked before any call that needs a key.
impl Key {
    /// Whether a key exists, without opening it (None where the server lacks the call).
    pub fn exists(ctx: Ctx, name: &RStr) -> Option<bool> {
        // SAFETY: an optional API pointer; a valid context and a live key name.
        unsafe { raw::RedisModule_KeyExists }.map(|f| unsafe { f(ctx.ptr(), name.ptr()) } != 0)
    }

    pub fn open(ctx: Ctx, name: &RStr, write: bool) -> Key {
        let mode = if write { raw::REDISMODULE_READ | raw::REDISMODULE_WRITE } else { raw::REDISMODULE_READ };
        Key(unsafe { rm!(RedisModule_OpenKey)(ctx.ptr(), name.ptr(), mode as i32) }.cast())
    }

    /// The raw handle (null: none), for the calls on other types (`stream`).
    pub(super) fn ptr(&self) -> *mut raw::RedisModuleKey {
        self.0
    }

    /// Whether the key exists (a read-mode open of a missing key gives a null handle).
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }

    pub fn key_type(&self) -> KeyType {
        type_of(self.0)
    }

    /// Members of a sorted set, fields of a hash (0 for an empty key).
    pub fn len(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        unsafe { rm!(RedisModule_ValueLength)(self.0) }
    }

    /// RM_ZsetAdd with input `flags` (REDISMODULE_ZADD_*): the output flags, None on failure.
    pub fn zadd(&self, score: f64, m: &RStr, mut flags: i32) -> Option<i32> {
        if self.0.is_null() {
            return None;
        }
        let ok = unsafe { rm!(RedisModule_ZsetAdd)(self.0, score, m.ptr(), &mut flags) } == OK;
        ok.then_some(flags)
    }

    pub fn zscore(&self, m: &RStr) -> Option<f64> {
        if self.key_type() != KeyType::ZSet {
            return None;
        }
        let mut score = 0.0;
        let ok = unsafe { rm!(RedisModule_ZsetScore)(self.0, m.ptr(), &mut score) } == OK;
        ok.then_some(score)
    }

    /// Removes a member; true if it was there. Removing the last member deletes the key.
    pub fn zrem(&self, m: &RStr) -> bool {
        if self.key_type() != KeyType::ZSet {
            return false;
        }
        let mut deleted = 0;
        let ok = unsafe { rm!(RedisModule_ZsetRem)(self.0, m.ptr(), &mut deleted) } == OK;
        ok && deleted != 0
    }

    /// Members with score in [min, max], ascending (descending if `rev`), calling `f` on
    /// each until it returns false.
    pub fn zscan(&self, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(RStr, f64) -> bool) {
        if self.key_type() != KeyType::ZSet {
            return;
        }
        let k = self.0;
        unsafe {
            let started = if rev {
                rm!(RedisModule_ZsetLastInScoreRange)(k, min, max, 0, 0)
            } else {
                rm!(RedisModule_ZsetFirstInScoreRange)(k, min, max, 0, 0)
            };
            if started == OK {
                while rm!(RedisModule_ZsetRangeEndReached)(k) == 0 {
                    let mut score = 0.0;
                    let el = rm!(RedisModule_ZsetRangeCurrentElement)(k, &mut score);
                    // The element is a new string we own.
                    if el.is_null() || !f(RStr::adopt(el), score) {
                        break;
                    }
                    let more = if rev { rm!(RedisModule_ZsetRangePrev)(k) } else { rm!(RedisModule_ZsetRangeNext)(k) };
                    if more == 0 {
                        break;
                    }
                }
            }
            // Always stopped before anyone changes the key.
            rm!(RedisModule_ZsetRangeStop)(k);
        }
    }

    /// Whether any member has score in [min, max] (no member string is made).
    pub fn any_in_score_range(&self, min: f64, max: f64) -> bool {
        if self.key_type() != KeyType::ZSet {
            return false;
        }
        let k = self.0;
        unsafe {
            let any = rm!(RedisModule_ZsetFirstInScoreRange)(k, min, max, 0, 0) == OK && rm!(RedisModule_ZsetRangeEndReached)(k) == 0;
            // Stopped at once, as `zscan` does, before anyone changes the key.
            rm!(RedisModule_ZsetRangeStop)(k);
            any
        }
    }

    pub fn hget(&self, field: &RStr) -> Option<RStr> {
        self.hget_pair(field, None).0
    }

    /// Two fields in one call (the second optional): one key lookup for both.
    pub fn hget_pair(&self, a: &RStr, b: Option<&RStr>) -> (Option<RStr>, Option<RStr>) {
        if self.key_type() != KeyType::Hash {
            return (None, None);
        }
        let mut out: [*mut raw::RedisModuleString; 2] = [std::ptr::null_mut(); 2];
        let end = std::ptr::null_mut::<raw::RedisModuleString>();
        let [oa, ob] = &mut out;
        unsafe {
            // SAFETY: an open hash key, live field names, and NULL-terminated pairs.
            match b {
                Some(b) => {
                    rm!(RedisModule_HashGet)(self.0, raw::REDISMODULE_HASH_NONE as i32, a.ptr(), oa as *mut _, b.ptr(), ob as *mut _, end)
                }
                None => rm!(RedisModule_HashGet)(self.0, raw::REDISMODULE_HASH_NONE as i32, a.ptr(), oa as *mut _, end),
            };
            // A found value is a new string we own.
            let own = |p: *mut raw::RedisModuleString| (!p.is_null()).then(|| RStr::adopt(p));
            (own(out[0]), own(out[1]))
        }
    }

    /// Sets (Some) or deletes (None) a hash field; returns how many fields were updated or
    /// deleted (0 for a new field). Deleting the last field deletes the key.
    pub fn hset(&self, field: &RStr, value: Option<&RStr>) -> i32 {
        if self.0.is_null() {
            return 0;
        }
        let v = value.map_or(raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString, RStr::ptr);
        unsafe {
            rm!(RedisModule_HashSet)(
                self.0,
                raw::REDISMODULE_HASH_NONE as i32,
                field.ptr(),
                v,
                std::ptr::null_mut::<raw::RedisModuleString>(),
            )
        }
    }

    /// Calls `f` with every field and value of a hash (RM_ScanKey: no command is run, so
    /// it is safe inside a keyspace notification, where RM_Call is not).
    pub fn hscan(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        if self.key_type() != KeyType::Hash {
            return;
        }
        let mut f = f;
        let data: *mut &mut dyn FnMut(&[u8], &[u8]) = &mut f;
        // SAFETY: an open hash key; `data` points to `f`, alive during the scan; the
        // cursor is destroyed here.
        unsafe {
            let cursor = rm!(RedisModule_ScanCursorCreate)();
            while rm!(RedisModule_ScanKey)(self.0, cursor, Some(visit_field), data.cast()) != 0 {}
            rm!(RedisModule_ScanCursorDestroy)(cursor);
        }
    }

    /// A string key's value (None unless it holds a string).
    pub fn string(&self) -> Option<Vec<u8>> {
        if self.key_type() != KeyType::String {
            return None;
        }
        let mut len = 0;
        // SAFETY: an open string key; read mode gives a pointer to `len` bytes, valid
        // until the key changes, copied at once.
        let p = unsafe { rm!(RedisModule_StringDMA)(self.0, &mut len, raw::REDISMODULE_READ as i32) };
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
    }

    /// Makes the key a string holding `v` (a key opened for writing).
    pub fn set_string(&self, v: &RStr) -> bool {
        !self.0.is_null() && unsafe { rm!(RedisModule_StringSet)(self.0, v.ptr()) } == OK
    }

    /// When the key expires (Unix ms), None if it does not.
    pub fn expires_at(&self) -> Option<i64> {
        if self.key_type() == KeyType::Empty {
            return None;
        }
        let at = unsafe { rm!(RedisModule_GetAbsExpire)(self.0) };
        (at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at)
    }

    /// Makes the key expire at `at` (Unix ms).
    pub fn expire_at(&self, at: i64) -> bool {
        self.key_type() != KeyType::Empty && unsafe { rm!(RedisModule_SetAbsExpire)(self.0, at) } == OK
    }

    /// Deletes the key's value as UNLINK does (a large one is freed in the background);
    /// false when there was none.
    pub fn unlink(&self) -> bool {
        if self.key_type() == KeyType::Empty {
            return false;
        }
        // SAFETY: an open key handle (opened for writing by the caller).
        unsafe { rm!(RedisModule_UnlinkKey)(self.0) == OK }
    }

    /// Deletes the key's value; false when there was none.
    pub fn delete(&self) -> bool {
        if self.key_type() == KeyType::Empty {
            return false;
        }
        unsafe { rm!(RedisModule_DeleteKey)(self.0) == OK }
    }
}

extern "C" fn visit_field(
    _key: *mut raw::RedisModuleKey,
    field: *mut raw::RedisModuleString,
    value: *mut raw::RedisModuleString,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the visitor passed by `hscan`, alive during the scan; field and
    // value are live strings during the call (value may be NULL for non-hash keys).
    let f = unsafe { &mut *(data as *mut &mut dyn FnMut(&[u8], &[u8])) };
    if field.is_null() || value.is_null() {
        return;
    }
    // SAFETY: live strings (above).
    let (field, value) = unsafe { (super::rstr::bytes(field), super::rstr::bytes(value)) };
    super::guard::guard((), || f(field, value));
}
