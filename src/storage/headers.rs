//! What `meta{Q}` says of a queue as a whole (its kind and its policy, and whether it holds
//! waiting copies' records), and how many pinned heads `parkidx{Q}` holds (`Header::pins`),
//! kept in memory between commands: reading both fields cost
//! every PUSH and POP two hash lookups and a string (~1,300 instructions), and looking up
//! a record that is not there every popped message ~950. Like `busy`, the keys stay the truth: an entry serves only
//! while `meta{Q}` exists, and is forgotten whenever the key may change without the module
//! (a command naming it or `parkidx{Q}`, seen by the command filter: `keys::made_anywhere`, or a
//! transaction that queued one; a generic keyspace event on it: DEL, RENAME, RESTORE, an expiry ...; its creation
//! by the module) or all keys may (a load, a
//! promotion, SWAPDB, FLUSH). The module changes the two fields only through
//! `RedisQueue::set_header`, adds waiting records only through `RedisQueue::set_waiting`
//! and writes `parkidx{Q}`'s members only through its `park_keyed` and `index_head` (or
//! removes the whole key), which keep its entry.

use crate::storage::keys::{self, Header};

/// Remembers the header of queue `q` in `db` (read from, or just written to, its keys),
/// beside its key names (`keys::names`; a queue out of that cache is not remembered).
pub fn set(q: &[u8], db: i32, h: &Header) {
    keys::with_header(q, |e| *e = Some((db, h.clone())));
}

/// `meta{Q}` of queue `q` in `db` may have changed without the module.
pub fn forget(q: &[u8], db: i32) {
    keys::with_header(q, |e| {
        if e.as_ref().is_some_and(|(d, _)| *d == db) {
            *e = None;
        }
    });
}

/// Every key may have changed (a load, a promotion, SWAPDB, FLUSH).
pub fn forget_all() {
    keys::forget_headers();
}
