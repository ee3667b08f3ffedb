//! The one place that acts on what a change did: opening a queue for a command or the
//! timer (`Opened`, which wakes blocked consumers when it closes after a change that may
//! have made a message deliverable, and keeps the topic index), taking messages under a
//! lease (POP, served blocked pops; TPOP's turns are in `topic_pop`) and accounting for
//! rollbacks.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use crate::core::error::Result;
use crate::core::queue_store::{Set, Store, Waiting};
use crate::core::rules::{self, PushOutcome, SweepOutcome};
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::queue_stats::{self, Stat};
use crate::runtime::{alarm, events, ratelimit, registry, settings, stats, topics, waiters};
use crate::storage::redis_queue::RedisQueue;
use crate::storage::{busy, keys};

/// A queue opened by a command or the timer. When it closes (`close`, or dropped on an
/// early return), consumers blocked on it are signalled if a change may have made a
/// message deliverable, the timer is told when its next message comes due, and the topic
/// index learns whether it still has waiting messages; then its effects are replicated
/// (`RedisQueue`'s drop).
pub struct Opened {
    ctx: Ctx,
    q: RedisQueue,
    /// The topic index lists it as busy (TPOP found it there): it need not be told again
    /// while the queue keeps waiting messages.
    indexed: bool,
    /// Already acted on (`close`): the drop that follows does nothing more.
    closed: bool,
}

impl Opened {
    pub fn open(ctx: Ctx, name: RStr, write: bool) -> Result<Opened> {
        Ok(Opened { ctx, q: RedisQueue::open(ctx, name, write)?, indexed: false, closed: false })
    }

    /// Opens a queue the topic index lists as busy, at the end of `into`: a handle is a
    /// few hundred bytes, each move a copy, so it is pushed where it is made.
    pub fn open_indexed_into(ctx: Ctx, name: RStr, into: &mut Vec<Opened>) -> Result<()> {
        into.push(Opened { ctx, q: RedisQueue::open(ctx, name, true)?, indexed: true, closed: false });
        Ok(())
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

impl Opened {
    /// Acts on what the changes did, then replicates them: where a caller needs that done
    /// at a point (before it opens the queue again, or moves on to the next queue).
    pub fn close(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        if self.q.take_wake() {
            waiters::possibly_deliverable(self.ctx, &self.q);
        }
        if self.q.waiting_changed() {
            let busy = self.q.len(Set::Store) + self.q.len(Set::Hold) > 0;
            if !(busy && self.indexed) {
                topics::note(self.ctx.db(), self.q.name().as_ref(), busy);
            }
        }
        if registry::closed(self.ctx, &self.q) && self.q.len(Set::Store) == 0 {
            emptied(self.ctx.db(), self.q.name().as_ref());
        }
        if self.q.holds_added() {
            // The timer releases holds as they end (bounded steps), like it rolls back leases.
            if let Some((_, end)) = self.q.first(Set::Hold, false) {
                alarm::note_lease(self.ctx, self.q.name().as_ref(), end as i64);
            }
        }
    }
}

/// Queue `q` of database `db` has no key left that the module opens (no message, no
/// policy): what was remembered for its name goes (the name cache keeps a few recently
/// emptied queues: `keys::emptied`), so names used once and emptied cost no memory.
fn emptied(db: i32, q: &[u8]) {
    alarm::forget_lease(db, q);
    busy::forget(q, db);
    keys::emptied(q);
}

/// The fallback for a queue not closed by hand (an error returned early, a panic): the
/// same work, so no change goes unannounced.
impl Drop for Opened {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Counts and announces a push into queue `q` (RMQ.PUSH, or a schedule's firing).
pub fn pushed(ctx: Ctx, q: &RedisQueue, out: &PushOutcome) {
    queue_stats::count(ctx, q, &[(Stat::Pushed, out.added), (Stat::Merged, out.merged)]);
    events::notify(ctx, q.name(), events::PUSHED, out.added > 0);
    events::notify(ctx, q.name(), events::MERGED, out.merged > 0);
}

/// Takes up to `count` deliverable messages (fewer if the queue's rate limit says so, none
/// while it is paused) under a lease of `lease` ms into `got`; returns how many (see
/// `announce`). Also says whether the rate limit held back a message the pop would have
/// taken (the caller counts `rate_limited` if it delivered fewer than asked), and, when
/// `named`, the first delivery's name (`rules::Popped::first_id`).
pub(crate) fn take_quiet(
    ctx: Ctx,
    q: &mut RedisQueue,
    now: i64,
    count: usize,
    lease: i64,
    named: bool,
    got: &mut Vec<(RStr, u32)>,
) -> (usize, bool, Option<u64>) {
    /// The messages a pop picks, kept from one pop to the next (`rules::pop_into`).
    type Picked = Vec<(RStr, f64, Waiting)>;
    thread_local!(static PICKED: RefCell<Picked> = const { RefCell::new(Vec::new()) });
    let lim = settings::limits(q);
    if lim.paused {
        return (0, false, None);
    }
    let allowed = ratelimit::allowance(ctx.db(), q.name().as_ref(), &lim, now, count);
    let before = got.len();
    let (group_waits, cut, first_id) = if allowed == 0 {
        (0, false, None)
    } else {
        let mut pop = |picked: &mut Picked| rules::pop_into(q, now, allowed, now + lease, named, picked, got);
        PICKED.with(|p| match p.try_borrow_mut() {
            Ok(mut picked) => {
                let out = pop(&mut picked);
                // A large pop's buffer is not kept for the process's life.
                if picked.capacity() > PICKED_KEPT {
                    *picked = Vec::new();
                }
                out
            }
            // A pop inside another (from a callback of its changes): its own buffer.
            Err(_) => pop(&mut Vec::new()),
        })
    };
    let taken = got.len() - before;
    stats::GROUP_WAITS.add(group_waits);
    if cut {
        // It stopped at its parking bound (old data: a backlog of a busy group in `Q`):
        // consumers blocked on the queue look again at the timer's next step, each look
        // parking the next few hundred, so the backlog is set aside in bounded steps.
        alarm::note_due(ctx, q.name().as_ref(), now);
    }
    ratelimit::consumed(ctx.db(), q.name().as_ref(), &lim, taken);
    let limited = allowed < count && taken == allowed && rules::has_deliverable(q, now);
    (taken, limited, first_id)
}

/// Largest buffer of picked messages kept (`take_quiet`).
const PICKED_KEPT: usize = 1024;

/// Counts and announces `n` deliveries from `q` and schedules their leases' rollback.
pub(crate) fn announce(ctx: Ctx, q: &RedisQueue, n: usize, deadline: i64) {
    if n > 0 {
        queue_stats::count(ctx, q, &[(Stat::Popped, n as u64)]);
        events::notify(ctx, q.name(), events::POPPED, true);
        alarm::note_lease(ctx, q.name().as_ref(), deadline);
    }
}

/// What a POP takes: up to `count` messages under a lease of `lease` ms, each delivery
/// named if `named` (`IDS`).
#[derive(Clone, Copy)]
pub struct Want {
    pub count: usize,
    pub lease: i64,
    pub named: bool,
}

/// The messages a POP took, with the first delivery's name when they were named.
pub struct Taken {
    pub got: Vec<(RStr, u32)>,
    pub first_id: Option<u64>,
}

/// RMQ.POP: takes what `want` asks for.
pub fn take(ctx: Ctx, q: &mut RedisQueue, now: i64, want: Want) -> Taken {
    let mut got = Vec::new();
    let (_, limited, first_id) = take_quiet(ctx, q, now, want.count, want.lease, want.named, &mut got);
    stats::RATE_LIMITED.add(limited as u64);
    announce(ctx, q, got.len(), now + want.lease);
    Taken { got, first_id }
}

/// Replies with popped messages: an array of [message, deliveries], or of [message,
/// deliveries, id] when named.
pub fn reply_popped(ctx: Ctx, taken: &Taken) {
    reply::array(ctx, taken.got.len());
    for (i, (m, deliveries)) in taken.got.iter().enumerate() {
        reply::array(ctx, 2 + taken.first_id.is_some() as usize);
        reply::string(ctx, m);
        reply::int(ctx, *deliveries as i64);
        if let Some(first) = taken.first_id {
            reply::int(ctx, (first + i as u64) as i64);
        }
    }
}

/// Counts and announces lease rollbacks (RMQ.SWEEP and the timer).
pub fn swept(ctx: Ctx, q: &RedisQueue, out: &SweepOutcome) {
    queue_stats::count(ctx, q, &[(Stat::Expired, out.expired), (Stat::Died, out.dead)]);
    events::notify(ctx, q.name(), events::EXPIRED, out.expired > 0);
    events::notify(ctx, q.name(), events::REQUEUED, out.expired > out.dead);
    events::notify(ctx, q.name(), events::DEAD, out.dead > 0);
}
