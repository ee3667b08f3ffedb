//! The one place that acts on what a change did: opening a queue for a command or the
//! timer (`Opened`, which wakes blocked consumers when it closes after a change that may
//! have made a message deliverable, and keeps the topic index), taking messages under a
//! lease (POP, TPOP, served blocked pops) and accounting for rollbacks.

use std::ops::{Deref, DerefMut};

use crate::core::error::Result;
use crate::core::route::queue_name;
use crate::core::rules::{self, Popped, SweepOutcome};
use crate::core::store::{Set, Store};
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::{alarm, cluster, events, ratelimit, settings, stats, topics, waiters};
use crate::storage::effects;
use crate::storage::redis_queue::RedisQueue;

/// A queue opened by a command or the timer. When it closes, consumers blocked on it are
/// signalled if a change may have made a message deliverable, the timer is told when its
/// next message comes due, and the topic index learns whether it still has waiting
/// messages; then its effects are replicated (`RedisQueue`'s drop).
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
            waiters::topic_changed(self.ctx, self.q.name().as_ref());
            waiters::schedule_wakeup(self.ctx, &self.q);
        }
        if self.q.waiting_changed() {
            topics::note(self.ctx.db(), self.q.name().as_ref(), self.q.len(Set::Store) + self.q.len(Set::Hold) > 0);
        }
        if self.q.holds_added() {
            // The timer releases holds as they end (bounded steps), like it rolls back leases.
            if let Some((_, end)) = self.q.first(Set::Hold, false) {
                alarm::note_lease(self.ctx, self.q.name().as_ref(), end as i64);
            }
        }
    }
}

/// Takes up to `count` deliverable messages (fewer if the queue's rate limit says so)
/// under a lease of `lease` ms; see `announce`.
/// Also says whether the rate limit held back a message the pop would have taken (the
/// caller counts `rate_limited` if it delivered fewer than asked).
fn take_quiet(ctx: Ctx, q: &mut RedisQueue, now: i64, count: usize, lease: i64) -> (Vec<(RStr, u32)>, bool) {
    let lim = settings::limits(q);
    let allowed = ratelimit::allowance(ctx.db(), q.name().as_ref(), &lim, now, count);
    let popped =
        if allowed > 0 { rules::pop(q, now, allowed, now + lease) } else { Popped { got: Vec::new(), group_waits: 0, cut: false } };
    stats::GROUP_WAITS.add(popped.group_waits);
    if popped.cut {
        // It stopped at its parking bound (old data: a backlog of a busy group in `Q`):
        // consumers blocked on the queue look again at the timer's next step, each look
        // parking the next few hundred, so the backlog is set aside in bounded steps.
        alarm::note_due(ctx, q.name().as_ref(), now);
    }
    ratelimit::consumed(ctx.db(), q.name().as_ref(), &lim, popped.got.len());
    let limited = allowed < count && popped.got.len() == allowed && rules::has_deliverable(q, now);
    (popped.got, limited)
}

/// Counts and announces `n` deliveries from `q` and schedules their leases' rollback.
fn announce(ctx: Ctx, q: &RedisQueue, n: usize, deadline: i64) {
    if n > 0 {
        stats::POPPED.add(n as u64);
        events::notify(ctx, q.name(), events::POPPED, true);
        alarm::note_lease(ctx, q.name().as_ref(), deadline);
    }
}

/// RMQ.POP: takes up to `count` deliverable messages under a lease of `lease` ms.
pub fn take(ctx: Ctx, q: &mut RedisQueue, now: i64, count: usize, lease: i64) -> Vec<(RStr, u32)> {
    let (got, limited) = take_quiet(ctx, q, now, count, lease);
    stats::RATE_LIMITED.add(limited as u64);
    announce(ctx, q, got.len(), now + lease);
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

/// One delivery of RMQ.TPOP: its queue, the message and its delivery count.
pub type TopicDelivery = (RStr, RStr, u32);

/// RMQ.TPOP: up to `count` messages from the queues of `topic` that have waiting messages
/// on this node (and whose slot it serves), round-robin: one from each queue in turn,
/// starting where the previous TPOP of the topic did not. `lease` None: each queue's own
/// lease. The first turn goes queue by queue (a TPOP of one message opens one queue);
/// after it, while what is left makes whole turns, each queue that may give more is asked
/// at once for as many turns as there are; a last partial turn goes queue by queue, a
/// queue that runs dry passing its turn to the next. That takes the same messages as turn
/// after turn in far fewer pops; the reply lists them turn by turn.
pub fn take_topic(ctx: Ctx, topic: &[u8], slots: u32, count: usize, lease: Option<i64>, now: i64) -> Vec<TopicDelivery> {
    effects::one_change_count(ctx, || take_topic_counted(ctx, topic, slots, count, lease, now))
}

fn take_topic_counted(ctx: Ctx, topic: &[u8], slots: u32, count: usize, lease: Option<i64>, now: i64) -> Vec<TopicDelivery> {
    /// A queue that gave a message.
    struct Giving {
        q: Opened,
        lease: i64,
        got: Vec<(RStr, u32)>,
        /// Whether it may give more.
        more: bool,
    }
    let mut giving: Vec<Giving> = Vec::new();
    let mut taken = 0;
    // A queue's rate limit held a message back (counted only if the TPOP falls short).
    let mut rate_limited = false;
    for slot in topics::rotation(ctx.db(), topic, slots) {
        if taken >= count {
            break;
        }
        let name = queue_name(topic, slot);
        if !cluster::serves(ctx, &name) {
            continue;
        }
        let Ok(mut q) = Opened::open(ctx, RStr::from_bytes(&name), true) else { continue };
        let lease = lease.unwrap_or_else(|| settings::limits(&*q).lease_ms);
        let (got, limited) = take_quiet(ctx, &mut q, now, 1, lease);
        rate_limited |= limited;
        if got.is_empty() {
            if q.len(Set::Store) + q.len(Set::Hold) == 0 {
                // An entry that outlived its queue (deleted by hand, say).
                topics::note(ctx.db(), &name, false);
            }
            continue;
        }
        taken += 1;
        giving.push(Giving { q, lease, got, more: true });
    }
    while taken < count {
        let open: Vec<usize> = (0..giving.len()).filter(|&i| giving[i].more).collect();
        if open.is_empty() {
            break;
        }
        // Whole turns for every open queue, else one more message each until done.
        let want = ((count - taken) / open.len()).max(1);
        for &i in &open {
            if taken >= count {
                break;
            }
            let g = &mut giving[i];
            let (more_got, limited) = take_quiet(ctx, &mut g.q, now, want, g.lease);
            rate_limited |= limited;
            g.more = more_got.len() == want;
            taken += more_got.len();
            g.got.extend(more_got);
        }
    }
    for g in &giving {
        announce(ctx, &g.q, g.got.len(), now + g.lease);
    }
    let mut out: Vec<TopicDelivery> = Vec::with_capacity(taken);
    // Turn by turn: one from each queue that has one left (moved out from the back).
    giving.iter_mut().for_each(|g| g.got.reverse());
    loop {
        let before = out.len();
        for g in &mut giving {
            if let Some((m, d)) = g.got.pop() {
                out.push((g.q.name().clone(), m, d));
            }
        }
        if out.len() == before {
            break;
        }
    }
    stats::RATE_LIMITED.add((rate_limited && taken < count) as u64);
    out
}

/// Replies with TPOP deliveries: an array of [queue, message, deliveries].
pub fn reply_topic(ctx: Ctx, got: &[TopicDelivery]) {
    reply::array(ctx, got.len());
    for (q, m, deliveries) in got {
        reply::array(ctx, 3);
        reply::string(ctx, q);
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
