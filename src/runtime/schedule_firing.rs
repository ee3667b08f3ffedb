//! Firing schedules (RMQ.SCHEDULE), on primaries, from the module timer: each due
//! schedule runs its push exactly as RMQ.PUSH would (same rules, counters, events and
//! wake-ups of blocked consumers) and writes its new state, in the timer step whose
//! effects Redis sends as one MULTI/EXEC, so a replica promoted later holds either both
//! or neither and never fires a planned time twice. Missed times fire once, then the
//! schedule goes on from its next future time. The index of firings (`alarm`) is rebuilt
//! from the `sched{Q}` keys after a load, a promotion, a SWAPDB or a FLUSH, and for one
//! queue when its key arrives (`events`).

use std::time::{Duration, Instant};

use crate::core::cron_schedule::Stored;
use crate::core::cron_schedule::{After, Spec};
use crate::core::names;
use crate::core::rules;
use crate::ffi::{Ctx, RStr};
use crate::runtime::delivery::{pushed, Opened};
use crate::runtime::{alarm, registry, settings, stats};
use crate::storage::schedule_keys::Schedules;

/// Firings between two looks at the clock.
const CHUNK: usize = 16;

/// Notes every schedule of queue `q` (of the selected database) with a time left.
pub fn found(ctx: Ctx, q: &[u8]) {
    let Ok(scheds) = Schedules::open(ctx, q, false) else { return };
    for (name, raw) in scheds.all() {
        if let Some(next) = Stored::decode(&raw).ok().and_then(|s| s.state.next) {
            alarm::note_firing(ctx, ctx.db(), q, &name, next);
        }
    }
}

/// Forgets the planned times of every schedule of queue `q` (of the selected database),
/// before its `sched{Q}` is deleted (RMQ.DROP): they are never fired.
pub fn forget(ctx: Ctx, q: &[u8]) {
    let Ok(scheds) = Schedules::open(ctx, q, false) else { return };
    for (name, raw) in scheds.all() {
        if let Some(next) = Stored::decode(&raw).ok().and_then(|s| s.state.next) {
            alarm::forget_firing(ctx.db(), q, &name, next);
        }
    }
}

/// A queue being fired: its schedules and the queue (None if it cannot be opened, a key
/// of another type: its firings are skipped).
struct Visit {
    db: i32,
    q: Vec<u8>,
    scheds: Schedules,
    queue: Option<Opened>,
}

/// Fires the schedules due at `now` until none is left or the step's budget is spent;
/// true if it stopped with some still due.
pub fn fire_due(ctx: Ctx, now: i64, started: Instant, budget: Duration) -> bool {
    let mut visit: Option<Visit> = None;
    let mut n = 0usize;
    loop {
        if n % CHUNK == CHUNK - 1 && started.elapsed() >= budget {
            return true;
        }
        let Some((t, (db, q, name))) = alarm::pop_firing(now) else { return false };
        n += 1;
        if !visit.as_ref().is_some_and(|v| v.db == db && v.q == q) {
            // Closes the previous queue first: its effects and wake-ups go out.
            visit = None;
            ctx.select_db(db);
            let Ok(scheds) = Schedules::open(ctx, &q, true) else { continue };
            let queue = Opened::open(ctx, RStr::from_bytes(&q), true).ok();
            visit = Some(Visit { db, q, scheds, queue });
        }
        if let Some(v) = visit.as_mut() {
            fire(ctx, v, &name, t, now);
        }
    }
}

/// Fires schedule `name` planned at `t`, if the index is right about it.
fn fire(ctx: Ctx, v: &mut Visit, name: &[u8], t: i64, now: i64) {
    let Some(mut s) = v.scheds.get(name) else { return };
    if s.state.next != Some(t) {
        // Replaced since noted: its own entry is (or now is) in the index.
        if let Some(next) = s.state.next {
            alarm::note_firing(ctx, v.db, &v.q, name, next);
        }
        return;
    }
    if push(ctx, v.queue.as_mut(), &s.spec, t, now) {
        stats::SCHEDULE_FIRED.add(1);
    } else {
        stats::SCHEDULE_SKIPPED.add(1);
    }
    match s.spec.fire(s.state, t, now) {
        After::Done => {
            v.scheds.remove(name);
            gone_if_last(ctx, &v.q, &v.scheds);
        }
        After::Goes(state) => {
            s.state = state;
            v.scheds.put(name, &s);
            if let Some(next) = state.next {
                alarm::note_firing(ctx, v.db, &v.q, name, next);
            }
        }
    }
}

/// After a schedule was deleted: with it went `sched{q}` if it was the last, and with that
/// maybe the queue's last key (the module's own deletions send no key event).
pub fn gone_if_last(ctx: Ctx, q: &[u8], scheds: &Schedules) {
    if scheds.count() == 0 {
        registry::key_gone(ctx, &RStr::from_bytes(&names::schedule_key(q)));
    }
}

/// The push of a firing; false if it failed (the queue holds another kind or another
/// type, is full, or the server is out of memory) and changed nothing.
fn push(ctx: Ctx, queue: Option<&mut Opened>, spec: &Spec, t: i64, now: i64) -> bool {
    let Some(q) = queue else { return false };
    if ctx.out_of_memory() {
        return false;
    }
    let lim = settings::limits(&**q);
    let msg = [RStr::from_bytes(&spec.message)];
    match rules::push(&mut **q, now, &lim, spec.push_mode(t), spec.group.as_deref(), &msg) {
        Ok(out) => {
            pushed(ctx, q, &out);
            true
        }
        Err(_) => false,
    }
}
