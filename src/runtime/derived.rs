//! What the module remembers of the keyspace between commands, and when it forgets or
//! rebuilds it: the one place that knows every memo (docs/MEMORY.md has the same table for
//! contributors). The keys are always the truth; each memo is either filled lazily from
//! them (and forgotten whenever they may have changed without the module) or rebuilt by a
//! keyspace scan (`rescan`).
//!
//! | memo (owner)                         | truth in the keyspace        | forgotten / rebuilt |
//! |--------------------------------------|------------------------------|---------------------|
//! | lazy keys absent, keys converted (`storage::keys`) | whether `dead`/`park`/`hold{Q}` exist, their encoding | `Queue`: `keys::written`; `All` |
//! | headers (`storage::headers`)         | `meta{Q}`'s kind and policy  | `Queue` on `meta{Q}`; `All` |
//! | busy groups (`storage::busy`)        | `prepare{Q}` and its group records in `meta{Q}` | `Queue`; `All` |
//! | queue registry (`runtime::registry`) | the tagged keys' names       | `All`: rescanned (any role) |
//! | leases and holds (`runtime::alarm`)  | `prepare{Q}`, `hold{Q}`      | `All`: rescanned on a primary |
//! | firings (`runtime::alarm`)           | `sched{Q}`                   | `All`: rescanned on a primary, dropped on a replica |
//! | due times (`runtime::alarm`)         | blocked consumers' queues    | `All` after a SWAPDB (consumers note theirs anew) |
//! | topic index (`runtime::topics`)      | non-empty `Q`/`hold{Q}` of a topic's slots | `All`: rescanned on a primary |
//! | slots served (`runtime::cluster_slots`)    | CLUSTER NODES                | `All` after a role change; a CLUSTER command |
//!
//! Not memos of the keyspace (nothing in it to rebuild them from): blocked consumers
//! (`blocking`, `waiters`), rate buckets (`ratelimit`), counters (`stats`, `queue_stats`),
//! TPOP's ACL verdicts (`acl`, forgotten by ACL commands), whether effects are sent
//! (`storage::effects`).

use std::collections::BTreeSet;

use crate::core::names::{queue_of, scheduled_queue, KeyId};
use crate::core::queue_store::{Set, Store};
use crate::core::route;
use crate::core::rules;
use crate::ffi::guard::guard;
use crate::ffi::server_callbacks::scan_keys;
use crate::ffi::{Ctx, RStr};
use crate::runtime::{alarm, cluster_slots, registry, schedule_firing, topics, waiters};
use crate::storage::keys;
use crate::storage::redis_queue::RedisQueue;
use crate::storage::{busy, headers};

/// What may have changed without the module.
pub enum Scope<'a> {
    /// Queue `q`'s tagged key `key` in database `db` (a keyspace event on it).
    Queue { q: &'a [u8], db: i32, key: Option<KeyId> },
    /// Every database's keys, for the reason given.
    All(Why),
}

/// Why every key may have changed: each rebuilds what that change leaves stale.
#[derive(Clone, Copy, PartialEq)]
pub enum Why {
    Loaded,
    Swapped,
    Flushed,
    /// This node became a primary: the names did not change, the leases may have.
    Promoted,
    /// This node became a replica: it fires nothing.
    Demoted,
}

/// Forgets what `scope` may have made stale, and rebuilds what is kept eagerly.
pub fn invalidate(ctx: Ctx, scope: Scope) {
    match scope {
        Scope::Queue { q, db, key } => {
            // Any change to a tagged key (DEL, RENAME, MOVE, RESTORE, a ZREM from
            // `prepare{Q}`, an expiry ...) may change which groups are busy, `meta{Q}` the
            // header, and `parkidx{Q}` the pinned heads it counts (`Header::pins`).
            busy::forget(q, db);
            if matches!(key, Some(KeyId::Meta | KeyId::ParkIndex)) {
                headers::forget(q, db);
            }
        }
        Scope::All(why) => {
            keys::forget_arrived();
            busy::forget_all();
            headers::forget_all();
            match why {
                Why::Loaded | Why::Flushed => rescan(ctx, Rescan::All),
                Why::Swapped => {
                    alarm::clear_dues();
                    rescan(ctx, Rescan::All);
                }
                Why::Promoted | Why::Demoted => {
                    cluster_slots::forget_slots();
                    if why == Why::Promoted {
                        rescan(ctx, Rescan::TimersAndIndex);
                    } else {
                        alarm::clear_firings();
                    }
                }
            }
        }
    }
}

/// Tells the timer about queue `q`'s leases and holds, the topic index about its waiting
/// messages, and its blocked consumers that it may have a deliverable one.
pub fn found(ctx: Ctx, q: &[u8]) {
    if let Ok(queue) = RedisQueue::open(ctx, RStr::from_bytes(q), false) {
        if let Some(next) = rules::next_work(&queue) {
            alarm::note_lease(ctx, q, next);
        }
        topics::note(ctx.db(), q, queue.len(Set::Store) + queue.len(Set::Hold) > 0);
        if waiters::has_waiters(ctx.db(), q) {
            waiters::possibly_deliverable(ctx, &queue);
        }
    }
}

/// The queue a key may belong to: the one a tagged key names, else a key named as a
/// topic's slot (`Q` itself cannot be told from another key by its name; only those are
/// worth a look, for the topic index).
fn scanned_queue(key: &[u8]) -> Option<&[u8]> {
    queue_of(key).map(|(q, _)| q).or_else(|| route::split(key).map(|_| key))
}

/// What a keyspace scan rebuilds: the registry of queue names (any role), and on a
/// primary the leases, holds, firings and the topic index (replicas neither roll back nor
/// serve TPOP).
#[derive(Clone, Copy, PartialEq)]
pub enum Rescan {
    All,
    /// A promotion: the names did not change.
    TimersAndIndex,
}

/// Finds every queue of every database in one keyspace scan (after a load, a promotion, a
/// SWAPDB or a FLUSH, and when the module is loaded over existing data).
pub fn rescan(ctx: Ctx, what: Rescan) {
    let primary = ctx.is_primary();
    let names = what == Rescan::All;
    if !primary && !names {
        return;
    }
    guard((), || {
        let original = ctx.db();
        if primary {
            alarm::clear_leases();
            alarm::clear_firings();
            topics::clear();
        }
        let mut db = 0;
        while ctx.select_db(db) {
            // Queues are opened after the scan: the scan must not see keys change.
            let (mut listed, mut queues) = (BTreeSet::new(), BTreeSet::new());
            let mut scheduled: Vec<Vec<u8>> = Vec::new();
            scan_keys(ctx, &mut |key, _| {
                if names {
                    listed.extend(registry::listed_by(key).map(<[u8]>::to_vec));
                }
                if primary {
                    queues.extend(scanned_queue(key).map(<[u8]>::to_vec));
                    scheduled.extend(scheduled_queue(key).map(<[u8]>::to_vec));
                }
            });
            // Installed before the queues are opened: an opening that expires a key takes
            // its queue out of the new names.
            if names {
                registry::install(db as usize, listed);
            }
            for q in queues {
                found(ctx, &q);
            }
            for q in scheduled {
                schedule_firing::found(ctx, &q);
            }
            db += 1;
        }
        ctx.select_db(original);
    });
}
