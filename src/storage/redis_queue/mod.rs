//! `RedisQueue`: the `Store` over a queue's real keys, through the raw sorted-set and hash
//! API. Every change is also recorded for replication and sent when the queue is closed
//! (so even a failed command replicates exactly what it changed), and only the keys that
//! changed are signalled as modified (WATCH). Whether a change may have made a message
//! deliverable is recorded too (`take_wake`), for the runtime to act on. Beside this file:
//! the `Store` over the keys (`store`), listpack conversion (`encoding`), the header and
//! in-flight memos (`header`), RMQ.PURGE's bulk removal (`purge`) and the scratch buffers (`scratch`).

use std::cell::{Cell, OnceCell, RefCell};
use std::ffi::CStr;

use redis_module::raw;

use crate::core::codec;
use crate::core::error::{Result, RmqError};
use crate::core::kind::Kind;
use crate::core::names::{KeyId, ALL, KEYS};
use crate::core::queue_store::{Flight, Set, Store};
use crate::ffi::key::{Key, KeyType};
use crate::ffi::{Ctx, RStr};
use crate::storage::effects::Effects;
use crate::storage::keys::{self, Header, KeyNames};
use crate::storage::{headers, journal_stream};

mod encoding;
mod header;
mod purge;
mod redis_store;
mod scratch;

use encoding::skiplist_at;
pub(crate) use encoding::HASHTABLE_AT;
use header::message_meta;
use scratch::Scratch;

pub struct RedisQueue {
    ctx: Ctx,
    write: bool,
    /// Names of the queue's keys, in `KeyId` order.
    names: KeyNames,
    /// Open keys. `Q`, `prepare` and `meta` are opened with the queue; `dead`, `park`,
    /// `parkidx` and `hold` (`keys::LAZY`: used only by dead messages, groups and retry
    /// delays) only while not known to be absent (`keys::names`), else when first written.
    keys: [OnceCell<Key>; KEYS],
    effects: Effects,
    /// Keys changed (to be signalled as modified).
    dirty: Cell<u8>,
    /// Tagged keys that did not exist when the queue was opened and not written since: the
    /// first write makes them (module writes send no keyspace event, and the module does
    /// not follow `new` ones: `created`).
    fresh: Cell<u8>,
    /// Tagged keys this handle made (`made_keys`).
    made: Cell<u8>,
    /// A member was added to `hold{Q}`.
    holds_added: Cell<bool>,
    /// Sorted sets to make skiplists at their next add (`will_add`).
    grow: u8,
    /// Keys known to be skiplists or hashtables already (`keys::Known::big`): not converted
    /// again each time they grow back to the bound.
    big: u8,
    /// Something may have become deliverable: consumers blocked on `Q` should be woken.
    wake: bool,
    /// The kind and the policy, once read (they change only through this handle).
    header: OnceCell<Header>,
    /// Lent at the first record written or deleted, or the first journal note.
    scratch: RefCell<Option<Box<Scratch>>>,
}

const ZADD: &CStr = c"ZADD";
const ZREM: &CStr = c"ZREM";
const HSET: &CStr = c"HSET";
const HDEL: &CStr = c"HDEL";

impl RedisQueue {
    /// Opens the queue's keys (for writing if `write`); WRONGTYPE if any holds another type.
    pub fn open(ctx: Ctx, q: RStr, write: bool) -> Result<RedisQueue> {
        let (names, known) = keys::names(&q, ctx.db());
        let known_absent = known.absent;
        // A lazy key known absent is not opened (nor its class's others): absent, its type
        // cannot be wrong, and a write opens it (`key_mut`). Else the class's key in
        // `keys::LAZY` tells whether it has any (keys before it in `KeyId` order are opened).
        let mut absent = known_absent;
        let keys: [OnceCell<Key>; KEYS] = std::array::from_fn(|i| {
            let cell = OnceCell::new();
            let class = keys::lazy_class(ALL[i]);
            if class.is_none_or(|c| !absent[c]) {
                let key = Key::open(ctx, &names[i], write);
                if let Some(c) = class.filter(|&c| keys::LAZY[c] == ALL[i]) {
                    absent[c] = key.key_type() == KeyType::Empty;
                }
                let _ = cell.set(key);
            }
            cell
        });
        if absent != known_absent {
            keys::note_absent(q.as_ref(), ctx.db(), absent);
        }
        let mut big = known.big;
        let mut meta = false;
        let mut fresh = 0;
        for (i, k) in keys.iter().enumerate() {
            let want = if i == KeyId::Meta as usize { KeyType::Hash } else { KeyType::ZSet };
            let t = k.get().map_or(KeyType::Empty, Key::key_type);
            if t == KeyType::Empty {
                // Made anew when written: a listpack again.
                big &= !(1 << i);
                if i != KeyId::Store as usize {
                    fresh |= 1 << i;
                }
            } else if t != want {
                return Err(RmqError::WrongType);
            } else {
                meta |= i == KeyId::Meta as usize;
            }
        }
        // A known header serves while `meta{Q}` exists (`headers`).
        let header = known.header.filter(|_| meta).map_or_else(OnceCell::new, OnceCell::from);
        Ok(RedisQueue {
            ctx,
            write,
            names,
            keys,
            effects: Effects::new(ctx),
            dirty: Cell::new(0),
            fresh: Cell::new(fresh),
            made: Cell::new(0),
            holds_added: Cell::new(false),
            grow: 0,
            big,
            wake: false,
            header,
            scratch: RefCell::new(None),
        })
    }

    pub fn name(&self) -> &RStr {
        &self.names[0]
    }

    pub fn names(&self) -> &KeyNames {
        &self.names
    }

    /// A key for reading (None: it does not exist).
    fn key(&self, id: KeyId) -> Option<&Key> {
        self.keys[id as usize].get()
    }

    /// A key for writing, opened now if it was not.
    fn key_mut(&self, id: KeyId) -> &Key {
        self.keys[id as usize].get_or_init(|| Key::open(self.ctx, &self.names[id as usize], self.write))
    }

    fn touched(&self, id: KeyId) {
        let bit = 1 << id as u8;
        self.dirty.set(self.dirty.get() | bit);
        if self.fresh.get() & bit != 0 {
            // The first change of a key absent at the open made it.
            self.fresh.set(self.fresh.get() & !bit);
            self.made.set(self.made.get() | bit);
            let (q, db) = (self.names[0].as_ref(), self.ctx.db());
            keys::created(q, id, db);
            if self.big & bit != 0 {
                // Converted as it was made (`will_add`).
                keys::note_big(q, db, id);
            }
        }
    }

    /// `Q` was deleted by another command (DEL, UNLINK, an expiry): with nothing waiting in
    /// it, in flight or dead, and no policy, the queue's other keys go too (messages held
    /// back behind the deleted ones, and every record).
    pub fn abandon(&mut self) -> bool {
        if [Set::Store, Set::Prepare, Set::Dead].iter().any(|&s| self.len(s) > 0) || self.has_policy() {
            return false;
        }
        for id in [KeyId::Park, KeyId::ParkIndex, KeyId::Hold] {
            if self.key(id).is_some_and(Key::delete) {
                self.effects.record(c"DEL", id, || []);
                self.touched(id);
            }
        }
        self.set_pins(Some(0));
        if self.exists() {
            self.clear_meta();
        }
        true
    }

    /// Whether this handle made any of the queue's tagged keys (the queue may be new to
    /// the registry of queue names).
    pub fn made_keys(&self) -> bool {
        self.made.get() != 0
    }

    /// How many fields `meta{Q}` holds (0 when it does not exist).
    fn meta_fields(&self) -> usize {
        self.key(KeyId::Meta).map_or(0, Key::len)
    }

    /// Whether the queue has any state on this node (`meta{Q}` exists while any of its
    /// messages does, or a policy).
    pub fn exists(&self) -> bool {
        self.meta_fields() > 0
    }

    fn has_policy(&self) -> bool {
        self.stored_policy().is_some()
    }

    /// Whether `meta{Q}` holds anything besides the kind and the policy: when it does not
    /// (the usual case for range and fixed queues), per-message lookups are skipped.
    fn has_message_meta(&self) -> bool {
        message_meta(self.meta_fields(), || (self.header().kind_field, self.has_policy()))
    }

    /// Records that `meta{Q}` may (or, holding nothing but the kind and the policy, does
    /// not) hold waiting records, here and in `headers` (after the write: creating
    /// `meta{Q}` drops the entry).
    fn set_waiting_records(&mut self, may: bool) {
        self.header();
        if let Some(h) = self.header.get_mut().filter(|h| h.waiting_records != may) {
            h.waiting_records = may;
            headers::set(self.names[0].as_ref(), self.ctx.db(), h);
        }
    }

    /// Marks the queue's consumers for waking (the timer, at a due time).
    pub fn wake_consumers(&mut self) {
        self.wake = true;
    }

    /// Whether a change may have made a message deliverable since the last call.
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// Whether a retry hold was added.
    pub fn holds_added(&self) -> bool {
        self.holds_added.get()
    }

    /// Whether the messages a pop could take (in `Q`, or held) changed.
    pub fn waiting_changed(&self) -> bool {
        self.dirty.get() & (1 << KeyId::Store as u8 | 1 << KeyId::Hold as u8) != 0
    }

    fn hget(&self, field: &RStr) -> Option<RStr> {
        self.key(KeyId::Meta)?.hget(field)
    }

    /// Sets (Some) or deletes (None) a meta field; removing the last field deletes the key.
    /// Returns whether a deletion deleted.
    fn hset(&mut self, field: RStr, value: Option<RStr>) -> bool {
        let deletion = value.is_none();
        let meta = self.key_mut(KeyId::Meta);
        let changed = meta.hset(&field, value.as_ref());
        if value.is_some() && changed == 0 && meta.len() == HASHTABLE_AT && self.big & 1 << KeyId::Meta as u8 == 0 {
            Self::convert_meta(meta);
            self.noted_big(KeyId::Meta);
        }
        match value {
            Some(v) => self.effects.record(HSET, KeyId::Meta, || [field, v]),
            None if changed > 0 => self.effects.record(HDEL, KeyId::Meta, || [field]),
            None => return false,
        }
        self.touched(KeyId::Meta);
        deletion
    }

    fn tagged_field(&self, tag: u8, m: &[u8]) -> RStr {
        let buf = &mut self.scratch().field;
        codec::field(tag, m, buf);
        RStr::from_bytes(buf)
    }

    /// The `meta{Q}` field of the delivery named `id`.
    fn named_field(&self, id: u64) -> RStr {
        let buf = &mut self.scratch().field;
        codec::named_field(id, buf);
        RStr::from_bytes(buf)
    }

    /// Records whether the queue may have named deliveries (its `ids` field), here and in
    /// `headers`.
    fn set_named(&mut self, named: bool) {
        self.header();
        if let Some(h) = self.header.get_mut().filter(|h| h.named != named) {
            h.named = named;
            headers::set(self.names[0].as_ref(), self.ctx.db(), h);
        }
    }

    /// Drops the last name given (the queue is empty: the next names follow the clock).
    fn forget_names(&mut self) {
        if self.header().named {
            self.hset(header::ids_field().clone(), None);
            self.set_named(false);
        }
    }

    /// A per-message record, if the queue keeps any.
    fn record(&self, tag: u8, m: &[u8]) -> Option<RStr> {
        if !self.has_message_meta() {
            return None;
        }
        self.hget(&self.tagged_field(tag, m))
    }

    /// Reads and deletes a per-message record, with one field string for both.
    fn take_record(&mut self, tag: u8, m: &RStr) -> Option<RStr> {
        if !self.has_message_meta() {
            return None;
        }
        let field = self.tagged_field(tag, m.as_ref());
        let v = self.hget(&field)?;
        self.hset(field, None);
        Some(v)
    }

    /// Sets or deletes a per-message record (a deletion is skipped when the queue keeps
    /// none).
    fn set_record(&mut self, tag: u8, m: &[u8], value: Option<RStr>) {
        if value.is_none() && !self.has_message_meta() {
            return;
        }
        let field = self.tagged_field(tag, m);
        self.hset(field, value);
    }

    /// A message's group index member, built in the field scratch buffer (as a record's
    /// field is: no allocation of the module's per write).
    fn index_member(&self, score: f64, m: &RStr) -> RStr {
        let buf = &mut self.scratch().field;
        codec::index_member(self.order_kind(), score, m.as_ref(), buf);
        RStr::from_bytes(buf)
    }

    /// A record's value, encoded in the handle's scratch buffer.
    fn encoded<T>(&self, encode: fn(&T, &mut Vec<u8>), v: &T) -> RStr {
        let buf = &mut self.scratch().value;
        encode(v, buf);
        RStr::from_bytes(buf)
    }

    /// An in-flight record's value: the last one's string again for the same flight.
    fn flight_value(&self, f: &Flight) -> RStr {
        let Scratch { value, flight, .. } = &mut *self.scratch();
        match flight {
            Some((last, s)) if last == f => s.clone(),
            _ => {
                codec::encode_flight(f, value);
                flight.insert((f.clone(), RStr::from_bytes(value))).1.clone()
            }
        }
    }

    /// RM_ZsetAdd with input `flags` on key `id`; records the change if there was one.
    /// Returns the output flags (0 on failure).
    fn zadd(&mut self, id: KeyId, m: &RStr, score: f64, flags: i32) -> i32 {
        let key = self.key_mut(id);
        let Some(flags) = key.zadd(score, m, flags) else { return 0 };
        let bit = 1 << id as u8;
        if flags & raw::REDISMODULE_ZADD_ADDED as i32 != 0 && (key.len() == skiplist_at(id) || self.grow & bit != 0) && self.big & bit == 0
        {
            Self::convert_zset(key);
            self.grow &= !bit;
            self.noted_big(id);
        }
        if flags & (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as i32 != 0 {
            self.effects.record(ZADD, id, || [RStr::from_score(score), m.clone()]);
            self.touched(id);
            self.wake |= id == KeyId::Store;
            if id == KeyId::Hold {
                self.holds_added.set(true);
            }
        }
        flags
    }

    fn zrem(&mut self, id: KeyId, m: &RStr) -> bool {
        if !self.key(id).is_some_and(|k| k.zrem(m)) {
            return false;
        }
        self.effects.record(ZREM, id, || [m.clone()]);
        self.touched(id);
        // An ended delivery frees the content's waiting copy, if it has one.
        self.wake |= id == KeyId::Prepare;
        true
    }

    /// A message's waiting record, if the queue keeps any.
    fn waiting_record(&self, m: &RStr) -> Option<RStr> {
        if !self.header().waiting_records {
            return None;
        }
        self.record(codec::WAITING, m.as_ref())
    }

    fn order_kind(&self) -> Kind {
        self.kind().unwrap_or(Kind::Fixed)
    }

    /// Ends the command's use of the queue: sends its recorded effects to replicas and
    /// the AOF, signals the keys it changed (WATCH) and gives the scratch buffers back.
    /// Drop does it for a handle not closed; closing twice does nothing more.
    pub fn close(&mut self) {
        if !self.effects.is_empty() {
            self.effects.flush(self.ctx, &self.names);
        }
        if self.scratch.get_mut().as_ref().is_some_and(|s| !s.notes.is_empty()) {
            let keep = self.journal_len();
            if let Some(s) = self.scratch.get_mut() {
                journal_stream::write(self.ctx, self.names[0].as_ref(), &s.notes, keep);
                s.notes.clear();
            }
        }
        let dirty = self.dirty.replace(0);
        for i in 0..KEYS {
            if dirty & (1 << i) != 0 {
                self.ctx.signal_modified(&self.names[i]);
            }
        }
        self.release_scratch();
    }
}

impl Drop for RedisQueue {
    fn drop(&mut self) {
        self.close();
    }
}
