//! The command bodies: parse, call the queue rules, reply. `table` runs each behind the
//! panic guard and turns errors into error replies.

use crate::cmd::args::{self, PolicyOp};
use crate::cmd::{fifo, Call};
use crate::core::error::{Result, RmqError};
use crate::core::kind::Kind;
use crate::core::policy::Field;
use crate::core::queue_store::Store;
use crate::core::rules::{self, Rollback};
use crate::ffi::context::{now_ms, set_test_now};
use crate::ffi::{reply, RStr};
use crate::runtime::delivery::{pushed, reply_popped, swept, take, Opened, Want};
use crate::runtime::queue_stats::{self, Stat};
use crate::runtime::schedule_firing as runtime_schedules;
use crate::runtime::topic_pop::{take_topic, Reply, TopicPop};
use crate::runtime::{alarm, blocking, cluster_slots, events, ratelimit, registry, settings, tpop_acl};
use crate::storage::queue_keys as storage_keys;
use crate::storage::{journal_stream, schedule_keys};

impl Call<'_, '_> {
    fn queue(&self, write: bool) -> Result<Opened> {
        Opened::open(self.ctx, self.argv.get(0), write)
    }
    fn members(&self, from: usize) -> &[RStr] {
        self.argv.members(from)
    }
    fn member(&self, i: usize) -> RStr {
        self.argv.get(i)
    }
}

pub fn push(c: &Call) -> Result<()> {
    let a = args::push(c.args)?;
    if a.sequence.is_some() || a.dedup.is_some() {
        return fifo::push(c, &a);
    }
    let mut q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let lim = settings::limits(&*q);
    let out = rules::push(&mut *q, now_ms(), &lim, a.mode, a.group, c.members(a.first))?;
    pushed(c.ctx, &q, &out);
    reply::int(c.ctx, out.added as i64);
    q.close();
    Ok(())
}

pub fn pop(c: &Call) -> Result<()> {
    let a = args::pop(c.args)?;
    let mut q = c.queue(true)?;
    let lease = a.lease.unwrap_or_else(|| settings::limits(&*q).lease_ms);
    let want = Want { count: a.count, lease, named: a.ids };
    let taken = take(c.ctx, &mut q, now_ms(), want);
    if !taken.got.is_empty() {
        reply_popped(c.ctx, &taken);
    } else if let Some(timeout) = a.block.filter(|_| c.ctx.may_block()) {
        blocking::block(c.ctx, &q, want, timeout);
    } else {
        reply::null(c.ctx);
    }
    q.close();
    Ok(())
}

pub fn tpop(c: &Call) -> Result<()> {
    let a = args::tpop(c.args)?;
    let topic = c.args[0];
    tpop_acl::check_topic(c.ctx, topic, a.slots)?;
    let want = TopicPop { slots: a.slots, count: a.pop.count, quantum: a.quantum, lease: a.pop.lease };
    // What it takes is the reply; with nothing taken, it blocks or answers nil.
    if take_topic(c.ctx, topic, want, now_ms(), &mut Reply(c.ctx)) == 0 {
        match a.pop.block.filter(|_| c.ctx.may_block()) {
            Some(timeout) => blocking::block_topic(c.ctx, topic, want, timeout),
            None => reply::null(c.ctx),
        }
    }
    Ok(())
}

pub fn ack(c: &Call) -> Result<()> {
    let first = args::messages(c.args, "rmq.ack")?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    end(c, q, c.members(first))
}

/// RMQ.ACKID: the deliveries still in flight under the names given are acked.
pub fn ackid(c: &Call) -> Result<()> {
    let ids = args::ackid(c.args)?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let msgs: Vec<RStr> = ids.iter().filter_map(|&id| rules::named(&*q, id)).collect();
    end(c, q, &msgs)
}

/// ACK's end of the in-flight deliveries of `msgs`.
fn end(c: &Call, mut q: Opened, msgs: &[RStr]) -> Result<()> {
    let n = rules::ack(&mut *q, msgs);
    queue_stats::count(c.ctx, &q, &[(Stat::Acked, n)]);
    events::notify(c.ctx, q.name(), events::ACKED, n > 0);
    reply::int(c.ctx, n as i64);
    q.close();
    Ok(())
}

pub fn nack(c: &Call) -> Result<()> {
    let a = args::nack(c.args)?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    fail(c, q, Some(c.member(1)), a)
}

pub fn nackid(c: &Call) -> Result<()> {
    let (id, a) = args::nackid(c.args)?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let m = rules::named(&*q, id);
    fail(c, q, m, a)
}

/// NACK's failure of the in-flight delivery of `m` (None: a name whose delivery ended).
fn fail(c: &Call, mut q: Opened, m: Option<RStr>, a: args::NackArgs) -> Result<()> {
    let lim = settings::limits(&*q);
    match m.and_then(|m| rules::nack(&mut *q, now_ms(), &lim, &m, a.delay, a.dead)) {
        None => reply::null(c.ctx),
        Some(r) => {
            queue_stats::count(c.ctx, &q, &[(Stat::Nacked, 1), (Stat::Died, (r == Rollback::Dead) as u64)]);
            events::notify(c.ctx, q.name(), events::NACKED, true);
            if r == Rollback::Dead {
                events::notify(c.ctx, q.name(), events::DEAD, true);
                reply::simple(c.ctx, c"dead");
            } else {
                events::notify(c.ctx, q.name(), events::REQUEUED, true);
                reply::simple(c.ctx, c"requeued");
            }
        }
    }
    q.close();
    Ok(())
}

pub fn sweep(c: &Call) -> Result<()> {
    let limit = args::sweep(c.args)?.unwrap_or(usize::MAX);
    let mut q = c.queue(true)?;
    let lim = settings::limits(&*q);
    let out = rules::sweep(&mut *q, now_ms(), &lim, limit);
    swept(c.ctx, &q, &out);
    reply::int(c.ctx, out.expired as i64);
    q.close();
    Ok(())
}

pub fn extend(c: &Call) -> Result<()> {
    let ms = args::extend(c.args)?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    lengthen(c, q, Some(c.member(1)), ms)
}

pub fn extendid(c: &Call) -> Result<()> {
    let (id, ms) = args::extendid(c.args)?;
    let q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let m = rules::named(&*q, id);
    lengthen(c, q, m, ms)
}

/// EXTEND's new lease for the in-flight delivery of `m` (None: a name whose delivery ended).
fn lengthen(c: &Call, mut q: Opened, m: Option<RStr>, ms: i64) -> Result<()> {
    let deadline = m.and_then(|m| rules::extend(&mut *q, &m, now_ms() + ms));
    if let Some(d) = deadline {
        alarm::note_lease(c.ctx, q.name().as_ref(), d);
        events::notify(c.ctx, q.name(), events::EXTENDED, true);
    }
    reply::opt_int(c.ctx, deadline);
    q.close();
    Ok(())
}

pub fn cancel(c: &Call) -> Result<()> {
    let first = args::messages(c.args, "rmq.cancel")?;
    let mut q = c.queue(true)?;
    let n = rules::cancel(&mut *q, c.members(first));
    queue_stats::count(c.ctx, &q, &[(Stat::Cancelled, n)]);
    events::notify(c.ctx, q.name(), events::CANCELLED, n > 0);
    reply::int(c.ctx, n as i64);
    q.close();
    Ok(())
}

pub fn replay(c: &Call) -> Result<()> {
    let limit = args::replay(c.args)?.unwrap_or(usize::MAX);
    let mut q = c.queue(true)?;
    let n = rules::replay(&mut *q, now_ms(), limit);
    queue_stats::count(c.ctx, &q, &[(Stat::Replayed, n)]);
    events::notify(c.ctx, q.name(), events::REPLAYED, n > 0);
    reply::int(c.ctx, n as i64);
    q.close();
    Ok(())
}

/// RMQ.PURGE Q [DEAD]: every waiting and in-flight message goes (and the dead, with DEAD).
pub fn purge(c: &Call) -> Result<()> {
    let dead = args::purge(c.args)?;
    let mut q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let n = rules::purge(&mut *q, dead);
    events::notify(c.ctx, q.name(), events::PURGED, n > 0);
    reply::int(c.ctx, n as i64);
    q.close();
    Ok(())
}

/// RMQ.DROP Q: the queue and every key the module keeps for it go. Its messages, records
/// and policy go through the rules (the queue's memory in the module follows), then every
/// key of the queue's names that is left; its schedules' planned times are forgotten
/// first. Consumers blocked on it are not woken: nothing became deliverable.
pub fn drop_queue(c: &Call) -> Result<()> {
    args::drop_queue(c.args)?;
    let mut q = c.queue(true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let had = rules::drop_queue(&mut *q);
    let name = q.name().clone();
    q.close();
    ratelimit::forget(c.ctx.db(), name.as_ref());
    runtime_schedules::forget(c.ctx, c.args[0]);
    let gone = storage_keys::unlink_all(c.ctx, c.args[0]);
    for k in &gone {
        registry::key_gone(c.ctx, k);
    }
    let had = had || !gone.is_empty();
    events::notify(c.ctx, &name, events::DROPPED, had);
    reply::int(c.ctx, had as i64);
    Ok(())
}

pub fn info(c: &Call) -> Result<()> {
    args::info(c.args)?;
    let q = c.queue(false)?;
    let now = now_ms();
    let i = rules::info(&*q, now);
    let counts = queue_stats::of(c.ctx.db(), q.name().as_ref());
    reply::map(c.ctx, 10 + Stat::ALL.len());
    reply::bytes(c.ctx, b"kind");
    match i.kind {
        Some(k) => reply::bytes(c.ctx, k.name().as_bytes()),
        None => reply::null(c.ctx),
    }
    for (name, v) in [("waiting", i.waiting), ("ready", i.ready), ("inflight", i.inflight), ("dead", i.dead)] {
        reply::bytes(c.ctx, name.as_bytes());
        reply::int(c.ctx, v as i64);
    }
    reply::bytes(c.ctx, b"next_due");
    reply::opt_int(c.ctx, i.next_due);
    reply::bytes(c.ctx, b"next_expiry");
    reply::opt_int(c.ctx, i.next_expiry);
    reply::bytes(c.ctx, b"paused");
    reply::int(c.ctx, settings::limits(&*q).paused as i64);
    // How late the queue runs: the oldest ready message's time past due (none: 0).
    reply::bytes(c.ctx, b"lag_ms");
    reply::opt_int(c.ctx, (i.kind != Some(Kind::Priority)).then(|| i.next_due.map_or(0, |due| (now - due).max(0))));
    for s in Stat::ALL {
        reply::bytes(c.ctx, s.name().as_bytes());
        reply::opt_int(c.ctx, counts.map(|c| c[s as usize] as i64));
    }
    reply::bytes(c.ctx, b"schedules");
    reply::int(c.ctx, schedule_keys::count(c.ctx, c.args[0]) as i64);
    q.close();
    Ok(())
}

pub fn pending(c: &Call) -> Result<()> {
    let limit = args::pending(c.args)?;
    let q = c.queue(false)?;
    let p = rules::pending(&*q, limit);
    reply::array(c.ctx, p.len());
    for e in &p {
        reply::array(c.ctx, 4);
        reply::string(c.ctx, &e.message);
        reply::int(c.ctx, e.deliveries as i64);
        reply::int(c.ctx, e.deadline);
        match &e.group {
            Some(g) => reply::bytes(c.ctx, g),
            None => reply::null(c.ctx),
        }
    }
    q.close();
    Ok(())
}

pub fn policy(c: &Call) -> Result<()> {
    let op = args::policy(c.args)?;
    if op != PolicyOp::Get && !c.ctx.is_primary() {
        return Err(RmqError::ReadOnly);
    }
    let mut q = c.queue(op != PolicyOp::Get)?;
    if op != PolicyOp::Get {
        cluster_slots::check_arrived(c.ctx, &q)?;
    }
    match op {
        PolicyOp::Get => {
            let lim = settings::limits(&*q);
            reply::map(c.ctx, Field::ALL.len());
            for f in Field::ALL {
                reply::bytes(c.ctx, f.name().as_bytes());
                reply::int(c.ctx, lim.get(f));
            }
        }
        PolicyOp::Set(pairs) => {
            let mut p = q.policy();
            for (f, v) in pairs {
                p.set(f, v);
            }
            let journal = p.get(Field::Journal).unwrap_or(0) as u64;
            if journal > 0 {
                journal_stream::check(c.ctx, c.args[0])?;
            }
            q.set_policy(Some(&p));
            journal_stream::resize(c.ctx, c.args[0], journal);
            ratelimit::forget(c.ctx.db(), q.name().as_ref());
            q.wake_consumers();
            reply::simple(c.ctx, c"OK");
        }
        PolicyOp::Reset => {
            let had = q.set_policy(None);
            journal_stream::resize(c.ctx, c.args[0], 0);
            ratelimit::forget(c.ctx.db(), q.name().as_ref());
            q.wake_consumers();
            reply::int(c.ctx, had as i64);
        }
    }
    q.close();
    Ok(())
}

pub fn route(c: &Call) -> Result<()> {
    let slots = args::route(c.args)?;
    reply::bytes(c.ctx, &crate::core::route::queue_for(c.args[0], slots, c.args[2]));
    Ok(())
}

/// RMQ.TESTCLOCK GET | SET ms | ADVANCE ms: the test clock (registered only with
/// `test-clock 1`). A change runs what fell due at once (leases, due times, refills).
pub fn testclock(c: &Call) -> Result<()> {
    let now = match args::testclock(c.args, now_ms())? {
        Some(t) => {
            set_test_now(t);
            alarm::fire_now(c.ctx);
            t
        }
        None => now_ms(),
    };
    reply::int(c.ctx, now);
    Ok(())
}
