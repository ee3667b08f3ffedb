//! `RedisQueue`: the `Store` over a queue's real keys, through the raw sorted-set and hash
//! API. Every change is also recorded for replication and sent when the queue is dropped
//! (so even a failed command replicates exactly what it changed).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{LazyLock, Mutex, OnceLock};

use redis_module::raw;

use crate::error::{Result, RmqError};
use crate::kind::Kind;
use crate::meta;
use crate::replication::{Effects, KeyId};
use crate::rstr::{bytes, rm, RStr, Shared};
use crate::store::{Flight, Set, Store};

const KEY_EMPTY: u32 = raw::REDISMODULE_KEYTYPE_EMPTY as u32;
const KEY_HASH: u32 = raw::REDISMODULE_KEYTYPE_HASH as u32;
const KEY_ZSET: u32 = raw::REDISMODULE_KEYTYPE_ZSET as u32;

struct Key(*mut raw::RedisModuleKey);

impl Drop for Key {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { rm!(RedisModule_CloseKey)(self.0) }
        }
    }
}

impl Key {
    fn kind(&self) -> u32 {
        unsafe { rm!(RedisModule_KeyType)(self.0) as u32 }
    }
}

pub struct RedisQueue {
    ctx: *mut raw::RedisModuleCtx,
    /// Names of `Q`, `prepare{Q}`, `dead{Q}`, `meta{Q}` (in `KeyId` order).
    names: [RStr; 4],
    keys: [Key; 4],
    effects: Effects,
    /// Something may have become deliverable: wake consumers blocked on `Q`.
    wake: bool,
    /// The kind, once read (it changes only through `set_kind`/`clear_meta`).
    kind: Cell<Option<Option<Kind>>>,
    field: RefCell<Vec<u8>>,
}

fn key_id(set: Set) -> usize {
    match set {
        Set::Store => KeyId::Store as usize,
        Set::Prepare => KeyId::Prepare as usize,
        Set::Dead => KeyId::Dead as usize,
    }
}

fn tagged(prefix: &str, q: &[u8]) -> RStr {
    let mut v = Vec::with_capacity(prefix.len() + q.len() + 2);
    v.extend_from_slice(prefix.as_bytes());
    v.push(b'{');
    v.extend_from_slice(q);
    v.push(b'}');
    RStr::from_bytes(&v)
}

/// Most workloads use a few queues over and over: their derived key names are made once.
const NAME_CACHE_SIZE: usize = 4096;
static NAMES: LazyLock<Mutex<HashMap<Vec<u8>, [Shared; 3]>>> = LazyLock::new(Mutex::default);

/// The names of a queue's keys, in `KeyId` order.
pub fn key_names(q: &RStr) -> [RStr; 4] {
    let b = q.as_ref();
    let mut cache = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if !cache.contains_key(b) {
        if cache.len() >= NAME_CACHE_SIZE {
            cache.clear();
        }
        let made = [Shared(tagged("prepare", b)), Shared(tagged("dead", b)), Shared(tagged("meta", b))];
        cache.insert(b.to_vec(), made);
    }
    let [p, d, m] = &cache[b];
    [q.clone(), p.0.clone(), d.0.clone(), m.0.clone()]
}

fn kind_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(|| Shared(RStr::from_bytes(meta::KIND_FIELD))).0
}

/// The number of `meta{Q}` fields at which it is made a hashtable (see `convert_meta`).
const HASHTABLE_AT: usize = 32;

const ZADD: &CStr = c"ZADD";
const ZREM: &CStr = c"ZREM";
const HSET: &CStr = c"HSET";
const HDEL: &CStr = c"HDEL";

impl RedisQueue {
    /// Opens the queue's keys (for writing if `write`); WRONGTYPE if any holds another type.
    pub fn open(ctx: *mut raw::RedisModuleCtx, q: RStr, write: bool) -> Result<RedisQueue> {
        let mode = if write { raw::REDISMODULE_READ | raw::REDISMODULE_WRITE } else { raw::REDISMODULE_READ };
        let names = key_names(&q);
        let open = |n: &RStr| Key(unsafe { rm!(RedisModule_OpenKey)(ctx, n.ptr(), mode as i32) }.cast());
        let keys = [open(&names[0]), open(&names[1]), open(&names[2]), open(&names[3])];
        for (i, k) in keys.iter().enumerate() {
            let want = if i == KeyId::Meta as usize { KEY_HASH } else { KEY_ZSET };
            if !k.0.is_null() && k.kind() != KEY_EMPTY && k.kind() != want {
                return Err(RmqError::WrongType);
            }
        }
        Ok(RedisQueue { ctx, names, keys, effects: Effects::new(ctx), wake: false, kind: Cell::new(None), field: RefCell::new(Vec::new()) })
    }

    pub fn name(&self) -> &RStr {
        &self.names[0]
    }

    fn zkey(&self, set: Set) -> *mut raw::RedisModuleKey {
        self.keys[key_id(set)].0
    }

    fn meta(&self) -> *mut raw::RedisModuleKey {
        self.keys[KeyId::Meta as usize].0
    }

    /// How many fields `meta{Q}` holds (0 when it does not exist).
    fn meta_fields(&self) -> usize {
        let key = self.meta();
        if key.is_null() { 0 } else { unsafe { rm!(RedisModule_ValueLength)(key) } }
    }

    /// Whether the queue has any state on this node (`meta{Q}` exists while any of its
    /// messages does).
    pub fn exists(&self) -> bool {
        self.meta_fields() > 0
    }

    /// Whether `meta{Q}` holds anything besides the kind: when it does not (the usual case
    /// for range and fixed queues), per-message lookups and deletions are skipped.
    fn has_message_meta(&self) -> bool {
        self.meta_fields() > 1
    }

    /// Wakes the consumers blocked on `Q` when the queue is dropped (the timer, at a due
    /// time).
    pub fn wake_consumers(&mut self) {
        self.wake = true;
    }

    fn hget(&self, field: &RStr) -> Option<RStr> {
        let key = self.meta();
        if key.is_null() || unsafe { rm!(RedisModule_KeyType)(key) } as u32 != KEY_HASH {
            return None;
        }
        let mut out: *mut raw::RedisModuleString = std::ptr::null_mut();
        unsafe {
            rm!(RedisModule_HashGet)(
                key,
                raw::REDISMODULE_HASH_NONE as i32,
                field.ptr(),
                &mut out as *mut *mut raw::RedisModuleString,
                std::ptr::null_mut::<raw::RedisModuleString>(),
            );
        }
        (!out.is_null()).then(|| RStr::adopt(out))
    }

    /// Sets (Some) or deletes (None) a meta field; removing the last field deletes the key.
    fn hset(&mut self, field: RStr, value: Option<RStr>) {
        let v = value.as_ref().map_or(raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString, RStr::ptr);
        let changed = unsafe {
            rm!(RedisModule_HashSet)(self.meta(), raw::REDISMODULE_HASH_NONE as i32, field.ptr(), v, std::ptr::null_mut::<raw::RedisModuleString>())
        };
        if value.is_some() && changed == 0 && self.meta_fields() == HASHTABLE_AT {
            self.convert_meta();
        }
        match value {
            Some(v) => self.effects.record(HSET, KeyId::Meta, || [field, v]),
            None if changed > 0 => self.effects.record(HDEL, KeyId::Meta, || [field]),
            None => {}
        }
    }

    /// Makes `meta{Q}` a hashtable. Redis keeps a hash a listpack up to
    /// hash-max-listpack-entries (512) fields, and every lookup in a listpack is a linear
    /// scan: with hundreds of messages in flight that scan dominated POP and ACK. Setting a
    /// field longer than hash-max-listpack-value converts the hash (it never converts back
    /// while the key lives); the field is deleted at once and never replicated.
    fn convert_meta(&mut self) {
        static LONG: LazyLock<Shared> = LazyLock::new(|| Shared(RStr::from_bytes(&[meta::CONVERT; 1024])));
        let none = std::ptr::null_mut::<raw::RedisModuleString>();
        let flags = raw::REDISMODULE_HASH_NONE as i32;
        let (key, long) = (self.meta(), LONG.0.ptr());
        unsafe {
            rm!(RedisModule_HashSet)(key, flags, long, kind_field().ptr(), none);
            rm!(RedisModule_HashSet)(key, flags, long, raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString, none);
        }
    }

    fn tagged_field(&self, tag: u8, m: &RStr) -> RStr {
        let mut buf = self.field.borrow_mut();
        meta::field(tag, m.as_ref(), &mut buf);
        RStr::from_bytes(&buf)
    }

    /// RM_ZsetAdd with input `flags`; records the change if there was one. Returns the
    /// output flags (0 on failure).
    fn zadd(&mut self, set: Set, m: &RStr, score: f64, mut flags: i32) -> i32 {
        let ok = unsafe { rm!(RedisModule_ZsetAdd)(self.zkey(set), score, m.ptr(), &mut flags) } == raw::REDISMODULE_OK as i32;
        if !ok {
            return 0;
        }
        if flags & (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as i32 != 0 {
            self.effects.record(ZADD, KeyId::from_set(set), || [RStr::from_score(score), m.clone()]);
            self.wake |= set == Set::Store;
        }
        flags
    }

    /// Wakes consumers blocked on this queue if a change may have made a message
    /// deliverable.
    fn signal(&mut self) {
        if std::mem::take(&mut self.wake) {
            unsafe { rm!(RedisModule_SignalKeyAsReady)(self.ctx, self.names[0].ptr()) };
            crate::blocking::schedule_wakeup(self.ctx, self);
        }
    }
}

impl Drop for RedisQueue {
    fn drop(&mut self) {
        if !self.effects.is_empty() {
            self.effects.flush(self.ctx, &self.names);
        }
        self.signal();
    }
}

impl Store for RedisQueue {
    type M = RStr;

    fn len(&self, set: Set) -> u64 {
        let k = self.zkey(set);
        if k.is_null() {
            return 0;
        }
        unsafe { rm!(RedisModule_ValueLength)(k) as u64 }
    }

    fn score(&self, set: Set, m: &RStr) -> Option<f64> {
        let k = self.zkey(set);
        let mut score = 0.0;
        let ok = !k.is_null() && unsafe { rm!(RedisModule_ZsetScore)(k, m.ptr(), &mut score) } == raw::REDISMODULE_OK as i32;
        ok.then_some(score)
    }

    fn add(&mut self, set: Set, m: &RStr, score: f64) {
        self.zadd(set, m, score, 0);
    }

    /// One lookup instead of `score` then `add`: the member's hash lookup is the main
    /// cost of a push into a large queue.
    fn upsert(&mut self, set: Set, m: &RStr, score: f64, replace: bool) -> bool {
        let flags = self.zadd(set, m, score, if replace { 0 } else { raw::REDISMODULE_ZADD_NX as i32 });
        flags & raw::REDISMODULE_ZADD_ADDED as i32 != 0
    }

    fn rem(&mut self, set: Set, m: &RStr) -> bool {
        let k = self.zkey(set);
        let mut deleted = 0;
        if k.is_null() || unsafe { rm!(RedisModule_ZsetRem)(k, m.ptr(), &mut deleted) } != raw::REDISMODULE_OK as i32 || deleted == 0 {
            return false;
        }
        self.effects.record(ZREM, KeyId::from_set(set), || [m.clone()]);
        // An ended delivery frees the content's waiting copy, if it has one.
        self.wake |= set == Set::Prepare;
        true
    }

    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(RStr, f64) -> bool) {
        let k = self.zkey(set);
        if k.is_null() || unsafe { rm!(RedisModule_KeyType)(k) } as u32 != KEY_ZSET {
            return;
        }
        let started = unsafe {
            if rev {
                rm!(RedisModule_ZsetLastInScoreRange)(k, min, max, 0, 0)
            } else {
                rm!(RedisModule_ZsetFirstInScoreRange)(k, min, max, 0, 0)
            }
        };
        if started == raw::REDISMODULE_OK as i32 {
            while unsafe { rm!(RedisModule_ZsetRangeEndReached)(k) } == 0 {
                let mut score = 0.0;
                let el = unsafe { rm!(RedisModule_ZsetRangeCurrentElement)(k, &mut score) };
                if el.is_null() || !f(RStr::adopt(el), score) {
                    break;
                }
                let more = unsafe { if rev { rm!(RedisModule_ZsetRangePrev)(k) } else { rm!(RedisModule_ZsetRangeNext)(k) } };
                if more == 0 {
                    break;
                }
            }
        }
        unsafe { rm!(RedisModule_ZsetRangeStop)(k) };
    }

    fn count(&self, set: Set, min: f64, max: f64) -> u64 {
        let (lo, hi) = (RStr::from_score(min), RStr::from_score(max));
        let name = &self.names[key_id(set)];
        let reply = unsafe { rm!(RedisModule_Call)(self.ctx, c"ZCOUNT".as_ptr(), c"sss".as_ptr(), name.ptr(), lo.ptr(), hi.ptr()) };
        if reply.is_null() {
            return 0;
        }
        let n = unsafe { rm!(RedisModule_CallReplyInteger)(reply) };
        unsafe { rm!(RedisModule_FreeCallReply)(reply) };
        n.max(0) as u64
    }

    fn kind(&self) -> Option<Kind> {
        if let Some(k) = self.kind.get() {
            return k;
        }
        let k = self.hget(kind_field()).and_then(|v| Kind::from_name(v.as_ref()));
        self.kind.set(Some(k));
        k
    }

    fn set_kind(&mut self, kind: Kind) {
        self.hset(kind_field().clone(), Some(RStr::from_bytes(kind.name().as_bytes())));
        self.kind.set(Some(Some(kind)));
    }

    fn clear_meta(&mut self) {
        let k = self.meta();
        if !k.is_null() && unsafe { rm!(RedisModule_KeyType)(k) } as u32 != KEY_EMPTY {
            unsafe { rm!(RedisModule_DeleteKey)(k) };
            self.effects.record(c"DEL", KeyId::Meta, || []);
            self.kind.set(Some(None));
        }
    }

    fn waiting_deliveries(&self, m: &RStr) -> u32 {
        if !self.has_message_meta() {
            return 0;
        }
        self.hget(&self.tagged_field(meta::WAITING, m)).map_or(0, |v| meta::decode_count(v.as_ref()))
    }

    fn set_waiting_deliveries(&mut self, m: &RStr, n: u32) {
        if n == 0 && !self.has_message_meta() {
            return;
        }
        let f = self.tagged_field(meta::WAITING, m);
        self.hset(f, (n > 0).then(|| RStr::from_i64(n as i64)));
    }

    fn flight(&self, m: &RStr) -> Flight {
        if !self.has_message_meta() {
            return Flight::default();
        }
        self.hget(&self.tagged_field(meta::FLIGHT, m)).map_or_else(Flight::default, |v| meta::decode_flight(v.as_ref()))
    }

    fn set_flight(&mut self, m: &RStr, f: Option<Flight>) {
        if f.is_none() && !self.has_message_meta() {
            return;
        }
        let field = self.tagged_field(meta::FLIGHT, m);
        self.hset(field, f.map(|f| RStr::from_bytes(meta::encode_flight(&f).as_bytes())));
    }

    fn take_flight(&mut self, m: &RStr) -> Flight {
        if !self.has_message_meta() {
            return Flight::default();
        }
        let field = self.tagged_field(meta::FLIGHT, m);
        let f = self.hget(&field).map_or_else(Flight::default, |v| meta::decode_flight(v.as_ref()));
        self.hset(field, None);
        f
    }

    fn dead_priority(&self, m: &RStr) -> Option<f64> {
        if !self.has_message_meta() {
            return None;
        }
        self.hget(&self.tagged_field(meta::DEAD, m)).and_then(|v| meta::decode_priority(v.as_ref()))
    }

    fn set_dead_priority(&mut self, m: &RStr, p: Option<f64>) {
        if p.is_none() && !self.has_message_meta() {
            return;
        }
        let field = self.tagged_field(meta::DEAD, m);
        self.hset(field, p.map(RStr::from_score));
    }
}

impl KeyId {
    fn from_set(set: Set) -> KeyId {
        match set {
            Set::Store => KeyId::Store,
            Set::Prepare => KeyId::Prepare,
            Set::Dead => KeyId::Dead,
        }
    }
}

/// The bytes of argv strings, for parsing.
pub fn arg_bytes<'a>(argv: &'a [*mut raw::RedisModuleString]) -> Vec<&'a [u8]> {
    argv.iter().map(|p| bytes(*p)).collect()
}
