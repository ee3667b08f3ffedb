//! `RedisQueue`: the `Store` over a queue's real keys, through the raw sorted-set and hash
//! API. Every change is also recorded for replication and sent when the queue is dropped
//! (so even a failed command replicates exactly what it changed). Whether a change may
//! have made a message deliverable is recorded too (`take_wake`), for the runtime to act
//! on.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::sync::{LazyLock, OnceLock};

use redis_module::raw;

use crate::core::codec;
use crate::core::error::{Result, RmqError};
use crate::core::kind::Kind;
use crate::core::store::{Flight, Set, Store};
use crate::ffi::call::call;
use crate::ffi::key::{Key, KeyType};
use crate::ffi::rstr::Shared;
use crate::ffi::{Ctx, RStr};
use crate::storage::effects::Effects;
use crate::storage::keys::{self, KeyId};

pub struct RedisQueue {
    ctx: Ctx,
    /// Names of `Q`, `prepare{Q}`, `dead{Q}`, `meta{Q}` (in `KeyId` order).
    names: [RStr; 4],
    keys: [Key; 4],
    effects: Effects,
    /// Something may have become deliverable: consumers blocked on `Q` should be woken.
    wake: bool,
    /// The kind, once read (it changes only through `set_kind`/`clear_meta`).
    kind: Cell<Option<Option<Kind>>>,
    field: RefCell<Vec<u8>>,
}

fn kind_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(|| Shared(RStr::from_bytes(codec::KIND_FIELD))).0
}

/// The number of `meta{Q}` fields at which it is made a hashtable (see `convert_meta`).
const HASHTABLE_AT: usize = 32;

const ZADD: &CStr = c"ZADD";
const ZREM: &CStr = c"ZREM";
const HSET: &CStr = c"HSET";
const HDEL: &CStr = c"HDEL";

impl RedisQueue {
    /// Opens the queue's keys (for writing if `write`); WRONGTYPE if any holds another type.
    pub fn open(ctx: Ctx, q: RStr, write: bool) -> Result<RedisQueue> {
        let names = keys::names(&q);
        let keys = [0, 1, 2, 3].map(|i| Key::open(ctx, &names[i], write));
        for (i, k) in keys.iter().enumerate() {
            let want = if i == KeyId::Meta as usize { KeyType::Hash } else { KeyType::ZSet };
            if k.key_type() != KeyType::Empty && k.key_type() != want {
                return Err(RmqError::WrongType);
            }
        }
        Ok(RedisQueue { ctx, names, keys, effects: Effects::new(ctx), wake: false, kind: Cell::new(None), field: RefCell::new(Vec::new()) })
    }

    pub fn name(&self) -> &RStr {
        &self.names[0]
    }

    fn zkey(&self, set: Set) -> &Key {
        &self.keys[KeyId::of(set) as usize]
    }

    fn meta(&self) -> &Key {
        &self.keys[KeyId::Meta as usize]
    }

    /// How many fields `meta{Q}` holds (0 when it does not exist).
    fn meta_fields(&self) -> usize {
        self.meta().len()
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

    /// Marks the queue's consumers for waking (the timer, at a due time).
    pub fn wake_consumers(&mut self) {
        self.wake = true;
    }

    /// Whether a change may have made a message deliverable since the last call.
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    fn hget(&self, field: &RStr) -> Option<RStr> {
        self.meta().hget(field)
    }

    /// Sets (Some) or deletes (None) a meta field; removing the last field deletes the key.
    fn hset(&mut self, field: RStr, value: Option<RStr>) {
        let changed = self.keys[KeyId::Meta as usize].hset(&field, value.as_ref());
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
        static LONG: LazyLock<Shared> = LazyLock::new(|| Shared(RStr::from_bytes(&[codec::CONVERT; 1024])));
        let meta = &mut self.keys[KeyId::Meta as usize];
        meta.hset(&LONG.0, Some(kind_field()));
        meta.hset(&LONG.0, None);
    }

    fn tagged_field(&self, tag: u8, m: &RStr) -> RStr {
        let mut buf = self.field.borrow_mut();
        codec::field(tag, m.as_ref(), &mut buf);
        RStr::from_bytes(&buf)
    }

    /// RM_ZsetAdd with input `flags`; records the change if there was one. Returns the
    /// output flags (0 on failure).
    fn zadd(&mut self, set: Set, m: &RStr, score: f64, flags: i32) -> i32 {
        let Some(flags) = self.keys[KeyId::of(set) as usize].zadd(score, m, flags) else { return 0 };
        if flags & (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as i32 != 0 {
            self.effects.record(ZADD, KeyId::of(set), || [RStr::from_score(score), m.clone()]);
            self.wake |= set == Set::Store;
        }
        flags
    }
}

impl Drop for RedisQueue {
    fn drop(&mut self) {
        if !self.effects.is_empty() {
            self.effects.flush(self.ctx, &self.names);
        }
    }
}

impl Store for RedisQueue {
    type M = RStr;

    fn len(&self, set: Set) -> u64 {
        self.zkey(set).len() as u64
    }

    fn score(&self, set: Set, m: &RStr) -> Option<f64> {
        self.zkey(set).zscore(m)
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
        if !self.keys[KeyId::of(set) as usize].zrem(m) {
            return false;
        }
        self.effects.record(ZREM, KeyId::of(set), || [m.clone()]);
        // An ended delivery frees the content's waiting copy, if it has one.
        self.wake |= set == Set::Prepare;
        true
    }

    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(RStr, f64) -> bool) {
        self.zkey(set).zscan(min, max, rev, f);
    }

    fn count(&self, set: Set, min: f64, max: f64) -> u64 {
        let (lo, hi) = (RStr::from_score(min), RStr::from_score(max));
        let name = &self.names[KeyId::of(set) as usize];
        call(self.ctx, c"ZCOUNT", &[name, &lo, &hi]).and_then(|r| r.integer()).map_or(0, |n| n.max(0) as u64)
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
        if self.keys[KeyId::Meta as usize].delete() {
            self.effects.record(c"DEL", KeyId::Meta, || []);
            self.kind.set(Some(None));
        }
    }

    fn waiting_deliveries(&self, m: &RStr) -> u32 {
        if !self.has_message_meta() {
            return 0;
        }
        self.hget(&self.tagged_field(codec::WAITING, m)).map_or(0, |v| codec::decode_count(v.as_ref()))
    }

    fn set_waiting_deliveries(&mut self, m: &RStr, n: u32) {
        if n == 0 && !self.has_message_meta() {
            return;
        }
        let f = self.tagged_field(codec::WAITING, m);
        self.hset(f, (n > 0).then(|| RStr::from_i64(n as i64)));
    }

    fn flight(&self, m: &RStr) -> Flight {
        if !self.has_message_meta() {
            return Flight::default();
        }
        self.hget(&self.tagged_field(codec::FLIGHT, m)).map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()))
    }

    fn set_flight(&mut self, m: &RStr, f: Option<Flight>) {
        if f.is_none() && !self.has_message_meta() {
            return;
        }
        let field = self.tagged_field(codec::FLIGHT, m);
        self.hset(field, f.map(|f| RStr::from_bytes(codec::encode_flight(&f).as_bytes())));
    }

    fn take_flight(&mut self, m: &RStr) -> Flight {
        if !self.has_message_meta() {
            return Flight::default();
        }
        let field = self.tagged_field(codec::FLIGHT, m);
        let f = self.hget(&field).map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()));
        self.hset(field, None);
        f
    }

    fn dead_priority(&self, m: &RStr) -> Option<f64> {
        if !self.has_message_meta() {
            return None;
        }
        self.hget(&self.tagged_field(codec::DEAD, m)).and_then(|v| codec::decode_priority(v.as_ref()))
    }

    fn set_dead_priority(&mut self, m: &RStr, p: Option<f64>) {
        if p.is_none() && !self.has_message_meta() {
            return;
        }
        let field = self.tagged_field(codec::DEAD, m);
        self.hset(field, p.map(RStr::from_score));
    }
}
