//! Server events the module follows, and what each sets going: after a load, a promotion,
//! a SWAPDB or a FLUSH, the leases, the schedules and the topic index are found again by one
//! scan of the keyspace (and the queue registry by another, on replicas too); tagged keys
//! written, arriving, deleted, expired or evicted keep the queue registry; keys arriving by
//! RESTORE, RENAME, MOVE or COPY bring their queue's leases, schedules and waiting
//! messages; sorted-set writes by other commands (ZADD ...) to a queue's keys are its own
//! (the topic index learns of them, its blocked consumers are woken); a queue's `Q`
//! deleted by hand takes its other keys with it when nothing else of it is kept
//! (`abandoned`); a hash command naming a queue's `meta{Q}` (seen by the command filter)
//! or any event on it drops its header known in memory (`headers`); SYNC and PSYNC (seen
//! by the command filter) and role changes switch effects on, as CONFIG SET of
//! `appendonly` may; CONFIG SET of the eviction policy re-checks its warning; ACL
//! commands drop TPOP's permission verdicts. Which events these are, and why no others:
//! docs/EVENTS.md. What each server event forgets and rebuilds: `derived`.

use std::sync::{Mutex, MutexGuard};

use crate::core::names::{is_queue_name, owner, queue_of, KeyId};
use crate::core::route;
use crate::ffi::key::Key;
use crate::ffi::server_callbacks::{self, EventName, Filtered, ServerEvent, FLUSH_ENDED, LOADING_ENDED, NOW_PRIMARY};
use crate::ffi::{timer, Ctx, RStr};
use crate::runtime::delivery::Opened;
use crate::runtime::derived::{found, invalidate, Scope, Why};
use crate::runtime::{cluster_slots, eviction, registry, schedule_firing, topics, tpop_acl, waiters};
use crate::storage::claims::Claims;
use crate::storage::keys;
use crate::storage::ledger_keys;
use crate::storage::redis_queue::RedisQueue;
use crate::storage::schedule_keys as sched_keys;
use crate::storage::{effects, headers};

/// Another command (ZADD, ZREM, ZUNIONSTORE ...) wrote sorted set `name`, of queue `q`
/// (`tagged`: as which of its tagged keys): if it is a queue's, the queue's own rules
/// apply to what it holds now. Members added to `Q` or `hold{Q}` make it a busy queue of
/// its topic (an entry left by a removal is dropped by the next TPOP that finds the queue
/// empty), and any change may make a message deliverable (a ZREM from `prepare{Q}` frees
/// its content).
fn zset_written(ctx: Ctx, name: &[u8], q: &[u8], tagged: Option<KeyId>) {
    // Most sorted sets are no queue's: their names settle it before anything is looked up.
    let slot = route::split(q).is_some();
    if slot || waiters::anyone_blocked() {
        queue_zset_written(ctx, name, q, tagged, slot);
    }
}

/// `zset_written` for a name that may be a queue's (`slot`: a topic's). Apart, so that the
/// usual write (no queue's) pays no more than the names' check (the keyspace callback is
/// inside every ZADD on the server).
#[inline(never)]
fn queue_zset_written(ctx: Ctx, name: &[u8], q: &[u8], tagged: Option<KeyId>, slot: bool) {
    if !(slot || waiters::has_waiters(ctx.db(), q)) || !ctx.is_primary() {
        return;
    }
    let waiting_set = matches!(tagged, None | Some(KeyId::Hold));
    if slot && waiting_set && Key::exists(ctx, &RStr::from_bytes(name)).unwrap_or(true) {
        topics::note(ctx.db(), q, true);
    }
    if waiters::has_waiters(ctx.db(), q) {
        if let Ok(queue) = RedisQueue::open(ctx, RStr::from_bytes(q), false) {
            waiters::possibly_deliverable(ctx, &queue);
        }
    }
}

fn on_loading(ctx: Ctx, sub: u64) {
    if sub == LOADING_ENDED {
        effects::reconsider();
        invalidate(ctx, Scope::All(Why::Loaded));
    }
}

/// SWAPDB moves queues between databases: find them again. Consumers blocked on the
/// swapped keys are signalled by Redis itself and note their due times anew.
fn on_swapdb(ctx: Ctx, _sub: u64) {
    invalidate(ctx, Scope::All(Why::Swapped));
}

fn on_flushed(ctx: Ctx, sub: u64) {
    if sub == FLUSH_ENDED {
        invalidate(ctx, Scope::All(Why::Flushed));
    }
}

fn on_role_changed(ctx: Ctx, sub: u64) {
    effects::replicas_from_now();
    // A replica's memory did not follow the effects it applied.
    invalidate(ctx, Scope::All(if sub == NOW_PRIMARY { Why::Promoted } else { Why::Demoted }));
}

/// A keyspace event (`server_callbacks::subscribe_key_events`: generic, sorted-set, expiry and
/// eviction events, not creations nor other types' writes) on key `k`.
fn on_key_event(ctx: Ctx, event: &EventName, k: &[u8]) {
    let zset = event.is_zset();
    let tagged = owner(k);
    if zset && tagged.is_none() {
        // The usual event: a sorted set's write, settled by its name.
        return zset_written(ctx, k, k, None);
    }
    key_event(ctx, event, k, zset, tagged);
}

/// `on_key_event` for any other event, apart from the usual one's few instructions.
#[inline(never)]
fn key_event(ctx: Ctx, event: &EventName, k: &[u8], zset: bool, tagged: Option<&[u8]>) {
    let event = event.bytes();
    let gone = matches!(event, b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from");
    let arrived = matches!(event, b"restore" | b"rename_to" | b"move_to" | b"copy_to");
    let Some(q) = tagged else {
        // Untagged: only a queue's `Q` matters, and its name cannot tell it from another
        // sorted set's; each case looks no further than it must.
        if matches!(event, b"del" | b"expired" | b"evicted") {
            q_deleted(ctx, k);
        } else if arrived && ctx.is_primary() && is_queue_name(k) {
            // Its waiting messages (a lookup when it is no queue).
            found(ctx, k);
        }
        return;
    };
    let (db, id) = (ctx.db(), queue_of(k).map(|(_, id)| id));
    invalidate(ctx, Scope::Queue { q, db, key: id });
    if gone {
        registry::key_gone(ctx, &RStr::from_bytes(k));
        return;
    }
    if zset || arrived {
        // Perhaps made by it: no longer known absent, and its queue is listed.
        keys::written(k, db);
        registry::key_created(ctx, k);
    }
    if zset {
        zset_written(ctx, k, q, id);
    } else if arrived && ctx.is_primary() {
        // Leases, holds, schedules and waiting messages the timer and the topic index do
        // not know yet.
        match id {
            Some(_) => found(ctx, q),
            None => schedule_firing::found(ctx, q),
        }
    }
}

/// Queues whose `Q` was deleted by hand, by database, for `abandoned`.
static DELETED: Mutex<Vec<(i32, Vec<u8>)>> = Mutex::new(Vec::new());

/// Key `k`, untagged, was deleted, expired or evicted: if it was a listed queue's `Q`,
/// `abandoned` looks at the queue once the command (or the expiry) is over (a keyspace
/// event is no place to write keys). A replica waits for its primary's deletions, and a
/// load applies deletions already settled: an AOF's `DEL Q` is the module's own (a queue
/// that emptied keeps its push sequence and deduplication windows) or one whose
/// abandonment the AOF holds too.
fn q_deleted(ctx: Ctx, k: &[u8]) {
    if !ctx.is_primary() || ctx.loading() || !registry::listed(ctx.db(), k) {
        return;
    }
    let mut deleted = DELETED.lock().unwrap_or_else(|e| e.into_inner());
    if deleted.is_empty() {
        timer::create(ctx, 0, abandoned);
    }
    deleted.push((ctx.db(), k.to_vec()));
}

/// the contract (RMQ.QUEUES): a queue whose `Q` was deleted by hand, with nothing in flight,
/// dead or claimed and no policy or schedule, loses its other keys too (its push sequence
/// and deduplication records included), and so its listing (unless
/// it was pushed to again meanwhile). Not while its slot migrates away: MIGRATE deletes each
/// key here as it leaves, and the keys still to go (records, held-back messages) must go
/// with the rest, not be dropped.
fn abandoned(ctx: Ctx) {
    let deleted = std::mem::take(&mut *DELETED.lock().unwrap_or_else(|e| e.into_inner()));
    let original = ctx.db();
    for (db, q) in deleted {
        if !ctx.is_primary() || !ctx.select_db(db) {
            continue;
        }
        let scheduled = sched_keys::Schedules::open(ctx, &q, false).map_or(true, |s| s.count() > 0);
        // Claimed dead messages are dead ones on their way elsewhere.
        let moving = Claims::open(ctx, &q).map_or(true, |c| !c.is_empty());
        if !scheduled && !moving && !cluster_slots::migrating_away(ctx, &q) {
            let abandoned = Opened::open(ctx, RStr::from_bytes(&q), true).is_ok_and(|mut queue| queue.abandon());
            if abandoned {
                for name in ledger_keys::delete(ctx, &q) {
                    registry::key_gone(ctx, &name);
                }
            }
        }
    }
    ctx.select_db(original);
}

/// Sees each command before it runs (every command on the server: its name's length, first
/// and last letters and the first key's last byte settle nearly all at once): SYNC and
/// PSYNC, so propagation is on before a replica's initial snapshot is taken and its backlog
/// begins; commands that may change ACL rules or a client's user; CLUSTER commands, which
/// may change the slots this node serves; and commands whose first key is a queue's tagged
/// key (HSET meta{Q} or SET dead{Q} by hand, in a script, or a primary's effects on a
/// replica), whose keyspace events the module does not follow (`named_by_hand`). No server
/// or keyspace event tells of these (docs/EVENTS.md).
fn on_command(cmd: &Filtered) {
    if let Some(name) = cmd.arg(0).filter(|n| may_be_watched(n)) {
        watched(name);
    }
    if let Some(key) = cmd.arg(1).filter(|k| k.last() == Some(&b'}')) {
        named_by_hand(key);
    }
}

/// Whether command `name` may be one `watched` acts on (ACL, AUTH, EXEC, SYNC, HELLO,
/// PSYNC, RESET, CLUSTER), by its length and its first and last letters: SET, GET, SADD
/// and nearly every other command stop here, before any comparison.
fn may_be_watched(name: &[u8]) -> bool {
    let (Some(first), Some(last)) = (name.first(), name.last()) else { return false };
    matches!(
        (name.len(), first | 0x20, last | 0x20),
        (3, b'a', b'l') | (4, b'a', b'h') | (4, b'e' | b's', b'c') | (5, b'h', b'o') | (5, b'p', b'c') | (5, b'r', b't') | (7, b'c', b'r')
    )
}

fn watched(name: &[u8]) {
    if name.eq_ignore_ascii_case(b"sync") || name.eq_ignore_ascii_case(b"psync") {
        effects::replicas_from_now();
    } else if name.eq_ignore_ascii_case(b"cluster") {
        cluster_slots::forget_slots();
    } else if name.eq_ignore_ascii_case(b"exec") {
        named().made_again();
    }
    tpop_acl::rules_may_change(name);
}

/// A command is about to write (perhaps make) tagged key `key`: its queue may be new to the
/// registry (`registry::noted_by_hand`), and what the name cache knows of the key (absent,
/// converted, the header of a `meta{Q}`) no longer holds; again at EXEC, in case it was
/// queued in a transaction (a command of the queue may run before it).
fn named_by_hand(key: &[u8]) {
    let Some(q) = owner(key) else { return };
    registry::noted_by_hand(q);
    if let Some((_, id)) = queue_of(key) {
        keys::made_anywhere(q, id);
        named().note(q, id);
    }
}

/// The tagged keys commands named since the last EXEC (they may be queued in one; a
/// replica's primary sends most of its effects so), or `All` past a few.
enum Named {
    Keys(Vec<(Vec<u8>, KeyId)>),
    All,
}

static NAMED: Mutex<Named> = Mutex::new(Named::Keys(Vec::new()));

/// More keys than this named between two EXECs: EXEC forgets what is known of every key.
const NAMED_KEPT: usize = 64;

fn named() -> MutexGuard<'static, Named> {
    NAMED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Named {
    fn note(&mut self, q: &[u8], id: KeyId) {
        if let Named::Keys(ks) = self {
            if ks.len() == NAMED_KEPT {
                *self = Named::All;
            } else if ks.last().is_none_or(|(lq, lid)| lq != q || *lid != id) {
                ks.push((q.to_vec(), id));
            }
        }
    }

    fn made_again(&mut self) {
        match std::mem::replace(self, Named::Keys(Vec::new())) {
            Named::Keys(ks) => ks.iter().for_each(|(q, id)| keys::made_anywhere(q, *id)),
            Named::All => {
                keys::forget_arrived();
                headers::forget_all();
            }
        }
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
        (ServerEvent::Loading, on_loading as server_callbacks::EventFn),
        (ServerEvent::RoleChanged, on_role_changed),
        (ServerEvent::SwapDb, on_swapdb),
        (ServerEvent::Flushed, on_flushed),
    ]
    .into_iter()
    .all(|(e, f)| server_callbacks::subscribe(ctx, e, f));
    let config = server_callbacks::subscribe_config(ctx, on_config);
    let keys = server_callbacks::subscribe_key_events(ctx, on_key_event);
    if !server_callbacks::register_filter(ctx, on_command) {
        // Without seeing replicas attach, always send effects.
        effects::replicas_from_now();
    }
    servers && config && keys
}

#[cfg(test)]
mod tests {
    use super::may_be_watched;

    #[test]
    fn the_filter_lets_through_every_command_it_acts_on_in_any_case() {
        for name in ["acl", "auth", "exec", "sync", "hello", "psync", "reset", "cluster"] {
            for spelt in [name.to_string(), name.to_uppercase(), name[..1].to_uppercase() + &name[1..]] {
                assert!(may_be_watched(spelt.as_bytes()), "{spelt}");
            }
        }
    }

    #[test]
    fn the_filter_stops_other_commands_at_the_name() {
        for name in ["set", "GET", "sadd", "SREM", "incr", "hset", "lpush", "zadd", "EVAL", "echo", "", "a", "rmq.push", "client", "config"]
        {
            assert!(!may_be_watched(name.as_bytes()), "{name}");
        }
    }
}
