//! What `meta{Q}` says of a queue as a whole (its kind and its policy, and whether it holds
//! waiting copies' records), kept in memory between commands: reading both fields cost
//! every PUSH and POP two hash lookups and a string (~1,300 instructions), and looking up
//! a record that is not there every popped message ~950. Like `busy`, the keys stay the truth: an entry serves only
//! while `meta{Q}` exists, and is forgotten whenever the key may change without the module
//! (any keyspace event on it: its creation, HSET/HDEL, DEL, RENAME, RESTORE, an expiry ...;
//! the module's own writes send none but a creation's) or all keys may (a load, a
//! promotion, SWAPDB, FLUSH). The module changes the two fields only through
//! `RedisQueue::set_header` and adds waiting records only through
//! `RedisQueue::set_waiting`, which keep its entry.

use std::cell::RefCell;

use crate::core::fnv::FnvMap;
use crate::core::kind::Kind;
use crate::core::policy::Policy;

#[derive(Clone, Default)]
pub struct Header {
    pub kind: Option<Kind>,
    /// The kind is in a `kind` field (a queue without a policy; else it is in the policy's).
    pub kind_field: bool,
    pub policy: Option<Policy>,
    /// `meta{Q}` may hold records of waiting copies (`w` fields: a count, a held priority,
    /// a group). False while it is known to hold none (most queues never have any), so a
    /// pop need not look each message's record up.
    pub waiting_records: bool,
}

/// Entries kept at most (most workloads use a few queues over and over): past it, all go.
const SIZE: usize = 4096;

thread_local! {
    /// Per queue, the database it was read in and its header (one database per queue: a
    /// read in another replaces it).
    static KNOWN: RefCell<FnvMap<Vec<u8>, (i32, Header)>> = RefCell::default();
}

/// The header of queue `q` in `db`, if known.
pub fn get(q: &[u8], db: i32) -> Option<Header> {
    KNOWN.with_borrow(|k| k.get(q).filter(|(d, _)| *d == db).map(|(_, h)| h.clone()))
}

/// Remembers the header of queue `q` in `db` (read from, or just written to, its keys).
pub fn set(q: &[u8], db: i32, h: &Header) {
    KNOWN.with_borrow_mut(|k| {
        if let Some(e) = k.get_mut(q) {
            *e = (db, h.clone());
            return;
        }
        if k.len() >= SIZE {
            k.clear();
        }
        k.insert(q.to_vec(), (db, h.clone()));
    })
}

/// `meta{Q}` of queue `q` in `db` may have changed without the module.
pub fn forget(q: &[u8], db: i32) {
    KNOWN.with_borrow_mut(|k| {
        if k.get(q).is_some_and(|(d, _)| *d == db) {
            k.remove(q);
        }
    })
}

/// Every key may have changed (a load, a promotion, SWAPDB, FLUSH).
pub fn forget_all() {
    KNOWN.with_borrow_mut(|k| k.clear())
}
