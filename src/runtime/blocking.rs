//! Blocking pops. RMQ.POP ... BLOCK ms parks the client on its queue's key
//! (RedisModule_BlockClientOnKeys): every change that can make a message deliverable
//! signals the key (`waiters::possibly_deliverable`), and the timer signals it when the
//! next waiting message comes due; Redis then retries the blocked pops of that key first
//! come, first served.
//!
//! RMQ.TPOP ... BLOCK ms does not block on keys: a topic may have 16,384 queues, and
//! blocking on all of their keys made registering, holding and releasing one blocked TPOP
//! cost in proportion (and under Redis Cluster its keys span hash slots, which no blocked
//! client may). The module blocks the client itself and keeps it in its topic's waiter
//! list; a change that may make one of the topic's queues deliverable notes the topic
//! (`waiters::possibly_deliverable`) and the timer, right after the command, serves the
//! topic's waiters in arrival order (after the blocked POPs of that queue, which Redis
//! serves as the command ends). So a blocked TPOP costs the same whatever its `slots`.
//! Its BLOCK time is kept by the module too (the timer answers nil at the deadline), not by
//! Redis: Redis 7.0 drops the reply of a client blocked by hand that the module unblocks in
//! the same event-loop turn as its own timeout fires (the timeout skips its callback as the
//! client is already unblocked, then detaches the client from the pending unblock).

use std::any::Any;
use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::due_index::QueueId;
use crate::core::route::queue_name;
use crate::core::shrink::{shrink, shrink_vec};
use crate::ffi::block::{self, Blocked, Handle};
use crate::ffi::context::{now_ms, writes_paused};
use crate::ffi::guard::caught;
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{reply_popped, take, Opened, Want};
use crate::runtime::topic_pop::{reply_topic, take_topic, TopicDelivery, TopicPop};
use crate::runtime::{alarm, topics, waiters};
use crate::storage::journal_stream::{as_author, Author};

/// What a blocked POP asked for, and where it waits.
#[derive(Clone)]
struct Waiting {
    want: Want,
    db: i32,
    queue: Vec<u8>,
}

/// A blocked TPOP.
#[derive(Clone, Copy)]
struct TopicWaiter {
    h: Handle,
    /// Its client's id: the journal's `by` of what the timer takes for it.
    client: u64,
    want: TopicPop,
    /// When it times out (Unix ms), None = never.
    deadline: Option<i64>,
}

/// Blocked TPOPs by topic, each list in arrival order, and the topic of each client.
#[derive(Default)]
struct ByTopic {
    lists: HashMap<QueueId, Vec<TopicWaiter>>,
    topic_of: HashMap<Handle, QueueId>,
    /// The waiters with a deadline, soonest first.
    deadlines: BTreeSet<(i64, Handle)>,
}

static BY_TOPIC: LazyLock<Mutex<ByTopic>> = LazyLock::new(Mutex::default);

fn by_topic() -> MutexGuard<'static, ByTopic> {
    BY_TOPIC.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parks the client on `q` until a message is deliverable or `timeout_ms` (0 = never).
pub fn block(ctx: Ctx, q: &Opened, want: Want, timeout_ms: i64) {
    let db = ctx.db();
    let queue = q.name().as_ref().to_vec();
    waiters::add(db, &queue);
    let data = Waiting { want, db, queue };
    block::block_on_keys::<Pop, _>(ctx, &[q.name().clone()], timeout_ms, data, on_free);
    waiters::schedule_wakeup(ctx, q);
}

/// Parks the client until one of the queues of `topic` this node serves has a deliverable
/// message or `timeout_ms` (0 = never). Costs the same whatever `want.slots`: besides the
/// blocked client, one entry in the topic's waiter list.
pub fn block_topic(ctx: Ctx, topic: &[u8], want: TopicPop, timeout_ms: i64) {
    let db = ctx.db();
    waiters::add_topic(db, topic, want.slots);
    // No timeout for Redis to keep (0): the module's timer keeps it (see the top).
    let h = block::block_client::<TopicWait>(ctx, 0);
    let deadline = (timeout_ms > 0).then(|| now_ms() + timeout_ms);
    let client = ctx.client_id();
    {
        let mut all = by_topic();
        all.lists.entry((db, topic.to_vec())).or_default().push(TopicWaiter { h, client, want, deadline });
        all.topic_of.insert(h, (db, topic.to_vec()));
        if let Some(at) = deadline {
            all.deadlines.insert((at, h));
        }
    }
    if let Some(at) = deadline {
        alarm::arm(ctx, at);
    }
    // Queues with messages not yet due (or held, or rate-limited) wake it when they are:
    // only those with waiting messages, which the topic index knows.
    for slot in topics::busy_slots(db, topic, want.slots) {
        if let Ok(q) = Opened::open(ctx, RStr::from_bytes(&queue_name(topic, slot)), false) {
            waiters::schedule_wakeup(ctx, &q);
        }
    }
}

/// A blocked RMQ.POP.
struct Pop;

impl Blocked for Pop {
    /// A key was signalled: try the pop again; true = served (unblocked), false = keep
    /// waiting.
    fn reply(ctx: Ctx) -> bool {
        let served = caught(|| {
            let w = block::with_data(ctx, |w: &Waiting| w.clone())?;
            let key = block::ready_key(ctx)?;
            if writes_paused() {
                // No change while clients are paused: keep waiting; the timer signals again.
                alarm::note_due(ctx, key.as_ref(), now_ms() + alarm::PAUSE_RETRY_MS);
                return Some(false);
            }
            let mut q = match Opened::open(ctx, key, true) {
                Ok(q) => q,
                Err(e) => {
                    reply::error(ctx, &e.message());
                    return Some(true);
                }
            };
            let taken = take(ctx, &mut q, now_ms(), w.want);
            if taken.got.is_empty() {
                waiters::schedule_wakeup(ctx, &q);
                return Some(false);
            }
            reply_popped(ctx, &taken);
            Some(true)
        });
        match served {
            Some(served) => served.unwrap_or(false),
            None => {
                reply::error(ctx, "ERR internal error: the blocked pop panicked");
                true
            }
        }
    }

    fn timeout(ctx: Ctx) {
        reply::null(ctx);
    }
}

/// Called however a key-blocked client leaves: served, timed out or disconnected. It no
/// longer counts as waiting.
fn on_free(data: Box<dyn Any>) {
    if let Ok(w) = data.downcast::<Waiting>() {
        waiters::remove(w.db, &w.queue);
    }
}

/// Takes a blocked TPOP out of the registry; None if it already left.
fn take_waiter(h: Handle) -> Option<(QueueId, TopicWaiter)> {
    let mut all = by_topic();
    let topic = all.topic_of.remove(&h)?;
    shrink(&mut all.topic_of);
    let list = all.lists.get_mut(&topic)?;
    let i = list.iter().position(|w| w.h == h)?;
    let w = list.remove(i);
    shrink_vec(list);
    if list.is_empty() {
        all.lists.remove(&topic);
        shrink(&mut all.lists);
    }
    if let Some(at) = w.deadline {
        all.deadlines.remove(&(at, h));
    }
    Some((topic, w))
}

/// Answers nil to every blocked TPOP whose BLOCK time ran out by `now`.
pub fn expire_topics(now: i64) {
    loop {
        let first = by_topic().deadlines.first().copied();
        let Some((at, h)) = first.filter(|&(at, _)| at <= now) else { return };
        match take_waiter(h) {
            Some(((db, topic), w)) => {
                waiters::remove_topic(db, &topic, w.want.slots);
                h.unblock(Some(Vec::<TopicDelivery>::new()), drop_data);
            }
            None => {
                by_topic().deadlines.remove(&(at, h));
            }
        }
    }
}

/// The soonest deadline of a blocked TPOP.
pub fn next_deadline() -> Option<i64> {
    by_topic().deadlines.first().map(|&(at, _)| at)
}

/// Serves the blocked TPOPs of every topic that changed, in arrival order, each with what
/// is deliverable now (run by the timer, after the command that changed the topic). Once
/// a TPOP of `s` slots finds nothing, later ones of at most `s` slots are not tried: the
/// work is bounded by what is served, not by how many wait.
pub fn serve_topics(ctx: Ctx) {
    let changed = waiters::take_changed_topics();
    if changed.is_empty() {
        return;
    }
    if writes_paused() {
        // No change while clients are paused: look again shortly.
        for (db, topic) in changed {
            ctx.select_db(db);
            waiters::retry_topic(ctx, &topic);
        }
        alarm::arm(ctx, now_ms() + alarm::PAUSE_RETRY_MS);
        return;
    }
    let now = now_ms();
    for (db, topic) in changed {
        ctx.select_db(db);
        let list: Vec<TopicWaiter> = by_topic().lists.get(&(db, topic.clone())).cloned().unwrap_or_default();
        // The most slots a TPOP that found nothing asked for.
        let mut dry_up_to = 0;
        for w in list {
            if w.want.slots <= dry_up_to {
                continue;
            }
            let mut got = Vec::new();
            if as_author(Author::Client(w.client), || take_topic(ctx, &topic, w.want, now, &mut got)) == 0 {
                dry_up_to = w.want.slots;
                continue;
            }
            if take_waiter(w.h).is_some() {
                waiters::remove_topic(db, &topic, w.want.slots);
                w.h.unblock(Some(got), drop_data);
            }
        }
    }
}

fn drop_data(_data: Box<dyn Any>) {}

/// A blocked RMQ.TPOP.
struct TopicWait;

impl Blocked for TopicWait {
    /// Served: reply with what `serve_topics` took for it (nothing: its time ran out, nil).
    fn reply(ctx: Ctx) -> bool {
        let replied = caught(|| {
            block::with_data(ctx, |got: &Vec<TopicDelivery>| if got.is_empty() { reply::null(ctx) } else { reply_topic(ctx, got) })
                .is_some()
        });
        if replied != Some(true) {
            reply::error(ctx, "ERR internal error: the blocked pop was served without messages");
        }
        true
    }

    /// Unblocked by CLIENT UNBLOCK (it has no Redis timeout): nil, and the module's unblock
    /// that Redis expects.
    fn timeout(ctx: Ctx) {
        reply::null(ctx);
        if let Some(h) = Handle::of(ctx) {
            release(h);
        }
    }

    /// Its client went away: the module's unblock that Redis expects.
    fn disconnected(h: Handle) {
        release(h);
    }
}

/// Unblocks a blocked TPOP that leaves without being served (once: a served one is no
/// longer in the registry).
fn release(h: Handle) {
    if let Some(((db, topic), w)) = take_waiter(h) {
        waiters::remove_topic(db, &topic, w.want.slots);
        h.unblock(None::<()>, drop_data);
    }
}
