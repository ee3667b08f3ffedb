//! Which queues each database holds, by name, in memory, for RMQ.QUEUES: a queue is listed
//! while the module keeps something for it, any key tagged `{Q}` (prepare, dead, meta,
//! park, parkidx, hold, sched); `Q` alone is a sorted set like any other (a leaderboard is
//! no queue). A name comes in when the module makes one of its keys (`closed`, and a
//! schedule's `noted`), when one arrives or is written by another command as a sorted set
//! (RESTORE, RENAME, MOVE, COPY, ZADD: `key_created`), or when a command names one as its
//! first key (`noted_by_hand`: `SET meta{x} v`; a replica learns of its primary's queues
//! so). One made as another key of a command (`MSET a 1 meta{x} v`) is listed from the
//! next scan on. A name goes when a queue the module emptied has no key
//! left or its last key is deleted, expires, is evicted or moves away; and the whole set
//! is built again by a keyspace scan after a load, a SWAPDB or a FLUSH. Names are kept in
//! order, so a listing goes on from the last name it gave and every queue present
//! throughout is seen whatever comes and goes meanwhile. An entry that outlived its keys
//! (a key overwritten by another type, say) is dropped when a listing meets it.
//!
//! The lock is never held across a call into Redis: opening a key may expire it, and the
//! event comes back here.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::glob;
use crate::core::names::{self, owner};
use crate::core::queue_store::{Set, Store};
use crate::ffi::key::Key;
use crate::ffi::{Ctx, RStr};
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

/// Whether queue `q` is listed in database `db`.
pub fn listed(db: i32, q: &[u8]) -> bool {
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

/// Whether queue `q` has any tagged key in the selected database.
fn has_keys(ctx: Ctx, q: &[u8]) -> bool {
    names::tagged_names(q).any(|k| present(ctx, &k))
}

/// Tagged key `key` was made by another command, or arrived, in the selected database.
pub fn key_created(ctx: Ctx, key: &[u8]) {
    if let Some(q) = owner(key) {
        insert(ctx.db(), q);
    }
}

/// The module made a key of queue `q` outside a `RedisQueue` (a schedule).
pub fn noted(ctx: Ctx, q: &[u8]) {
    insert(ctx.db(), q);
}

/// Names of queues whose tagged key a command named first (`noted_by_hand`),
/// not yet looked for: the command filter that sees them knows no database, and they may
/// not exist (the command may fail).
static BY_HAND: Mutex<BTreeSet<Vec<u8>>> = Mutex::new(BTreeSet::new());

/// A command (HSET, SET ... by hand, or a primary's effect on a replica) named a tagged
/// key of queue `q` first: looked for at the next listing.
pub fn noted_by_hand(q: &[u8]) {
    let mut by_hand = BY_HAND.lock().unwrap_or_else(|e| e.into_inner());
    if !by_hand.contains(q) {
        by_hand.insert(q.to_vec());
    }
}

/// Lists the queues `noted_by_hand` in every database where they have a tagged key.
fn settle_by_hand(ctx: Ctx) {
    let by_hand = std::mem::take(&mut *BY_HAND.lock().unwrap_or_else(|e| e.into_inner()));
    if by_hand.is_empty() {
        return;
    }
    let original = ctx.db();
    let mut db = 0;
    while ctx.select_db(db) {
        for q in by_hand.iter().filter(|q| has_keys(ctx, q)) {
            insert(db, q);
        }
        db += 1;
    }
    ctx.select_db(original);
}

/// Key `key` was deleted, expired, evicted, renamed or moved away: its queue goes if it has
/// no tagged key left.
pub fn key_gone(ctx: Ctx, key: &RStr) {
    if let Some(q) = owner(key.as_ref()) {
        gone_if_keyless(ctx, q);
    }
}

fn gone_if_keyless(ctx: Ctx, q: &[u8]) {
    if listed(ctx.db(), q) && !has_keys(ctx, q) {
        remove(ctx.db(), q);
    }
}

/// A command or the timer is done with queue `q` (its own writes send no event): a queue
/// it made keys for is listed; one that holds nothing now goes unless a key it does not
/// open (its schedules) remains. Returns whether it holds nothing now but perhaps `Q`.
#[inline]
pub fn closed(ctx: Ctx, q: &RedisQueue) -> bool {
    // `meta{Q}` exists while the queue has messages or a policy: one length read, mostly.
    if q.exists() {
        if q.made_keys() {
            insert(ctx.db(), q.name().as_ref());
        }
        false
    } else if [Set::Prepare, Set::Dead, Set::Park, Set::Hold].iter().all(|&s| q.len(s) == 0) {
        gone_if_keyless(ctx, q.name().as_ref());
        true
    } else {
        false
    }
}

/// The queue that key `key` lists (for a keyspace scan).
pub fn listed_by(key: &[u8]) -> Option<&[u8]> {
    owner(key)
}

/// Installs database `db`'s names as a keyspace scan found them (after a load, a SWAPDB or
/// a FLUSH, and when the module is loaded over existing data: `derived::rescan`); the
/// databases after it are dropped until their own scan installs them (and with the first,
/// the names `noted_by_hand`: the scans see their keys).
pub fn install(db: usize, names: BTreeSet<Vec<u8>>) {
    if db == 0 {
        BY_HAND.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    let mut all = queues();
    all.truncate(db);
    all.resize_with(db, BTreeSet::new);
    all.push(names);
}

/// One page of RMQ.QUEUES in the selected database: from the name after `after` (None:
/// the first), at most `count` names visited, those matching `pattern` returned; and the
/// last name visited when more may follow (None: the listing is complete). Only names with
/// keys, in a slot this node serves and allowed by `allowed` are visited: the others are
/// passed over uncounted, so every page, the end and the cursor are what a server without
/// them would answer (a user learns nothing of the queues its ACL hides).
pub fn page(
    ctx: Ctx,
    pattern: Option<&[u8]>,
    count: usize,
    after: Option<&[u8]>,
    serves: &dyn Fn(&[u8]) -> bool,
    allowed: &dyn Fn(&[u8]) -> bool,
) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
    settle_by_hand(ctx);
    let db = ctx.db();
    // Names matching a pattern all start with its literal prefix: skip to it, stop past it.
    let prefix = pattern.map_or(&b""[..], glob::literal_prefix);
    let mut from = match after {
        Some(a) if a >= prefix => Bound::Excluded(a.to_vec()),
        _ => Bound::Included(prefix.to_vec()),
    };
    let (mut out, mut visited, mut last) = (Vec::new(), 0, None);
    loop {
        // A batch at a time: the lock is not held while keys are looked up.
        let batch: Vec<Vec<u8>> = {
            let all = queues();
            let Some(set) = usize::try_from(db).ok().and_then(|d| all.get(d)) else { return (out, None) };
            let start = match &from {
                Bound::Included(n) => Bound::Included(n.as_slice()),
                Bound::Excluded(n) => Bound::Excluded(n.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            };
            set.range::<[u8], _>((start, Bound::Unbounded)).take_while(|q| q.starts_with(prefix)).take(count + 1).cloned().collect()
        };
        let Some(end) = batch.last() else { return (out, None) };
        from = Bound::Excluded(end.clone());
        for q in batch {
            if !has_keys(ctx, &q) {
                remove(db, &q);
            } else if serves(&q) && allowed(&q) {
                // One more visible name after a full page: the listing goes on.
                if visited == count {
                    return (out, last);
                }
                visited += 1;
                if pattern.is_none_or(|p| glob::matches(p, &q)) {
                    out.push(q.clone());
                }
                last = Some(q);
            }
        }
    }
}
