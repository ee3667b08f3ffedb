//! Server events the module follows, and what each sets going: after a load, a promotion,
//! a SWAPDB or a FLUSH, the leases, the schedules and the topic index are found again by one
//! scan of the keyspace (and the queue registry by another, on replicas too); keys created,
//! deleted, expired or evicted keep the queue registry; keys arriving by RESTORE, RENAME, MOVE
//! or COPY bring their queue's leases, schedules and waiting messages; sorted-set writes by
//! other commands (ZADD ...) to a queue's keys are its own (the topic index learns of them,
//! its blocked consumers are woken); any event on a queue's `meta{Q}` drops its header
//! known in memory (`headers`); SYNC and PSYNC (seen by a command filter) and role
//! changes switch effects on, as CONFIG SET of `appendonly` may; CONFIG SET of the
//! eviction policy re-checks its warning; ACL commands drop TPOP's permission verdicts.

use std::collections::BTreeSet;

use crate::core::route;
use crate::core::rules;
use crate::core::store::{Set, Store};
use crate::ffi::guard::guard;
use crate::ffi::hooks::{self, scan_keys, ServerEvent, FLUSH_ENDED, LOADING_ENDED, NOW_PRIMARY};
use crate::ffi::key::Key;
use crate::ffi::{Ctx, RStr};
use crate::runtime::{acl, alarm, cluster, eviction, registry, schedules, topics, waiters};
use crate::storage::keys::{self, queue_of, KeyId};
use crate::storage::redis_queue::RedisQueue;
use crate::storage::schedules as sched_keys;
use crate::storage::{busy, effects, headers};

/// Tells the timer about queue `q`'s leases and holds, the topic index about its waiting
/// messages, and its blocked consumers that it may have a deliverable one.
fn found(ctx: Ctx, q: &[u8]) {
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

/// Another command (ZADD, ZREM, ZUNIONSTORE ...) wrote sorted set `key`: if it is a
/// queue's, the queue's own rules apply to what it holds now. Members added to `Q` or
/// `hold{Q}` make it a busy queue of its topic (an entry left by a removal is dropped by
/// the next TPOP that finds the queue empty), and any change may make a message
/// deliverable (a ZREM from `prepare{Q}` frees its content).
fn zset_written(ctx: Ctx, key: &RStr) {
    let name = key.as_ref();
    let tagged = queue_of(name);
    let q = tagged.map_or(name, |(q, _)| q);
    // Most sorted sets are no queue's: their names settle it before anything is looked up.
    let slot = route::split(q).is_some();
    if (!slot && !waiters::has_waiters(ctx.db(), q)) || !ctx.is_primary() {
        return;
    }
    let waiting_set = matches!(tagged, None | Some((_, KeyId::Hold)));
    if slot && waiting_set && Key::exists(ctx, key).unwrap_or(true) {
        topics::note(ctx.db(), q, true);
    }
    if waiters::has_waiters(ctx.db(), q) {
        if let Ok(queue) = RedisQueue::open(ctx, RStr::from_bytes(q), false) {
            waiters::possibly_deliverable(ctx, &queue);
        }
    }
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
/// SWAPDB or a FLUSH).
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
            scan_keys(ctx, &mut |key, t| {
                if names {
                    listed.extend(registry::listed_by(key, t).map(<[u8]>::to_vec));
                }
                if primary {
                    queues.extend(scanned_queue(key).map(<[u8]>::to_vec));
                    scheduled.extend(sched_keys::queue_of(key).map(<[u8]>::to_vec));
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
                schedules::found(ctx, &q);
            }
            db += 1;
        }
        ctx.select_db(original);
    });
}

fn on_loading(ctx: Ctx, sub: u64) {
    if sub == LOADING_ENDED {
        keys::forget_arrived();
        busy::forget_all();
        headers::forget_all();
        effects::reconsider();
        rescan(ctx, Rescan::All);
    }
}

/// SWAPDB moves queues between databases: find them again. Consumers blocked on the
/// swapped keys are signalled by Redis itself and note their due times anew.
fn on_swapdb(ctx: Ctx, _sub: u64) {
    keys::forget_arrived();
    busy::forget_all();
    headers::forget_all();
    alarm::clear_dues();
    rescan(ctx, Rescan::All);
}

fn on_flushed(ctx: Ctx, sub: u64) {
    if sub == FLUSH_ENDED {
        busy::forget_all();
        headers::forget_all();
        rescan(ctx, Rescan::All);
    }
}

fn on_role_changed(ctx: Ctx, sub: u64) {
    effects::replicas_from_now();
    cluster::forget_slots();
    // A replica's memory did not follow the effects it applied.
    busy::forget_all();
    headers::forget_all();
    if sub == NOW_PRIMARY {
        rescan(ctx, Rescan::TimersAndIndex);
    } else {
        // A replica fires nothing.
        alarm::clear_firings();
    }
}

/// A key of a queue arriving by RESTORE (a cluster slot migrated here, or a restore by
/// hand), RENAME, MOVE or COPY brings leases the timer does not know yet and waiting
/// messages the topic index does not. (`Q` itself cannot be told from another key by its
/// name: it is looked at as a queue, which costs a lookup when it is not one.)
fn on_key_event(ctx: Ctx, event: &[u8], key: &RStr) {
    let k = key.as_ref();
    let tagged = queue_of(k);
    if let Some((q, KeyId::Meta)) = tagged {
        // Another command (or a creation) touched `meta{Q}`: its kind or policy may differ.
        headers::forget(q, ctx.db());
    } else if event.first() == Some(&b'h') {
        // Hash writes matter only to `meta{Q}`.
        return;
    }
    if event == b"new" {
        keys::key_created(key.as_ref(), ctx.db());
        registry::key_created(ctx, key);
        return;
    }
    // Anything else done to a queue's key by a command (DEL, RENAME, MOVE, RESTORE, a ZREM
    // from `prepare{Q}`, an expiry ...) may change which of its groups are busy: learnt
    // again from the keys.
    busy::forget(tagged.map_or(k, |(q, _)| q), ctx.db());
    if matches!(event, b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from") {
        registry::key_gone(ctx, key);
        return;
    }
    if event.first() == Some(&b'z') {
        zset_written(ctx, key);
        return;
    }
    let arrived = matches!(event, b"restore" | b"rename_to" | b"move_to" | b"copy_to");
    if arrived {
        registry::key_created(ctx, key);
    }
    if arrived && ctx.is_primary() {
        let key = key.as_ref();
        match sched_keys::queue_of(key) {
            Some(q) => schedules::found(ctx, q),
            None => found(ctx, queue_of(key).map_or(key, |(q, _)| q)),
        }
    }
}

/// Sees SYNC and PSYNC before they run, so propagation is on before a replica's initial
/// snapshot is taken and its backlog begins; commands that may change ACL rules; and
/// CLUSTER commands, which may change the slots this node serves.
fn on_command(name: &[u8]) {
    if name.eq_ignore_ascii_case(b"sync") || name.eq_ignore_ascii_case(b"psync") {
        effects::replicas_from_now();
    }
    acl::rules_may_change(name);
    if name.eq_ignore_ascii_case(b"cluster") {
        cluster::forget_slots();
    }
}

/// CONFIG SET: the eviction policy's warning and whether the AOF is on follow it.
fn on_config(ctx: Ctx, names: &[&[u8]]) {
    eviction::config_changed(ctx, names);
    effects::config_changed(names);
}

/// Subscribes to everything above; false if Redis refused a subscription.
pub fn subscribe(ctx: Ctx) -> bool {
    let servers = [
        (ServerEvent::Loading, on_loading as hooks::EventFn),
        (ServerEvent::RoleChanged, on_role_changed),
        (ServerEvent::SwapDb, on_swapdb),
        (ServerEvent::Flushed, on_flushed),
    ]
    .into_iter()
    .all(|(e, f)| hooks::subscribe(ctx, e, f));
    let config = hooks::subscribe_config(ctx, on_config);
    let keys = hooks::subscribe_key_events(ctx, on_key_event);
    if !hooks::register_filter(ctx, on_command) {
        // Without seeing replicas attach, always send effects.
        effects::replicas_from_now();
    }
    servers && config && keys
}
