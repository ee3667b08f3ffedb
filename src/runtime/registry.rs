//! Which queues each database holds, by name, in memory, for RMQ.QUEUES: a queue is listed
//! while any of its keys exists (`Q` as a sorted set, or a key tagged `{Q}`: prepare, dead,
//! meta, park, hold, sched). A name comes in when one of its keys is created (the `new`
//! keyspace event, which every creation sends, a load from disk aside), goes when a queue
//! the module emptied has no key left or its last key is deleted, expires, is evicted or
//! moves away, and the whole set is built again by a keyspace scan after a load, a SWAPDB
//! or a FLUSH. Names are kept in order, so a listing goes on from the last name it gave
//! and every queue present throughout is seen whatever comes and goes meanwhile. An entry
//! that outlived its keys (a key overwritten by another type, say) is dropped when a
//! listing meets it.
//!
//! The lock is never held across a call into Redis: opening a key may expire it, and the
//! event comes back here.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::glob;
use crate::core::store::{Set, Store};
use crate::ffi::key::{Key, KeyType};
use crate::ffi::{Ctx, RStr};
use crate::storage::keys::{self, is_queue_name, owner};
use crate::storage::redis_queue::RedisQueue;

/// Queue names by database (index).
static QUEUES: LazyLock<Mutex<Vec<BTreeSet<Vec<u8>>>>> = LazyLock::new(Mutex::default);

fn queues() -> MutexGuard<'static, Vec<BTreeSet<Vec<u8>>>> {
    QUEUES.lock().unwrap_or_else(|e| e.into_inner())
}

fn insert(db: i32, q: &[u8]) {
    let Ok(db) = usize::try_from(db) else { return };
    let mut all = queues();
    if all.len() <= db {
        all.resize_with(db + 1, BTreeSet::new);
    }
    if !all[db].contains(q) {
        all[db].insert(q.to_vec());
    }
}

fn listed(db: i32, q: &[u8]) -> bool {
    usize::try_from(db).ok().is_some_and(|db| queues().get(db).is_some_and(|s| s.contains(q)))
}

fn remove(db: i32, q: &[u8]) {
    let Ok(db) = usize::try_from(db) else { return };
    if let Some(set) = queues().get_mut(db) {
        set.remove(q);
    }
}

/// Whether a key exists (a lookup where the server has no KeyExists).
fn present(ctx: Ctx, name: &[u8]) -> bool {
    let name = RStr::from_bytes(name);
    Key::exists(ctx, &name).unwrap_or_else(|| !Key::open(ctx, &name, false).is_null())
}

/// Whether queue `q` has any key in the selected database.
fn has_keys(ctx: Ctx, q: &[u8]) -> bool {
    Key::open(ctx, &RStr::from_bytes(q), false).key_type() == KeyType::ZSet || keys::tagged_names(q).any(|k| present(ctx, &k))
}

/// The queue a key may belong to: the queue it is tagged with, else the key itself if it
/// can name a queue (whether it is one depends on its type).
fn queue_of_key(key: &[u8]) -> Option<&[u8]> {
    owner(key).or(is_queue_name(key).then_some(key))
}

/// Key `key` was created (or arrived) in the selected database.
pub fn key_created(ctx: Ctx, key: &RStr) {
    let key = key.as_ref();
    match owner(key) {
        Some(q) => insert(ctx.db(), q),
        None if is_queue_name(key) && Key::open(ctx, &RStr::from_bytes(key), false).key_type() == KeyType::ZSet => insert(ctx.db(), key),
        None => {}
    }
}

/// Key `key` was deleted, expired, evicted, renamed or moved away: its queue goes if it has
/// no key left.
pub fn key_gone(ctx: Ctx, key: &RStr) {
    if let Some(q) = queue_of_key(key.as_ref()) {
        if listed(ctx.db(), q) && !has_keys(ctx, q) {
            remove(ctx.db(), q);
        }
    }
}

/// A command or the timer is done with queue `q` (its own deletions send no event): if it
/// holds nothing now, it goes unless a key it does not open (its schedules) remains.
#[inline]
pub fn closed(ctx: Ctx, q: &RedisQueue) {
    // `meta{Q}` exists while the queue has messages or a policy: one length read, mostly.
    if !q.exists() && [Set::Store, Set::Prepare, Set::Dead, Set::Park, Set::Hold].iter().all(|&s| q.len(s) == 0) {
        key_gone(ctx, q.name());
    }
}

/// The queue that key `key`, of type `t`, lists (for a keyspace scan).
pub fn listed_by(key: &[u8], t: KeyType) -> Option<&[u8]> {
    owner(key).or((t == KeyType::ZSet && is_queue_name(key)).then_some(key))
}

/// Installs database `db`'s names as a keyspace scan found them (after a load, a SWAPDB or
/// a FLUSH, and when the module is loaded over existing data: `hooks::rescan`); the
/// databases after it are dropped until their own scan installs them.
pub fn install(db: usize, names: BTreeSet<Vec<u8>>) {
    let mut all = queues();
    all.truncate(db);
    all.resize_with(db, BTreeSet::new);
    all.push(names);
}

/// One page of RMQ.QUEUES in the selected database: from the name after `after` (None:
/// the first), at most `count` names visited, those with keys, matching `pattern`, in a
/// slot this node serves and allowed by `allowed` returned; and the last name visited when
/// more may follow (None: the listing is complete).
pub fn page(
    ctx: Ctx,
    pattern: Option<&[u8]>,
    count: usize,
    after: Option<&[u8]>,
    serves: &dyn Fn(&[u8]) -> bool,
    allowed: &dyn Fn(&[u8]) -> bool,
) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
    let db = ctx.db();
    // Names matching a pattern all start with its literal prefix: skip to it, stop past it.
    let prefix = pattern.map_or(&b""[..], glob::literal_prefix);
    let from = match after {
        Some(a) if a >= prefix => Bound::Excluded(a),
        _ => Bound::Included(prefix),
    };
    let mut visited: Vec<Vec<u8>> = Vec::with_capacity(count);
    let mut more = false;
    {
        let all = queues();
        if let Some(set) = usize::try_from(db).ok().and_then(|d| all.get(d)) {
            for q in set.range::<[u8], _>((from, Bound::Unbounded)).take_while(|q| q.starts_with(prefix)) {
                if visited.len() == count {
                    more = true;
                    break;
                }
                visited.push(q.clone());
            }
        }
    }
    let next = more.then(|| visited.last().cloned()).flatten();
    let mut out = Vec::new();
    for q in visited {
        if !has_keys(ctx, &q) {
            remove(db, &q);
        } else if pattern.is_none_or(|p| glob::matches(p, &q)) && serves(&q) && allowed(&q) {
            out.push(q);
        }
    }
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_queue() {
        assert_eq!(queue_of_key(b"prepare{q}"), Some(&b"q"[..]));
        assert_eq!(queue_of_key(b"sched{q}"), Some(&b"q"[..]));
        assert_eq!(queue_of_key(b"q"), Some(&b"q"[..]));
        assert_eq!(queue_of_key(b"other{q}"), None);
        assert_eq!(queue_of_key(b""), None);
    }
}
