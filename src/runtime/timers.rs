//! What the module timer does when it fires (`alarm` arms it): wake consumers blocked on a
//! queue whose next message has come due, fire due schedules (`schedules`), and roll back
//! expired leases and release ended retry holds of every queue in small time-bounded steps (about half a millisecond, the clock checked every 16
//! rollbacks), coming back while it is behind, like Redis's active expire cycle. It runs
//! on primaries only; after a load or a promotion the leases are found again by one scan
//! of the keyspace (`derived::rescan`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::core::rules;
use crate::ffi::context::{now_ms, writes_paused};
use crate::ffi::guard::caught;
use crate::ffi::timer::{self, OneShotFn};
use crate::ffi::{Ctx, RStr};
use crate::runtime::delivery::{swept, Opened};
use crate::runtime::{alarm, blocking, schedule_firing, settings, stats};
use crate::storage::journal_stream::{as_author, Author};

/// Work per timer step before yielding to clients: with the replication of its effects
/// and the hop through the event loop a step then keeps a client waiting under 1 ms
/// (measured by `make bench-timers`, see bench/results/bench_timers.md).
const STEP_BUDGET: Duration = Duration::from_micros(500);
/// Leases rolled back between two looks at the clock.
const CHUNK: usize = 16;

/// Registers the timer's callback (at load).
pub fn init(ctx: Ctx) {
    alarm::init(tick);
    timer::init_detached(ctx);
}

/// When the timer should run next.
enum Next {
    /// As soon as clients have been served: it is behind.
    Now,
    At(i64),
}

/// Runs the next step as soon as the clients that came in meanwhile have been answered.
/// A timer armed inside its own callback fires no sooner than 1 ms later (Redis
/// reschedules its module-timer event at least 1 ms ahead), which left the core idle half
/// the time while a backlog was rolled back. Instead the next step hops through two passes
/// of the event loop, each started by a one-shot event (run in a pass's file-event phase,
/// along with client input) that arms a 0 ms timer (run in the same pass's time-event
/// phase, where a one-shot queued is left for the next pass):
/// - pass 1: clients' commands run, then `hop` only queues the next one-shot; their
///   replies are written before the loop sleeps again (Redis writes replies only then,
///   so a step in this pass would hold them back);
/// - pass 2: the step runs.
fn continue_soon(ctx: Ctx) {
    // One hop chain at a time: a step run meanwhile by a timer armed for another reason
    // (a short lease, a due time) leaves the continuation to the chain under way.
    if !HOPPING.swap(true, Ordering::Relaxed) {
        queue_or_arm(ctx, arm_hop);
    }
}

/// A hop chain is under way (see `continue_soon`).
static HOPPING: AtomicBool = AtomicBool::new(false);

/// The chain's next hop; without one-shot events, the plain timer (and the chain ends).
fn queue_or_arm(ctx: Ctx, f: OneShotFn) {
    if !timer::one_shot(f) {
        HOPPING.store(false, Ordering::Relaxed);
        alarm::arm(ctx, now_ms());
    }
}

fn arm_hop() {
    match timer::detached() {
        Some(ctx) => {
            timer::create(ctx, 0, hop);
        }
        None => HOPPING.store(false, Ordering::Relaxed),
    }
}

fn hop(ctx: Ctx) {
    queue_or_arm(ctx, arm_step);
}

fn arm_step() {
    HOPPING.store(false, Ordering::Relaxed);
    if let Some(ctx) = timer::detached() {
        alarm::arm(ctx, now_ms());
    }
}

fn tick(ctx: Ctx) {
    alarm::fired();
    let outcome = caught(|| {
        // Blocked TPOPs whose time ran out get nil, on any role (it changes nothing).
        blocking::expire_topics(now_ms());
        if !ctx.is_primary() {
            // A replica changes nothing; a promotion rescans and re-arms.
            return blocking::next_deadline().map(Next::At);
        }
        if writes_paused() {
            return Some(Next::At(now_ms() + alarm::PAUSE_RETRY_MS));
        }
        // Its events are the server's own (the journal's `by`).
        as_author(Author::Timer, || step(ctx))
    });
    match outcome {
        Some(Some(Next::Now)) => continue_soon(ctx),
        Some(Some(Next::At(at))) => alarm::arm(ctx, at),
        Some(None) => {}
        // Keep going after a caught panic rather than leave leases unswept.
        None => alarm::arm(ctx, now_ms() + 100),
    }
}

/// One timer step: wake blocked consumers whose message came due, fire due schedules,
/// then roll back expired leases, until the budget runs out. Returns when to come back.
fn step(ctx: Ctx) -> Option<Next> {
    let started = Instant::now();
    let now = now_ms();
    let due: Vec<_> = std::iter::from_fn(|| alarm::pop_due(now)).collect();
    for (db, q) in due {
        ctx.select_db(db);
        // Closing it signals the key and, from here rather than from the consumers'
        // callbacks (too late for this sleep), schedules the queue's next due time.
        // Redis serves clients blocked on a key only if the key exists: a priority message
        // whose retry delay ended goes back to `Q` first.
        if let Ok(mut queue) = Opened::open(ctx, RStr::from_bytes(&q), true) {
            rules::release_holds(&mut *queue, now, CHUNK);
            queue.wake_consumers();
            queue.close();
        }
    }
    let mut behind = schedule_firing::fire_due(ctx, now, started, STEP_BUDGET);
    while !behind {
        let Some((db, q)) = alarm::pop_lease(now) else { break };
        ctx.select_db(db);
        let Ok(mut queue) = Opened::open(ctx, RStr::from_bytes(&q), true) else { continue };
        let lim = settings::limits(&*queue);
        loop {
            let out = rules::sweep(&mut *queue, now, &lim, CHUNK);
            swept(ctx, &queue, &out);
            let released = rules::release_holds(&mut *queue, now, CHUNK);
            if out.expired < CHUNK as u64 && released < CHUNK {
                break;
            }
            if started.elapsed() >= STEP_BUDGET {
                behind = true;
                break;
            }
        }
        if let Some(next) = rules::next_work(&*queue) {
            alarm::note_lease_in(ctx, db, &q, next);
        }
        queue.close(); // replicates this queue's rollbacks and wakes its consumers
        behind |= started.elapsed() >= STEP_BUDGET;
    }
    // TPOP consumers blocked by hand (cluster mode) whose topic changed.
    blocking::serve_topics(ctx);
    stats::SWEEP_RUNS.add(1);
    stats::SWEEP_MAX_US.max(started.elapsed().as_micros() as u64);
    if behind {
        return Some(Next::Now);
    }
    [alarm::next(), blocking::next_deadline()].into_iter().flatten().min().map(Next::At)
}
