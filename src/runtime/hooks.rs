//! Server events the module follows, and what each sets going: after a load, a promotion,
//! a SWAPDB or a FLUSH, the leases and the topic index are found again by one scan of the
//! keyspace; keys arriving by RESTORE, RENAME, MOVE or COPY bring their queue's leases and
//! waiting messages; SYNC and PSYNC (seen by a command filter) and role changes switch
//! effects on; ACL commands drop TPOP's permission verdicts.

use std::collections::BTreeSet;

use crate::core::rules;
use crate::core::store::{Set, Store};
use crate::ffi::guard::guard;
use crate::ffi::hooks::{self, scan_keys, ServerEvent, FLUSH_ENDED, LOADING_ENDED, NOW_PRIMARY};
use crate::ffi::{Ctx, RStr};
use crate::runtime::{acl, alarm, cluster, topics};
use crate::storage::keys::{self, queue_of};
use crate::storage::redis_queue::RedisQueue;
use crate::storage::{busy, effects};

/// Tells the timer about queue `q`'s leases and holds, and the topic index about its
/// waiting messages.
fn found(ctx: Ctx, q: &[u8]) {
    if let Ok(queue) = RedisQueue::open(ctx, RStr::from_bytes(q), false) {
        if let Some(next) = rules::next_work(&queue) {
            alarm::note_lease(ctx, q, next);
        }
        topics::note(ctx.db(), q, queue.len(Set::Store) + queue.len(Set::Hold) > 0);
    }
}

/// Finds every queue of every database (one keyspace scan, after a load, a promotion, a
/// SWAPDB or a FLUSH): their leases and the topic index. Primaries only (replicas neither
/// roll back nor serve TPOP).
pub fn rescan(ctx: Ctx) {
    if !ctx.is_primary() {
        return;
    }
    guard((), || {
        let original = ctx.db();
        alarm::clear_leases();
        topics::clear();
        let mut db = 0;
        while ctx.select_db(db) {
            // Queues are opened after the scan: the scan must not see keys change.
            let mut queues: BTreeSet<Vec<u8>> = BTreeSet::new();
            scan_keys(ctx, &mut |key| queues.extend(queue_of(key).map(|(q, _)| q.to_vec())));
            for q in queues {
                found(ctx, &q);
            }
            db += 1;
        }
        ctx.select_db(original);
    });
}

fn on_loading(ctx: Ctx, sub: u64) {
    if sub == LOADING_ENDED {
        keys::forget_lazy_absent();
        busy::forget_all();
        effects::reconsider();
        rescan(ctx);
    }
}

/// SWAPDB moves queues between databases: find them again. Consumers blocked on the
/// swapped keys are signalled by Redis itself and note their due times anew.
fn on_swapdb(ctx: Ctx, _sub: u64) {
    keys::forget_lazy_absent();
    busy::forget_all();
    alarm::clear_dues();
    rescan(ctx);
}

fn on_flushed(ctx: Ctx, sub: u64) {
    if sub == FLUSH_ENDED {
        busy::forget_all();
        rescan(ctx);
    }
}

fn on_role_changed(ctx: Ctx, sub: u64) {
    effects::replicas_from_now();
    cluster::forget_slots();
    // A replica's memory did not follow the effects it applied.
    busy::forget_all();
    if sub == NOW_PRIMARY {
        rescan(ctx);
    }
}

/// A key of a queue arriving by RESTORE (a cluster slot migrated here, or a restore by
/// hand), RENAME, MOVE or COPY brings leases the timer does not know yet and waiting
/// messages the topic index does not. (`Q` itself cannot be told from another key by its
/// name: it is looked at as a queue, which costs a lookup when it is not one.)
fn on_key_event(ctx: Ctx, event: &[u8], key: &RStr) {
    if event == b"new" {
        keys::key_created(key.as_ref(), ctx.db());
        return;
    }
    // Anything else done to a queue's key by a command (DEL, RENAME, MOVE, RESTORE, ...)
    // may change which of its groups are busy: learnt again from the keys.
    let k = key.as_ref();
    busy::forget(queue_of(k).map_or(k, |(q, _)| q), ctx.db());
    let arrived = matches!(event, b"restore" | b"rename_to" | b"move_to" | b"copy_to");
    if arrived && ctx.is_primary() {
        let key = key.as_ref();
        found(ctx, queue_of(key).map_or(key, |(q, _)| q));
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
    let keys = hooks::subscribe_key_events(ctx, on_key_event);
    if !hooks::register_filter(ctx, on_command) {
        // Without seeing replicas attach, always send effects.
        effects::replicas_from_now();
    }
    servers && keys
}
