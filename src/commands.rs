//! The command entry points: parse, call the queue rules, reply. Each runs behind
//! `catch_unwind`, so no panic ever reaches Redis.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw::{self, RedisModuleString};

use crate::args;
use crate::blocking;
use crate::cluster;
use crate::events;
use crate::timers;
use crate::error::{Result, RmqError};
use crate::queue::{self, Rollback};
use crate::redis_store::{arg_bytes, RedisQueue};
use crate::reply::{self, Ctx};
use crate::rstr::{rm, RStr};
use crate::settings;
use crate::stats;

/// One invocation: the context and the arguments after the command name.
pub struct Call<'a> {
    pub ctx: Ctx,
    pub argv: &'a [*mut RedisModuleString],
    pub args: Vec<&'a [u8]>,
}

impl Call<'_> {
    fn queue(&self, write: bool) -> Result<RedisQueue> {
        RedisQueue::open(self.ctx, RStr::retain(self.argv[0]), write)
    }
    fn members(&self, from: usize) -> Vec<RStr> {
        self.argv[from..].iter().map(|p| RStr::retain(*p)).collect()
    }
    fn member(&self, i: usize) -> RStr {
        RStr::retain(self.argv[i])
    }
}

pub fn now_ms() -> i64 {
    unsafe { rm!(RedisModule_Milliseconds)() }
}

/// Runs a command body with panics caught and errors turned into error replies.
pub fn run(ctx: Ctx, argv: *mut *mut RedisModuleString, argc: i32, body: fn(&Call) -> Result<()>) -> i32 {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let all: &[*mut RedisModuleString] =
            if argv.is_null() || argc < 1 { &[] } else { unsafe { std::slice::from_raw_parts(argv, argc as usize) } };
        let argv = all.get(1..).unwrap_or(&[]);
        body(&Call { ctx, argv, args: arg_bytes(argv) })
    }));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => reply::error(ctx, &e.message()),
        Err(_) => reply::error(ctx, &RmqError::Internal("the command panicked; nothing was replied".into()).message()),
    }
    raw::REDISMODULE_OK as i32
}

pub fn push(c: &Call) -> Result<()> {
    let (mode, first) = args::push(&c.args)?;
    let mut q = c.queue(true)?;
    cluster::check_arrived(c.ctx, &q)?;
    let out = queue::push(&mut q, now_ms(), &settings::limits(), mode, &c.members(first))?;
    stats::PUSHED.add(out.added);
    stats::MERGED.add(out.merged);
    events::notify(c.ctx, q.name(), events::PUSHED, out.added > 0);
    events::notify(c.ctx, q.name(), events::MERGED, out.merged > 0);
    reply::int(c.ctx, out.added as i64);
    Ok(())
}

/// Takes up to `count` deliverable messages under a lease of `lease` ms, and schedules
/// the lease's rollback.
pub fn take(ctx: Ctx, q: &mut RedisQueue, now: i64, count: usize, lease: i64) -> Vec<(RStr, u32)> {
    let deadline = now + lease;
    let got = queue::pop(q, now, count, deadline);
    if !got.is_empty() {
        stats::POPPED.add(got.len() as u64);
        events::notify(ctx, q.name(), events::POPPED, true);
        timers::note_lease(ctx, q.name().as_ref(), deadline);
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

pub fn pop(c: &Call) -> Result<()> {
    let a = args::pop(&c.args)?;
    let lease = a.lease.unwrap_or_else(settings::lease_ms);
    let mut q = c.queue(true)?;
    let got = take(c.ctx, &mut q, now_ms(), a.count, lease);
    if !got.is_empty() {
        reply_popped(c.ctx, &got);
    } else if let Some(timeout) = a.block.filter(|_| blocking::may_block(c.ctx)) {
        blocking::block(c.ctx, &q, a.count, lease, timeout);
    } else {
        reply::null(c.ctx);
    }
    Ok(())
}

pub fn ack(c: &Call) -> Result<()> {
    let first = args::messages(&c.args, "rmq.ack")?;
    let mut q = c.queue(true)?;
    cluster::check_arrived(c.ctx, &q)?;
    let n = queue::ack(&mut q, &c.members(first));
    stats::ACKED.add(n);
    events::notify(c.ctx, q.name(), events::ACKED, n > 0);
    reply::int(c.ctx, n as i64);
    Ok(())
}

pub fn nack(c: &Call) -> Result<()> {
    let a = args::nack(&c.args)?;
    let mut q = c.queue(true)?;
    cluster::check_arrived(c.ctx, &q)?;
    match queue::nack(&mut q, now_ms(), &settings::limits(), &c.member(1), a.delay, a.dead)? {
        None => reply::null(c.ctx),
        Some(r) => {
            stats::NACKED.add(1);
            events::notify(c.ctx, q.name(), events::NACKED, true);
            if r == Rollback::Dead {
                stats::DEAD.add(1);
                events::notify(c.ctx, q.name(), events::DEAD, true);
                reply::simple(c.ctx, c"dead");
            } else {
                events::notify(c.ctx, q.name(), events::REQUEUED, true);
                reply::simple(c.ctx, c"requeued");
            }
        }
    }
    Ok(())
}

pub fn sweep(c: &Call) -> Result<()> {
    let limit = args::sweep(&c.args)?.unwrap_or(usize::MAX);
    let mut q = c.queue(true)?;
    let out = queue::sweep(&mut q, now_ms(), &settings::limits(), limit);
    swept(c.ctx, &q, &out);
    reply::int(c.ctx, out.expired as i64);
    Ok(())
}

/// Counts and announces lease rollbacks (RMQ.SWEEP and the timer).
pub fn swept(ctx: Ctx, q: &RedisQueue, out: &queue::SweepOutcome) {
    stats::EXPIRED.add(out.expired);
    stats::DEAD.add(out.dead);
    events::notify(ctx, q.name(), events::EXPIRED, out.expired > 0);
    events::notify(ctx, q.name(), events::REQUEUED, out.expired > out.dead);
    events::notify(ctx, q.name(), events::DEAD, out.dead > 0);
}

pub fn extend(c: &Call) -> Result<()> {
    let ms = args::extend(&c.args)?;
    let mut q = c.queue(true)?;
    cluster::check_arrived(c.ctx, &q)?;
    let deadline = queue::extend(&mut q, &c.member(1), now_ms() + ms);
    if let Some(d) = deadline {
        timers::note_lease(c.ctx, q.name().as_ref(), d);
        events::notify(c.ctx, q.name(), events::EXTENDED, true);
    }
    reply::opt_int(c.ctx, deadline);
    Ok(())
}

pub fn cancel(c: &Call) -> Result<()> {
    let first = args::messages(&c.args, "rmq.cancel")?;
    let mut q = c.queue(true)?;
    let n = queue::cancel(&mut q, &c.members(first));
    stats::CANCELLED.add(n);
    events::notify(c.ctx, q.name(), events::CANCELLED, n > 0);
    reply::int(c.ctx, n as i64);
    Ok(())
}

pub fn replay(c: &Call) -> Result<()> {
    let limit = args::replay(&c.args)?.unwrap_or(usize::MAX);
    let mut q = c.queue(true)?;
    let n = queue::replay(&mut q, now_ms(), limit);
    stats::REPLAYED.add(n);
    events::notify(c.ctx, q.name(), events::REPLAYED, n > 0);
    reply::int(c.ctx, n as i64);
    Ok(())
}

pub fn info(c: &Call) -> Result<()> {
    args::info(&c.args)?;
    let q = c.queue(false)?;
    let i = queue::info(&q, now_ms());
    reply::map(c.ctx, 7);
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
    Ok(())
}

pub fn pending(c: &Call) -> Result<()> {
    let limit = args::pending(&c.args)?;
    let q = c.queue(false)?;
    let p = queue::pending(&q, limit);
    reply::array(c.ctx, p.len());
    for (m, deliveries, deadline) in &p {
        reply::array(c.ctx, 3);
        reply::string(c.ctx, m);
        reply::int(c.ctx, *deliveries as i64);
        reply::int(c.ctx, *deadline);
    }
    Ok(())
}

pub fn route(c: &Call) -> Result<()> {
    let slots = args::route(&c.args)?;
    reply::bytes(c.ctx, &crate::route::queue_for(c.args[0], slots, c.args[2]));
    Ok(())
}
