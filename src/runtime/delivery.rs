//! The one place that acts on what a change did: opening a queue for a command or the
//! timer (`Opened`, which wakes blocked consumers when it closes after a change that may
//! have made a message deliverable), taking messages under a lease (POP, a served blocked
//! POP) and accounting for rollbacks.

use std::ops::{Deref, DerefMut};

use crate::core::error::Result;
use crate::core::rules::{self, Popped, SweepOutcome};
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::{alarm, events, ratelimit, settings, stats, waiters};
use crate::storage::redis_queue::RedisQueue;

/// A queue opened by a command or the timer. When it closes, consumers blocked on it are
/// signalled if a change may have made a message deliverable, and the timer is told when
/// its next message comes due; then its effects are replicated (`RedisQueue`'s drop).
pub struct Opened {
    ctx: Ctx,
    q: RedisQueue,
}

impl Opened {
    pub fn open(ctx: Ctx, name: RStr, write: bool) -> Result<Opened> {
        Ok(Opened { ctx, q: RedisQueue::open(ctx, name, write)? })
    }
}

impl Deref for Opened {
    type Target = RedisQueue;
    fn deref(&self) -> &RedisQueue {
        &self.q
    }
}

impl DerefMut for Opened {
    fn deref_mut(&mut self) -> &mut RedisQueue {
        &mut self.q
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if self.q.take_wake() {
            self.ctx.signal_ready(self.q.name());
            waiters::schedule_wakeup(self.ctx, &self.q);
        }
    }
}

/// Takes up to `count` deliverable messages (fewer if the queue's rate limit says so)
/// under a lease of `lease` ms, and schedules the lease's rollback.
pub fn take(ctx: Ctx, q: &mut RedisQueue, now: i64, count: usize, lease: i64) -> Vec<(RStr, u32)> {
    let lim = settings::limits(q);
    let allowed = ratelimit::allowance(ctx.db(), q.name().as_ref(), &lim, now, count);
    let deadline = now + lease;
    let popped = if allowed > 0 { rules::pop(q, now, allowed, deadline) } else { Popped { got: Vec::new(), group_waits: 0 } };
    stats::GROUP_WAITS.add(popped.group_waits);
    let got = popped.got;
    ratelimit::consumed(ctx.db(), q.name().as_ref(), &lim, got.len());
    if allowed < count && got.len() == allowed && rules::has_deliverable(q, now) {
        stats::RATE_LIMITED.add(1);
    }
    if !got.is_empty() {
        stats::POPPED.add(got.len() as u64);
        events::notify(ctx, q.name(), events::POPPED, true);
        alarm::note_lease(ctx, q.name().as_ref(), deadline);
    }
    got
}

/// Replies with popped messages: an array of [message, deliveries].
pub fn reply_popped(ctx: Ctx, got: &[(RStr, u32)]) {
    reply::array(ctx, got.len());
    for (m, deliveries) in got {
        reply::array(ctx, 2);
        reply::string(ctx, m);
        reply::int(ctx, *deliveries as i64);
    }
}

/// Counts and announces lease rollbacks (RMQ.SWEEP and the timer).
pub fn swept(ctx: Ctx, q: &RedisQueue, out: &SweepOutcome) {
    stats::EXPIRED.add(out.expired);
    stats::DEAD.add(out.dead);
    events::notify(ctx, q.name(), events::EXPIRED, out.expired > 0);
    events::notify(ctx, q.name(), events::REQUEUED, out.expired > out.dead);
    events::notify(ctx, q.name(), events::DEAD, out.dead > 0);
}
