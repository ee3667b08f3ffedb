//! Listpack conversion: the queue's hash and sorted sets (and its deduplication records,
//! `ledger`) are made hashtables and skiplists early, as their lookups are linear scans
//! while they are listpacks.

use std::sync::LazyLock;

use redis_module::raw;

use crate::core::codec;
use crate::core::names::KeyId;
use crate::ffi::key::Key;
use crate::ffi::rstr::Shared;
use crate::ffi::RStr;
use crate::storage::keys;

use super::header::kind_field;
use super::RedisQueue;

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
pub(crate) const HASHTABLE_AT: usize = 16;
/// The number of members at which a sorted set is made a skiplist (see `convert_zset`):
/// `prepare{Q}` as early as `meta{Q}` (each delivery is an insert and a removal by name),
/// the others (read mostly at their ends) at 32.
pub(super) fn skiplist_at(id: KeyId) -> usize {
    if id == KeyId::Prepare {
        HASHTABLE_AT
    } else {
        32
    }
}

impl RedisQueue {
    /// Key `id` was made a skiplist or hashtable: so it stays while it lives.
    pub(super) fn noted_big(&mut self, id: KeyId) {
        self.big |= 1 << id as u8;
        keys::note_big(self.names[0].as_ref(), self.ctx.db(), id);
    }

    /// Makes `meta{Q}` a hashtable. Redis keeps a hash a listpack up to
    /// hash-max-listpack-entries (512) fields, and every lookup in a listpack is a linear
    /// scan: with hundreds of messages in flight that scan dominated POP and ACK. Setting a
    /// field longer than hash-max-listpack-value converts the hash (it never converts back
    /// while the key lives); the field is deleted at once and never replicated.
    pub(crate) fn convert_meta(meta: &Key) {
        meta.hset(long_string(), Some(kind_field()));
        meta.hset(long_string(), None);
    }

    /// Makes a sorted set a skiplist. Redis keeps a sorted set a listpack up to
    /// zset-max-listpack-entries (128) members, and every insert or lookup in a listpack
    /// is a linear scan: with a few dozen messages in flight, adding to `prepare{Q}` cost
    /// more than all the rest of a POP. Adding a member longer than
    /// zset-max-listpack-value converts the set (it never converts back while the key
    /// lives); the member is removed at once and never replicated.
    pub(crate) fn convert_zset(key: &Key) {
        // NX: a real member of that content (a skiplist already) is left alone.
        if key.zadd(0.0, long_string(), raw::REDISMODULE_ZADD_NX as i32).is_some_and(|f| f & raw::REDISMODULE_ZADD_ADDED as i32 != 0) {
            key.zrem(long_string());
        }
    }
}
