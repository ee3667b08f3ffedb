//! Replication of effects: every change a command makes is recorded as the plain Redis
//! command that redoes it with explicit scores (ZADD/ZREM/HSET/HDEL/DEL), and sent once,
//! at the end, so replicas and the AOF never read a clock. Consecutive changes of one kind
//! to one key are coalesced into one command (ZADD k s1 m1 s2 m2 ...), which keeps the
//! stream short without reordering changes to the same key.
//!
//! Effects are only built when someone can receive them: the AOF is on, or a replica is
//! or may be attached (see `needed`). Otherwise Redis would drop them anyway (it
//! propagates nothing without AOF, replicas or a replication backlog), but only after
//! RM_Replicate had looked the command up and copied its arguments: a quarter of the
//! server's work for an unbatched message.

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::core::names::KeyId;
use crate::ffi::server_callbacks::ServerInfo;
use crate::ffi::{Ctx, RStr};
use crate::storage::keys::KeyNames;

const UNKNOWN: u8 = 0;
const NEEDED: u8 = 1;
const NOT_NEEDED: u8 = 2;

/// Whether a replica is or may be attached: found out from INFO replication when
/// `UNKNOWN`, and set to `NEEDED` before anything can attach one.
static REPLICAS: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether the AOF is on: found out from the context's flags when `UNKNOWN` (`NEEDED`:
/// on), and forgotten when `appendonly` is set (`config_changed`) or after a load. Every
/// command asks: the flags cost ~150 instructions (Redis computes all of them).
static AOF: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether changes must be sent on as effects now.
pub fn needed(ctx: Ctx) -> bool {
    let aof = match AOF.load(Ordering::Relaxed) {
        UNKNOWN => {
            let on = ctx.aof_on();
            AOF.store(if on { NEEDED } else { NOT_NEEDED }, Ordering::Relaxed);
            on
        }
        known => known == NEEDED,
    };
    if aof {
        return true;
    }
    match REPLICAS.load(Ordering::Relaxed) {
        NEEDED => true,
        NOT_NEEDED => false,
        _ => {
            let n = replicas_possible(ctx);
            let _ = REPLICAS.compare_exchange(UNKNOWN, if n { NEEDED } else { NOT_NEEDED }, Ordering::Relaxed, Ordering::Relaxed);
            n
        }
    }
}

/// A replica could read what is propagated: this node is a replica itself (so it keeps a
/// backlog for when it is promoted), replicas are connected, or a replication backlog
/// exists (a replica that went away may come back and continue from it, as may one after
/// a restart that loaded the replication offset from the RDB file).
fn replicas_possible(ctx: Ctx) -> bool {
    let Some(info) = ServerInfo::get(ctx, c"replication") else { return true };
    let master = info.text(c"role").is_some_and(|r| r == b"master");
    !master || info.int(c"connected_slaves") != Some(0) || info.int(c"repl_backlog_active") != Some(0)
}

/// Sends one change of a key kept outside `RedisQueue` (schedules, a push sequence,
/// deduplication records, claims) on at once; inside a command or a timer step Redis wraps
/// it with the step's other effects in one MULTI/EXEC.
pub fn send_now(ctx: Ctx, cmd: &CStr, key: &RStr, args: &[&RStr]) {
    if needed(ctx) {
        ctx.replicate(cmd, key, args.iter().copied());
    } else {
        ctx.count_change();
    }
}

#[derive(Clone, Copy)]
enum Counting {
    /// Each queue's changes count as one change of the dataset (a command on one queue).
    Each,
    /// Inside `one_change_count`: whether a queue changed.
    Once(bool),
}

thread_local!(static COUNTING: Cell<Counting> = const { Cell::new(Counting::Each) });

/// Runs `f`, which may change many queues (RMQ.TPOP), and counts its changes that are sent
/// nowhere as one change of the dataset, as a command on one queue does: counting each
/// costs a command lookup per queue.
pub fn one_change_count<T>(ctx: Ctx, f: impl FnOnce() -> T) -> T {
    /// Counts and restores the outer mode even if `f` panics.
    struct Scope(Ctx, Counting);
    impl Drop for Scope {
        fn drop(&mut self) {
            if matches!(COUNTING.replace(self.1), Counting::Once(true)) {
                match self.1 {
                    Counting::Each => self.0.count_change(),
                    Counting::Once(_) => COUNTING.set(Counting::Once(true)),
                }
            }
        }
    }
    let _scope = Scope(ctx, COUNTING.replace(Counting::Once(false)));
    f()
}

/// After a load the backlog may have been made (or dropped), and the AOF switched on or
/// off (a replica's sync stops and restarts it): look again.
pub fn reconsider() {
    REPLICAS.store(UNKNOWN, Ordering::Relaxed);
    AOF.store(UNKNOWN, Ordering::Relaxed);
}

/// CONFIG SET changed `names`: the AOF may have been switched on or off.
pub fn config_changed(names: &[&[u8]]) {
    if names.contains(&&b"appendonly"[..]) {
        AOF.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// A role change: this node was or becomes a replica, and keeps a backlog.
pub fn replicas_from_now() {
    REPLICAS.store(NEEDED, Ordering::Relaxed);
}

struct Group {
    cmd: &'static CStr,
    key: KeyId,
    args: Vec<RStr>,
}

pub struct Effects {
    groups: Vec<Group>,
    /// Build and send them (else only note that something changed).
    send: bool,
    changed: bool,
}

impl Effects {
    pub fn new(ctx: Ctx) -> Effects {
        Effects { groups: Vec::new(), send: needed(ctx), changed: false }
    }

    /// Records one change (`args` is only built when effects are sent). It joins the
    /// latest group on the same key when that group is the same command: no later group
    /// touches the key, so order per key is kept.
    pub fn record<A: IntoIterator<Item = RStr>>(&mut self, cmd: &'static CStr, key: KeyId, args: impl FnOnce() -> A) {
        self.changed = true;
        if !self.send {
            return;
        }
        let args = args();
        if let Some(g) = self.groups.iter_mut().rev().find(|g| g.key == key) {
            if g.cmd == cmd {
                g.args.extend(args);
                return;
            }
        }
        self.groups.push(Group { cmd, key, args: args.into_iter().collect() });
    }

    pub fn is_empty(&self) -> bool {
        !self.changed
    }

    /// Sends every recorded change to replicas and the AOF (Redis wraps several in
    /// MULTI/EXEC) and forgets them.
    pub fn flush(&mut self, ctx: Ctx, names: &KeyNames) {
        if std::mem::take(&mut self.changed) && !self.send {
            // Sent nowhere, but counted as a change of the dataset, as every RM_Replicate
            // is, for the save points (once per command: see `one_change_count`).
            match COUNTING.get() {
                Counting::Each => ctx.count_change(),
                Counting::Once(_) => COUNTING.set(Counting::Once(true)),
            }
        }
        for g in self.groups.drain(..) {
            ctx.replicate(g.cmd, &names[g.key as usize], g.args.iter());
        }
    }
}
