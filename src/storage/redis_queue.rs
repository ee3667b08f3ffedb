//! `RedisQueue`: the `Store` over a queue's real keys, through the raw sorted-set and hash
//! API. Every change is also recorded for replication and sent when the queue is dropped
//! (so even a failed command replicates exactly what it changed), and only the keys that
//! changed are signalled as modified (WATCH). Whether a change may have made a message
//! deliverable is recorded too (`take_wake`), for the runtime to act on.

use std::cell::{Cell, OnceCell, RefCell, RefMut};
use std::ffi::CStr;
use std::sync::{LazyLock, OnceLock};

use redis_module::raw;

use crate::core::codec;
use crate::core::error::{Result, RmqError};
use crate::core::kind::Kind;
use crate::core::names::{KeyId, ALL, KEYS};
use crate::core::policy::Policy;
use crate::core::store::{Dead, Flight, Set, Store, Waiting};
use crate::ffi::call::call;
use crate::ffi::key::{Key, KeyType};
use crate::ffi::rstr::Shared;
use crate::ffi::{Ctx, RStr};
use crate::storage::busy::{self, Flights};
use crate::storage::effects::Effects;
use crate::storage::headers;
use crate::storage::keys::{self, Header, KeyNames};

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
    /// Lent at the first record written or deleted.
    scratch: RefCell<Option<Box<Scratch>>>,
}

/// Scratch buffers for records' field names and values (`tagged_field`, `encoded`), lent to
/// a handle for its command and given back when it drops: fresh buffers were allocated and
/// grown by every command that wrote or deleted a record. (Reaching a thread-local per
/// record cost more than the buffers' upkeep in a POP of many.) Boxed: lent, given back
/// and moved with the handle (open, into TPOP's list) as a pointer, not ~110 bytes.
#[derive(Default)]
struct Scratch {
    field: Vec<u8>,
    value: Vec<u8>,
    /// The last in-flight record written and its value's string (`flight_value`): the
    /// records of a POP, and of POP after POP, mostly share one (a first delivery at one
    /// priority), and encoding it and making and freeing a string per record cost ~450
    /// instructions. Redis copies what it stores and nobody edits a string, so one may be
    /// shared (replication keeps it too).
    flight: Option<(Flight, RStr)>,
}

/// Boxes, as lent: a spare goes to a handle and back without being boxed again.
#[allow(clippy::vec_box)]
type Spares = Vec<Box<Scratch>>;

thread_local!(static SPARE: RefCell<Spares> = const { RefCell::new(Vec::new()) });

/// Buffers grown past this (a large message's field) are let go, not kept for the
/// process's life.
const SCRATCH_KEPT: usize = 4096;
/// Spares kept (handles open at once that hold buffers; more borrow new ones).
const SPARES: usize = 4;

impl Scratch {
    fn lend() -> Box<Scratch> {
        SPARE.with_borrow_mut(Vec::pop).unwrap_or_default()
    }

    fn give_back(self: Box<Self>) {
        if self.field.capacity() <= SCRATCH_KEPT && self.value.capacity() <= SCRATCH_KEPT {
            // (The kept flight's value is no longer than the value buffer.)
            SPARE.with_borrow_mut(|s| {
                if s.len() < SPARES {
                    s.push(self);
                }
            });
        }
    }
}

fn shared(b: &'static [u8]) -> impl Fn() -> Shared {
    move || Shared(RStr::from_bytes(b))
}

fn kind_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(shared(codec::KIND_FIELD)).0
}

fn policy_field() -> &'static RStr {
    static FIELD: OnceLock<Shared> = OnceLock::new();
    &FIELD.get_or_init(shared(codec::POLICY_FIELD)).0
}

/// A string longer than Redis's listpack limits (hash-max-listpack-value and
/// zset-max-listpack-value, 64 by default): added and removed at once, it converts a hash
/// or sorted set to its hashtable or skiplist form (`convert_meta`, `convert_zset`).
fn long_string() -> &'static RStr {
    static LONG: LazyLock<Shared> = LazyLock::new(|| Shared(RStr::from_bytes(&[codec::CONVERT; 1024])));
    &LONG.0
}

/// The number of `meta{Q}` fields at which it is made a hashtable (see `convert_meta`):
/// every delivery looks its record up twice (set at the pop, deleted at the ack), and
/// past ~16 fields a listpack's scan costs more than a hashtable's lookup (the QUANTUM 1
/// drain of issue 21, where each small queue has 16-32 deliveries in flight: 21,708 ->
/// ~18,900 instructions a message with both bounds at 16 instead of 32).
const HASHTABLE_AT: usize = 16;
/// The number of members at which a sorted set is made a skiplist (see `convert_zset`):
/// `prepare{Q}` as early as `meta{Q}` (each delivery is an insert and a removal by name),
/// the others (read mostly at their ends) at 32.
fn skiplist_at(id: KeyId) -> usize {
    if id == KeyId::Prepare {
        HASHTABLE_AT
    } else {
        32
    }
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

    /// Key `id` was made a skiplist or hashtable: so it stays while it lives.
    fn noted_big(&mut self, id: KeyId) {
        self.big |= 1 << id as u8;
        keys::note_big(self.names[0].as_ref(), self.ctx.db(), id);
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
    pub fn abandon(&mut self) {
        if [Set::Store, Set::Prepare, Set::Dead].iter().any(|&s| self.len(s) > 0) || self.has_policy() {
            return;
        }
        for id in [KeyId::Park, KeyId::ParkIndex, KeyId::Hold] {
            if self.key(id).is_some_and(Key::delete) {
                self.effects.record(c"DEL", id, || []);
                self.touched(id);
            }
        }
        if self.exists() {
            self.clear_meta();
        }
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

    /// Makes `meta{Q}` a hashtable. Redis keeps a hash a listpack up to
    /// hash-max-listpack-entries (512) fields, and every lookup in a listpack is a linear
    /// scan: with hundreds of messages in flight that scan dominated POP and ACK. Setting a
    /// field longer than hash-max-listpack-value converts the hash (it never converts back
    /// while the key lives); the field is deleted at once and never replicated.
    fn convert_meta(meta: &Key) {
        meta.hset(long_string(), Some(kind_field()));
        meta.hset(long_string(), None);
    }

    /// Makes a sorted set a skiplist. Redis keeps a sorted set a listpack up to
    /// zset-max-listpack-entries (128) members, and every insert or lookup in a listpack
    /// is a linear scan: with a few dozen messages in flight, adding to `prepare{Q}` cost
    /// more than all the rest of a POP. Adding a member longer than
    /// zset-max-listpack-value converts the set (it never converts back while the key
    /// lives); the member is removed at once and never replicated.
    fn convert_zset(key: &Key) {
        // NX: a real member of that content (a skiplist already) is left alone.
        if key.zadd(0.0, long_string(), raw::REDISMODULE_ZADD_NX as i32).is_some_and(|f| f & raw::REDISMODULE_ZADD_ADDED as i32 != 0) {
            key.zrem(long_string());
        }
    }

    /// Gives the scratch buffers back before the handle closes (lent again at the next
    /// record written): a TPOP keeps every queue it visits open to its end, and past
    /// `SPARES` each visit allocated and freed buffers of its own (~500 instructions).
    pub fn release_scratch(&mut self) {
        if let Some(s) = self.scratch.get_mut().take() {
            s.give_back();
        }
    }

    fn scratch(&self) -> RefMut<'_, Scratch> {
        RefMut::map(self.scratch.borrow_mut(), |s| &mut **s.get_or_insert_with(Scratch::lend))
    }

    fn tagged_field(&self, tag: u8, m: &[u8]) -> RStr {
        let buf = &mut self.scratch().field;
        codec::field(tag, m, buf);
        RStr::from_bytes(buf)
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

    fn stored_policy(&self) -> &Option<Policy> {
        &self.header().policy
    }

    /// The kind and the policy, the first time (unless known from an earlier command when
    /// the queue was opened: `headers`): read in one lookup (most commands need both).
    fn header(&self) -> &Header {
        self.header.get_or_init(|| {
            let Some(meta) = self.key(KeyId::Meta).filter(|k| k.key_type() == KeyType::Hash) else { return Header::default() };
            let (kind, policy) = meta.hget_pair(kind_field(), Some(policy_field()));
            let (policy, kind_in_policy) = policy.map_or((None, None), |v| {
                let (p, k) = decode_policy(v.as_ref());
                (Some(p), k)
            });
            let waiting_records = message_meta(meta.len(), || (kind.is_some(), policy.is_some()));
            let h = Header {
                kind: kind.as_ref().map_or(kind_in_policy, |v| Kind::from_name(v.as_ref())),
                kind_field: kind.is_some(),
                policy,
                waiting_records,
            };
            headers::set(self.names[0].as_ref(), self.ctx.db(), &h);
            h
        })
    }

    /// Writes the kind and the policy (whichever changed), the kind inside the policy's
    /// value when there is one.
    fn set_header(&mut self, kind: Option<Kind>, policy: Option<Policy>) {
        let old = self.header().clone();
        let in_field = policy.is_none() && kind.is_some();
        // Fields are added before others are deleted: the hash never empties on the way.
        if in_field && (!old.kind_field || old.kind != kind) {
            self.hset(kind_field().clone(), kind.map(|k| RStr::from_bytes(k.name().as_bytes())));
        }
        let (old_value, new_value) =
            (old.policy.as_ref().map(|p| codec::policy_value(p, old.kind)), policy.as_ref().map(|p| codec::policy_value(p, kind)));
        if new_value != old_value {
            self.hset(policy_field().clone(), new_value.map(|v| RStr::from_bytes(&v)));
        }
        if !in_field && old.kind_field {
            self.hset(kind_field().clone(), None);
        }
        let h = Header { kind, kind_field: in_field, policy, waiting_records: old.waiting_records };
        headers::set(self.names[0].as_ref(), self.ctx.db(), &h);
        self.header = OnceCell::from(h);
    }

    /// Runs `f` on the queue's grouped deliveries in flight (`busy`), filled from its
    /// in-flight records if they are not known.
    fn flights<R>(&self, f: impl FnOnce(&mut Flights) -> R) -> R {
        let fill = || {
            let mut known = Flights::default();
            if self.has_message_meta() {
                self.scan(Set::Prepare, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
                    if let Some(g) = self.record(codec::GROUP_FLIGHT, m.as_ref()).and_then(|v| codec::decode_flight(v.as_ref()).group) {
                        known.start(Shared(m), g);
                    }
                    true
                });
            }
            known
        };
        busy::with(self.names[0].as_ref(), self.ctx.db(), fill, f)
    }

    /// Forgets a delivery in memory, if known (its record is deleted), which frees its
    /// group: the group it had, `Some(None)` for a delivery without one, `None` if not known.
    fn forget_flight(&self, m: &RStr) -> Option<Option<Vec<u8>>> {
        busy::if_known(self.names[0].as_ref(), self.ctx.db(), |s| s.end(m.as_ref()))
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
}

/// Whether a `meta{Q}` of `n` fields holds anything besides the kind and the policy
/// (`header`: whether it has a kind field and a policy, asked only when it matters).
fn message_meta(n: usize, header: impl FnOnce() -> (bool, bool)) -> bool {
    // One field is the kind or the policy; two may be both only in a hash written before
    // the policy carried the kind.
    n > 2 || (n == 2 && header() != (true, true))
}

/// Decodes a stored policy and the kind it carries, remembering the last one: a queue's
/// policy is read by every command, the queues of a topic usually share one, and decoding
/// cost more than reading.
fn decode_policy(b: &[u8]) -> (Policy, Option<Kind>) {
    thread_local!(static LAST: RefCell<(Vec<u8>, Policy, Option<Kind>)> = RefCell::default());
    LAST.with_borrow_mut(|(bytes, p, k)| {
        if bytes.as_slice() != b {
            (*p, *k) = (Policy::decode(b), codec::kind_in_policy(b));
            *bytes = b.to_vec();
        }
        (p.clone(), *k)
    })
}

impl Drop for RedisQueue {
    fn drop(&mut self) {
        if !self.effects.is_empty() {
            self.effects.flush(self.ctx, &self.names);
        }
        let dirty = self.dirty.get();
        for i in 0..KEYS {
            if dirty & (1 << i) != 0 {
                self.ctx.signal_modified(&self.names[i]);
            }
        }
        self.release_scratch();
    }
}

impl Store for RedisQueue {
    type M = RStr;

    fn len(&self, set: Set) -> u64 {
        self.key(KeyId::of(set)).map_or(0, |k| k.len() as u64)
    }

    fn score(&self, set: Set, m: &RStr) -> Option<f64> {
        self.key(KeyId::of(set))?.zscore(m)
    }

    fn add(&mut self, set: Set, m: &RStr, score: f64) {
        self.zadd(KeyId::of(set), m, score, 0);
    }

    /// One lookup instead of `score` then `add`: the member's hash lookup is the main
    /// cost of a push into a large queue.
    fn upsert(&mut self, set: Set, m: &RStr, score: f64, replace: bool) -> bool {
        let flags = self.zadd(KeyId::of(set), m, score, if replace { 0 } else { raw::REDISMODULE_ZADD_NX as i32 });
        flags & raw::REDISMODULE_ZADD_ADDED as i32 != 0
    }

    /// A set this command takes past the listpack bound is made a skiplist at its first add
    /// rather than at its bound (`skiplist_at`): each listpack insert scans the set (a TPOP visit
    /// to a queue whose `prepare{Q}` had emptied paid ~6,000 instructions an insert).
    fn will_add(&mut self, set: Set, n: usize) {
        let len = self.len(set) as usize;
        let at = skiplist_at(KeyId::of(set));
        if len < at && len + n >= at {
            self.grow |= 1 << KeyId::of(set) as u8;
        }
    }

    fn rem(&mut self, set: Set, m: &RStr) -> bool {
        self.zrem(KeyId::of(set), m)
    }

    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(RStr, f64) -> bool) {
        if let Some(k) = self.key(KeyId::of(set)) {
            k.zscan(min, max, rev, f);
        }
    }

    fn count(&self, set: Set, min: f64, max: f64) -> u64 {
        if self.len(set) == 0 {
            return 0;
        }
        let (lo, hi) = (RStr::from_score(min), RStr::from_score(max));
        let name = &self.names[KeyId::of(set) as usize];
        call(self.ctx, c"ZCOUNT", &[name, &lo, &hi]).and_then(|r| r.integer()).map_or(0, |n| n.max(0) as u64)
    }

    fn park(&mut self, m: &RStr, score: f64, g: &[u8]) {
        self.zadd(KeyId::Park, m, score, 0);
        let member = self.index_member(score, m);
        self.zadd(KeyId::ParkIndex, &member, codec::group_score(g), 0);
    }

    fn unpark_scored(&mut self, m: &RStr, score: f64) {
        self.zrem(KeyId::Park, m);
        self.index_head(m, score, None);
    }

    fn index_head(&mut self, m: &RStr, score: f64, g: Option<&[u8]>) -> bool {
        let member = self.index_member(score, m);
        match g {
            Some(g) => self.zadd(KeyId::ParkIndex, &member, codec::group_score(g), 0) & raw::REDISMODULE_ZADD_ADDED as i32 != 0,
            None => self.zrem(KeyId::ParkIndex, &member),
        }
    }

    fn best_indexed(&self, g: &[u8]) -> Option<(RStr, f64, bool)> {
        let index = self.key(KeyId::ParkIndex)?;
        let h = codec::group_score(g);
        let mut best = None;
        // Groups that share a hash share a score: skip the other groups' members.
        index.zscan(h, h, false, &mut |member, _| {
            let m = RStr::from_bytes(codec::index_message(member.as_ref()));
            if self.waiting_record(&m).is_some_and(|v| codec::waiting_group(v.as_ref()) == Some(g)) {
                let parked = self.score(Set::Park, &m);
                best = parked.or_else(|| self.score(Set::Store, &m)).map(|sc| (m, sc, parked.is_some()));
            }
            best.is_none()
        });
        best
    }

    fn may_have_indexed(&self, g: &[u8]) -> bool {
        let h = codec::group_score(g);
        self.key(KeyId::ParkIndex).is_some_and(|index| index.any_in_score_range(h, h))
    }

    fn kind(&self) -> Option<Kind> {
        self.header().kind
    }

    fn set_kind(&mut self, kind: Kind) {
        let policy = self.stored_policy().clone();
        self.set_header(Some(kind), policy);
    }

    fn clear_meta(&mut self) {
        // Empty: nothing in flight (and no set kept for a queue that is gone).
        busy::forget(self.names[0].as_ref(), self.ctx.db());
        if self.has_policy() {
            let policy = self.stored_policy().clone();
            self.set_header(None, policy);
            // Records left by keys deleted by hand around `meta{Q}` would still be read.
            if !self.has_message_meta() {
                self.set_waiting_records(false);
            }
        } else {
            if self.key(KeyId::Meta).is_some_and(Key::delete) {
                self.effects.record(c"DEL", KeyId::Meta, || []);
                self.touched(KeyId::Meta);
            }
            headers::forget(self.names[0].as_ref(), self.ctx.db());
            self.header = OnceCell::from(Header::default());
        }
    }

    fn waiting(&self, m: &RStr) -> Waiting {
        self.waiting_record(m).map_or_else(Waiting::default, |v| codec::decode_waiting(v.as_ref()))
    }

    fn set_waiting(&mut self, m: &RStr, w: Option<&Waiting>) {
        let value = w.filter(|w| **w != Waiting::default()).map(|w| self.encoded(codec::encode_waiting, w));
        let adds = value.is_some();
        // Without records, a deletion has nothing to delete.
        if adds || self.header().waiting_records {
            self.set_record(codec::WAITING, m.as_ref(), value);
        }
        if adds {
            self.set_waiting_records(true);
        }
    }

    fn flight(&self, m: &RStr) -> Flight {
        let record = || self.record(codec::FLIGHT, m.as_ref()).or_else(|| self.record(codec::GROUP_FLIGHT, m.as_ref()));
        record().map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()))
    }

    fn set_flight(&mut self, m: &RStr, f: Option<&Flight>) {
        match f {
            Some(f) => {
                let tag = if f.group.is_some() { codec::GROUP_FLIGHT } else { codec::FLIGHT };
                let value = self.flight_value(f);
                self.set_record(tag, m.as_ref(), Some(value));
            }
            None => {
                self.set_record(codec::FLIGHT, m.as_ref(), None);
                self.set_record(codec::GROUP_FLIGHT, m.as_ref(), None);
            }
        }
    }

    fn take_flight(&mut self, m: &RStr) -> Flight {
        self.forget_flight(m);
        let record = self.take_record(codec::FLIGHT, m).or_else(|| self.take_record(codec::GROUP_FLIGHT, m));
        record.map_or_else(Flight::default, |v| codec::decode_flight(v.as_ref()))
    }

    /// Every ACK pays this: a delivery ends in one deletion, with no read, when it has no
    /// group or its group is known in memory (then freed in the same look-up).
    fn end_flight(&mut self, m: &RStr) -> Option<Vec<u8>> {
        if !self.has_message_meta() {
            return None;
        }
        // No waiting record since the queue last had no records: nothing was pushed with a
        // group, so no delivery has one (nor is any known in memory): no look-up there.
        if !self.header().waiting_records {
            self.hset(self.tagged_field(codec::FLIGHT, m.as_ref()), None);
            return None;
        }
        if let Some(group) = self.forget_flight(m) {
            // Known: a delivery without a group in memory has no group record.
            let tag = if group.is_some() { codec::GROUP_FLIGHT } else { codec::FLIGHT };
            self.hset(self.tagged_field(tag, m.as_ref()), None);
            return group;
        }
        if self.hset(self.tagged_field(codec::FLIGHT, m.as_ref()), None) {
            return None;
        }
        // Not known in memory: filled from the records, this one gone, when next needed.
        self.take_record(codec::GROUP_FLIGHT, m).and_then(|v| codec::decode_flight(v.as_ref()).group)
    }

    fn dead(&self, m: &RStr) -> Dead {
        self.record(codec::DEAD, m.as_ref()).map_or_else(Dead::default, |v| codec::decode_dead(v.as_ref()))
    }

    fn set_dead(&mut self, m: &RStr, d: Option<&Dead>) {
        let value = d.map(|d| self.encoded(codec::encode_dead, d));
        self.set_record(codec::DEAD, m.as_ref(), value);
    }

    fn busy(&self, g: &[u8]) -> bool {
        self.flights(|s| s.busy(g))
    }

    /// A delivery's group is kept with it until the delivery ends, which frees the group
    /// (`take_flight`, `end_flight`).
    fn set_busy(&mut self, g: Vec<u8>, m: &RStr) {
        self.flights(|s| s.start(Shared(m.clone()), g));
    }

    /// Nothing left to do: the delivery's end freed its group.
    fn set_free(&mut self, _: &[u8]) {}

    fn policy(&self) -> Policy {
        self.stored_policy().clone().unwrap_or_default()
    }

    fn set_policy(&mut self, p: Option<&Policy>) -> bool {
        let had = self.has_policy();
        // The values it has write nothing (nor signal to WATCH).
        if p != self.stored_policy().as_ref() {
            let kind = self.kind();
            self.set_header(kind, p.cloned());
        }
        had
    }
}
