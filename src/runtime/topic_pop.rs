//! RMQ.TPOP's taking: up to `count` messages from the queues of a topic that have waiting
//! messages on this node (and whose slot it serves), round-robin — up to `quantum` from
//! each queue in turn, then the turn passes on — starting at the queue after the last one
//! the previous TPOP of the topic served.
//!
//! Turn by turn, a queue's every turn is a visit (open its keys, pop, close), which is most
//! of a TPOP's cost. So the turns are planned: were every queue to give full turns, queue
//! `i` of `n` gets `full` turns of `quantum` (`count / (n * quantum)`) plus its part of the
//! last, partial turn; the first pass asks each queue for that at once, one visit each (a
//! TPOP of one message opens one queue). A queue that gives less than asked has no more to
//! give; what it fell short is taken by going on exactly where turn after turn would have:
//! the rest of the partial turn, then whole turns for every queue that may give more,
//! asked at once, then a last partial turn queue by queue. No queue is asked beyond what
//! turn after turn gives it, so the messages taken are the same; the reply lists them turn
//! by turn.

use std::cell::RefCell;

use crate::core::queue_store::{Set, Store};
use crate::core::route::queue_name;
use crate::ffi::rstr::Shared;
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{announce, take_quiet, Opened};
use crate::runtime::{cluster_slots, settings, stats, topics};
use crate::storage::effects;

/// What RMQ.TPOP asks of a topic.
#[derive(Clone, Copy)]
pub struct TopicPop {
    pub slots: u32,
    pub count: usize,
    /// Messages per queue per turn.
    pub quantum: usize,
    /// None: each queue's own lease.
    pub lease: Option<i64>,
}

/// One delivery of RMQ.TPOP: its queue, the message and its delivery count.
pub type TopicDelivery = (RStr, RStr, u32);

/// A queue of the topic in this TPOP's rotation.
struct Turns {
    name: RStr,
    slot: u32,
    /// Where its queue is in `Taking::opened`, once asked and opened.
    q: Option<usize>,
    lease: i64,
    got: Vec<(RStr, u32)>,
    /// Whether it may give more: not asked yet, or it gave all it was asked.
    more: bool,
}

/// A TPOP under way.
struct Taking<'a> {
    ctx: Ctx,
    want: TopicPop,
    now: i64,
    taken: usize,
    /// A queue's rate limit held a message back (counted only if the TPOP falls short).
    rate_limited: bool,
    /// Under Redis Cluster: each queue's hash slot must be one this node serves.
    clustered: bool,
    /// The queues opened, apart from the visit list: a queue handle is a few hundred
    /// bytes, copied at every move, and most queues of a rotation may not be asked.
    opened: &'a mut Vec<Opened>,
}

impl Taking<'_> {
    /// Asks queue `t` for up to `n` more messages (fewer if fewer are left to take).
    fn ask(&mut self, t: &mut Turns, n: usize) {
        let n = n.min(self.want.count - self.taken);
        if n == 0 || !t.more {
            return;
        }
        let i = match t.q {
            Some(i) => i,
            None => {
                if self.clustered && !cluster_slots::serves(self.ctx, t.name.as_ref()) {
                    t.more = false;
                    return;
                }
                if Opened::open_indexed_into(self.ctx, t.name.clone(), self.opened).is_err() {
                    t.more = false;
                    return;
                }
                let i = *t.q.insert(self.opened.len() - 1);
                t.lease = self.want.lease.unwrap_or_else(|| settings::limits(&*self.opened[i]).lease_ms);
                i
            }
        };
        let q = &mut self.opened[i];
        let (got, limited, _) = take_quiet(self.ctx, q, self.now, n, t.lease, false, &mut t.got);
        // For the next queue's visit.
        q.release_scratch();
        self.rate_limited |= limited;
        t.more = got == n;
        if got == 0 && q.len(Set::Store) + q.len(Set::Hold) == 0 {
            // An entry that outlived its queue (deleted by hand, say).
            topics::note(self.ctx.db(), q.name().as_ref(), false);
        }
        self.taken += got;
    }
}

/// Where a TPOP's deliveries go, in reply order (turn by turn).
pub trait Sink {
    /// `n` (> 0) deliveries follow.
    fn start(&mut self, n: usize);
    fn push(&mut self, queue: &RStr, m: RStr, deliveries: u32);
}

/// Kept for later (a blocked TPOP's reply, made when its client is unblocked).
impl Sink for Vec<TopicDelivery> {
    fn start(&mut self, n: usize) {
        self.reserve(n);
    }
    fn push(&mut self, queue: &RStr, m: RStr, deliveries: u32) {
        Vec::push(self, (queue.clone(), m, deliveries));
    }
}

/// Replies at once, with no list of deliveries built in between.
pub struct Reply(pub Ctx);

impl Sink for Reply {
    fn start(&mut self, n: usize) {
        reply::array(self.0, n);
    }
    fn push(&mut self, queue: &RStr, m: RStr, deliveries: u32) {
        reply_entry(self.0, queue, &m, deliveries);
    }
}

/// RMQ.TPOP: see the module's comment. Hands what it took to `sink`; returns how many.
pub fn take_topic(ctx: Ctx, topic: &[u8], want: TopicPop, now: i64, sink: &mut impl Sink) -> usize {
    effects::one_change_count(ctx, || take_topic_counted(ctx, topic, want, now, sink))
}

/// Longest visit list whose buffer is kept for the next TPOP.
const KEEP_TURNS: usize = 1024;
/// Largest list of a queue's deliveries kept for a later visit (`Spare`).
const KEEP_GOT: usize = 16;

/// Emptied lists of a queue's deliveries (`Turns::got`), for the next TPOP's visits: each
/// visit's list was an allocation and its free (~250 instructions).
type Spare = Vec<Vec<(RStr, u32)>>;

fn take_topic_counted(ctx: Ctx, topic: &[u8], want: TopicPop, now: i64, sink: &mut impl Sink) -> usize {
    // The buffers of the visit list and of the opened queues are kept from one TPOP to the
    // next (a TPOP loop asks alike), borrowed in place (moving them out and back cost more).
    thread_local!(static BUFFERS: RefCell<(Vec<Turns>, Vec<Opened>, Spare)> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) });
    let mut run = |turns: &mut Vec<Turns>, opened: &mut Vec<Opened>, spare: &mut Spare| {
        let taken = take_turns(ctx, topic, want, now, turns, opened, spare);
        // Closes the queues before anything is handed on: their changes are replicated,
        // their consumers woken.
        opened.clear();
        if taken > 0 {
            sink.start(taken);
            deal(turns, want.quantum, sink);
        }
        // Dealt, every list is empty; those never allocated are no use as spares.
        spare.extend(turns.drain(..).map(|t| t.got).filter(|got| (1..=KEEP_GOT).contains(&got.capacity())));
        taken
    };
    BUFFERS.with(|b| match b.try_borrow_mut() {
        Ok(mut b) => {
            let (turns, opened, spare) = &mut *b;
            let taken = run(turns, opened, spare);
            // No more queues are opened than listed.
            if turns.capacity() > KEEP_TURNS {
                *b = Default::default();
            }
            taken
        }
        // A TPOP run inside another (from a callback of the other's changes): its own.
        Err(_) => run(&mut Vec::new(), &mut Vec::new(), &mut Vec::new()),
    })
}

/// Hands the messages taken on turn by turn: up to `quantum` from each queue that has any
/// left.
fn deal(turns: &mut [Turns], quantum: usize, sink: &mut impl Sink) {
    for t in turns.iter_mut() {
        // Moved out from the back below.
        t.got.reverse();
    }
    loop {
        let mut dealt = false;
        for t in turns.iter_mut() {
            for _ in 0..quantum {
                let Some((m, d)) = t.got.pop() else { break };
                sink.push(&t.name, m, d);
                dealt = true;
            }
        }
        if !dealt {
            return;
        }
    }
}

/// Takes the messages into `turns`; returns how many.
fn take_turns(
    ctx: Ctx,
    topic: &[u8],
    want: TopicPop,
    now: i64,
    turns: &mut Vec<Turns>,
    opened: &mut Vec<Opened>,
    spare: &mut Spare,
) -> usize {
    let (count, quantum) = (want.count, want.quantum);
    let resume = topics::rotation(ctx.db(), topic, want.slots, |slot, name| {
        let name = &name.get_or_insert_with(|| Shared(RStr::from_bytes(&queue_name(topic, slot)))).0;
        turns.push(Turns { name: name.clone(), slot, q: None, lease: 0, got: spare.pop().unwrap_or_default(), more: true })
    });
    let Some(resume) = resume.filter(|_| !turns.is_empty()) else { return 0 };
    let mut t = Taking { ctx, want, now, taken: 0, rate_limited: false, clustered: cluster_slots::enabled(ctx), opened };
    // The plan: `full` whole turns for every queue, then a last turn that reaches the
    // first `partial` queues, the last of them for `last` messages (1..=quantum).
    let per_turn = turns.len().saturating_mul(quantum);
    let (full, rest) = (count / per_turn, count % per_turn);
    let partial = rest.div_ceil(quantum);
    for (i, q) in turns.iter_mut().enumerate() {
        let share = full * quantum + quantum.min(rest.saturating_sub(i * quantum));
        if share == 0 {
            break;
        }
        t.ask(q, share);
    }
    if t.taken < count {
        // Short of the plan: on from where turn after turn would be.
        if partial > 0 {
            let last = rest - (partial - 1) * quantum;
            t.ask(&mut turns[partial - 1], quantum - last);
        }
        for q in turns[partial..].iter_mut() {
            t.ask(q, quantum);
        }
    }
    while t.taken < count {
        let open: Vec<usize> = (0..turns.len()).filter(|&i| turns[i].more).collect();
        if open.is_empty() {
            break;
        }
        // Whole turns for every open queue, else one more turn each until done.
        let whole = (count - t.taken) / (open.len() * quantum);
        let n = whole.max(1) * quantum;
        for i in open {
            t.ask(&mut turns[i], n);
        }
    }
    for q in turns.iter() {
        if let Some(i) = q.q {
            announce(ctx, &t.opened[i], q.got.len(), now + q.lease);
        }
    }
    if let Some(last) = last_served(turns, quantum) {
        resume.after(last, want.slots);
    }
    stats::RATE_LIMITED.add((t.rate_limited && t.taken < count) as u64);
    t.taken
}

/// The slot of the queue whose message `deal` hands on last: of those with the most turns
/// (`quantum` messages a turn), the last in the rotation.
fn last_served(turns: &[Turns], quantum: usize) -> Option<u32> {
    let turns_of = |t: &Turns| t.got.len().div_ceil(quantum);
    let most = turns.iter().map(turns_of).max().filter(|&n| n > 0)?;
    turns.iter().rev().find(|t| turns_of(t) == most).map(|t| t.slot)
}

/// Replies with TPOP deliveries: an array of [queue, message, deliveries].
pub fn reply_topic(ctx: Ctx, got: &[TopicDelivery]) {
    reply::array(ctx, got.len());
    for (q, m, deliveries) in got {
        reply_entry(ctx, q, m, *deliveries);
    }
}

fn reply_entry(ctx: Ctx, q: &RStr, m: &RStr, deliveries: u32) {
    reply::array(ctx, 3);
    reply::string(ctx, q);
    reply::string(ctx, m);
    reply::int(ctx, deliveries as i64);
}
