//! RMQ.SCHEDULE Q SET | DEL | LIST: a queue's schedules (fired by `runtime::schedule_firing`).

use crate::cmd::schedule_args::{self, ScheduleOp};
use crate::cmd::Call;
use crate::core::cron_schedule::{Spec, State, Stored};
use crate::core::error::{Result, RmqError};
use crate::core::queue_store::Store;
use crate::ffi::context::now_ms;
use crate::ffi::{reply, Ctx};
use crate::runtime::delivery::Opened;
use crate::runtime::schedule_firing as runtime_schedules;
use crate::runtime::{alarm, cluster_slots, registry, settings};
use crate::storage::schedule_keys::Schedules;

pub fn schedule(c: &Call) -> Result<()> {
    let op = schedule_args::schedule(c.args)?;
    if op != ScheduleOp::List && !c.ctx.is_primary() {
        return Err(RmqError::ReadOnly);
    }
    let q = c.args[0];
    match op {
        ScheduleOp::List => list(c.ctx, q),
        ScheduleOp::Set { name, spec } => set(c, name, spec),
        ScheduleOp::Del(first) => {
            let mut scheds = Schedules::open(c.ctx, q, true)?;
            let mut n = 0;
            for name in &c.args[first..] {
                let next = scheds.get(name).and_then(|s| s.state.next);
                if scheds.remove(name) {
                    n += 1;
                    if let Some(t) = next {
                        alarm::forget_firing(c.ctx.db(), q, name, t);
                    }
                }
            }
            if n > 0 {
                runtime_schedules::gone_if_last(c.ctx, q, &scheds);
            }
            reply::int(c.ctx, n);
            Ok(())
        }
    }
}

/// Validates the schedule against the queue (its kind, the message's length), then
/// writes it in place of one of the same name; replies its first firing time.
fn set(c: &Call, name: &[u8], spec: Spec) -> Result<()> {
    if c.ctx.out_of_memory() {
        return Err(RmqError::OutOfMemory);
    }
    let q = c.args[0];
    let queue = Opened::open(c.ctx, c.argv.get(0), false)?;
    cluster_slots::check_arrived(c.ctx, &queue)?;
    let kind = spec.mode.kind();
    if let Some(holds) = queue.kind().filter(|&k| k != kind && !queue.is_empty()) {
        return Err(RmqError::KindMismatch { holds, pushed: kind });
    }
    let max = settings::limits(&*queue).max_message_bytes;
    if spec.message.len() as i64 > max {
        return Err(RmqError::TooLong(max));
    }
    queue.close();
    let first = spec.first(now_ms()).ok_or_else(|| RmqError::BadSchedule("it never fires (no time matches, or none before END)".into()))?;
    let mut scheds = Schedules::open(c.ctx, q, true)?;
    if let Some(t) = scheds.get(name).and_then(|s| s.state.next) {
        alarm::forget_firing(c.ctx.db(), q, name, t);
    }
    scheds.put(name, &Stored { spec, state: State { next: Some(first), fired: 0, last: None } });
    registry::noted(c.ctx, q);
    alarm::note_firing(c.ctx, c.ctx.db(), q, name, first);
    reply::int(c.ctx, first);
    Ok(())
}

/// Every schedule, by name: `[name, spec, next, fired, last]`; one whose stored value
/// cannot be used (never fired) as `[name, "broken: <why>", nil, nil, nil]`.
fn list(ctx: Ctx, q: &[u8]) -> Result<()> {
    let scheds = Schedules::open(ctx, q, false)?;
    let mut all: Vec<(Vec<u8>, Result<Stored>)> = scheds.all().into_iter().map(|(n, v)| (n, Stored::decode(&v))).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    reply::array(ctx, all.len());
    for (name, s) in &all {
        reply::array(ctx, 5);
        reply::bytes(ctx, name);
        match s {
            Ok(s) => {
                reply::bytes(ctx, &s.spec.text);
                reply::opt_int(ctx, s.state.next);
                reply::int(ctx, s.state.fired as i64);
                reply::opt_int(ctx, s.state.last);
            }
            Err(e) => {
                let why = e.message();
                reply::bytes(ctx, format!("broken: {}", why.strip_prefix("ERR ").unwrap_or(&why)).as_bytes());
                for _ in 0..3 {
                    reply::opt_int(ctx, None);
                }
            }
        }
    }
    Ok(())
}
