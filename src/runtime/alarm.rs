//! The wake-up seam between whatever needs a later look (a lease deadline, a due time a
//! blocked consumer waits for, a schedule's next firing) and the timer that takes it: two
//! schedules of queues by time, the index of firings, and the one module timer armed at
//! the earliest of them. What the timer does when it fires is `timers`' business (it
//! registers its callback here at load).

use std::sync::{LazyLock, Mutex, MutexGuard, OnceLock};

use crate::core::due_index::{QueueId, Schedule};
use crate::core::firings::{Firings, ScheduleId};
use crate::ffi::context::now_ms;
use crate::ffi::timer::{self, TimerFn, TimerId};
use crate::ffi::Ctx;

/// How soon to look again while clients are paused (CLIENT PAUSE WRITE, FAILOVER).
pub const PAUSE_RETRY_MS: i64 = 10;

#[derive(Default)]
struct Alarm {
    /// Queues by (a lower bound of) their earliest lease deadline.
    leases: Schedule,
    /// Queues with blocked consumers by the due time of their next waiting message.
    dues: Schedule,
    /// Schedules (RMQ.SCHEDULE) by their next planned time.
    firings: Firings,
    /// The armed module timer and when it fires.
    armed: Option<(TimerId, i64)>,
}

static ALARM: LazyLock<Mutex<Alarm>> = LazyLock::new(Mutex::default);
static CALLBACK: OnceLock<TimerFn> = OnceLock::new();

fn alarm() -> MutexGuard<'static, Alarm> {
    // A panic elsewhere must not disable the timers for good.
    ALARM.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets what the timer runs (once, at load).
pub fn init(f: TimerFn) {
    let _ = CALLBACK.set(f);
}

/// Notes a lease deadline of a queue of the selected db (after a pop or an extend).
pub fn note_lease(ctx: Ctx, queue: &[u8], deadline: i64) {
    note_lease_in(ctx, ctx.db(), queue, deadline);
}

/// Notes a lease deadline of a queue of db `db`.
pub fn note_lease_in(ctx: Ctx, db: i32, queue: &[u8], deadline: i64) {
    let earliest = alarm().leases.note(db, queue, deadline);
    if earliest {
        arm(ctx, deadline);
    }
}

/// Notes when a queue with blocked consumers next has a message coming due.
pub fn note_due(ctx: Ctx, queue: &[u8], due: i64) {
    let earliest = alarm().dues.note(ctx.db(), queue, due);
    if earliest {
        arm(ctx, due);
    }
}

/// Notes the next planned time of schedule `name` of a queue of db `db`.
pub fn note_firing(ctx: Ctx, db: i32, queue: &[u8], name: &[u8], t: i64) {
    let earliest = alarm().firings.note(db, queue, name, t);
    if earliest {
        arm(ctx, t);
    }
}

/// Forgets a schedule's planned time (replaced or deleted).
pub fn forget_firing(db: i32, queue: &[u8], name: &[u8], t: i64) {
    alarm().firings.forget(db, queue, name, t);
}

/// Takes the next schedule whose planned time is <= now.
pub fn pop_firing(now: i64) -> Option<(i64, ScheduleId)> {
    alarm().firings.pop_due(now)
}

/// Forgets every schedule (before a rescan, or on becoming a replica).
pub fn clear_firings() {
    alarm().firings.clear();
}

/// How many schedules this server fires.
pub fn firings() -> usize {
    alarm().firings.len()
}

/// Makes sure the timer fires no later than `at`.
pub fn arm(ctx: Ctx, at: i64) {
    let Some(&f) = CALLBACK.get() else { return };
    let mut a = alarm();
    if let Some((id, fires)) = a.armed {
        if fires <= at {
            return;
        }
        timer::stop(ctx, id);
    }
    let id = timer::create(ctx, (at - now_ms()).max(0), f);
    a.armed = Some((id, at));
}

/// Fires the timer at once (the test clock moved: what it armed for may be due now).
pub fn fire_now(ctx: Ctx) {
    let Some(&f) = CALLBACK.get() else { return };
    let mut a = alarm();
    if let Some((id, _)) = a.armed.take() {
        timer::stop(ctx, id);
    }
    a.armed = Some((timer::create(ctx, 0, f), now_ms()));
}

/// The timer fired: it is no longer armed.
pub fn fired() {
    alarm().armed = None;
}

/// Takes the next queue whose lease deadline is <= now.
pub fn pop_lease(now: i64) -> Option<QueueId> {
    alarm().leases.pop_due(now)
}

/// Takes the next queue whose due time is <= now.
pub fn pop_due(now: i64) -> Option<QueueId> {
    alarm().dues.pop_due(now)
}

/// The earliest time anything is noted for.
pub fn next() -> Option<i64> {
    let a = alarm();
    [a.leases.next(), a.dues.next(), a.firings.next()].into_iter().flatten().min()
}

/// Forgets queue `queue` of db `db`'s lease entry: it has no lease nor hold left.
pub fn forget_lease(db: i32, queue: &[u8]) {
    alarm().leases.forget(db, queue);
}

/// Forgets every noted lease (before a rescan finds them all again).
pub fn clear_leases() {
    alarm().leases.clear();
}

/// Forgets every noted due time (SWAPDB: blocked consumers note theirs anew).
pub fn clear_dues() {
    alarm().dues.clear();
}
