//! What an SQS-style front (rmq-gateway) needs beyond plain pushes: RMQ.PUSH with
//! SEQUENCE and DEDUP (numbered contents, deduplication windows), and RMQ.REDRIVE (dead
//! messages claimed, moved elsewhere by the caller, then dropped), each on the keys of one
//! queue so that it works under Redis Cluster whatever slot the move's target is in.

use crate::cmd::args::{self, PushArgs, RedriveOp};
use crate::cmd::Call;
use crate::core::error::Result;
use crate::core::ledger_rules::{self, Entry, Outcome};
use crate::ffi::context::now_ms;
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{pushed, Opened};
use crate::runtime::{cluster_slots, registry, settings};
use crate::storage::claims::Claims;
use crate::storage::ledger_keys::Ledger;

/// The reply: one `[outcome, sequence, note]` per message.
fn entries(ctx: Ctx, entries: &[Entry]) {
    reply::array(ctx, entries.len());
    for e in entries {
        reply::array(ctx, 3);
        reply::simple(
            ctx,
            match e.outcome {
                Outcome::Added => c"added",
                Outcome::Merged => c"merged",
                Outcome::Duplicate => c"duplicate",
            },
        );
        match e.seq {
            // Sequence numbers end at 2^63 - 1 (core::ledger_records::MAX_SEQ): always an integer.
            Some(s) => reply::int(ctx, s as i64),
            None => reply::null(ctx),
        }
        match &e.note {
            Some(n) => reply::bytes(ctx, n),
            None => reply::null(ctx),
        }
    }
}

/// RMQ.PUSH with SEQUENCE or DEDUP (`core::ledger_rules`): a duplicate is answered from
/// the id's record before the queue is opened.
pub fn push(c: &Call, a: &PushArgs) -> Result<()> {
    let now = now_ms();
    let q_name = c.args[0];
    let mut ledger = Ledger::open(c.ctx, q_name, a.sequence.is_some(), a.dedup.is_some())?;
    let msgs = c.argv.members(a.first);
    if let Some(dup) = ledger_rules::screen(&ledger, a.dedup, now, msgs)? {
        entries(c.ctx, &dup);
        return Ok(());
    }
    let mut q = Opened::open(c.ctx, c.argv.get(0), true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let lim = settings::limits(&*q);
    let (out, pushed_out) =
        ledger_rules::push(&mut *q, &mut ledger, now, &lim, a.mode, a.group, a.sequence, a.dedup, msgs, |v| RStr::from_bytes(&v))?;
    pushed(c.ctx, &q, &pushed_out);
    registry::noted(c.ctx, q_name);
    entries(c.ctx, &out);
    q.close();
    Ok(())
}

/// RMQ.REDRIVE Q CLAIM [COUNT n] [STALE ms] | DONE message [message ...]
pub fn redrive(c: &Call) -> Result<()> {
    let op = args::redrive(c.args)?;
    let q_name = c.args[0];
    let mut claims = Claims::open(c.ctx, q_name)?;
    match op {
        RedriveOp::Done(first) => {
            let n = ledger_rules::done(&mut claims, c.argv.members(first));
            if n > 0 {
                registry::key_gone(c.ctx, claims.name());
            }
            reply::int(c.ctx, n as i64);
        }
        RedriveOp::Claim { count, stale } => {
            let now = now_ms();
            let mut q = Opened::open(c.ctx, c.argv.get(0), true)?;
            cluster_slots::check_arrived(c.ctx, &q)?;
            let taken = ledger_rules::claim(&mut *q, &mut claims, now, count, stale);
            if !taken.is_empty() {
                registry::noted(c.ctx, q_name);
            }
            reply::array(c.ctx, taken.len());
            for (m, cl) in &taken {
                reply::array(c.ctx, 3);
                reply::bytes(c.ctx, m);
                match &cl.group {
                    Some(g) => reply::bytes(c.ctx, g),
                    None => reply::null(c.ctx),
                }
                reply::opt_int(c.ctx, cl.priority.map(|p| p as i64));
            }
            q.close();
        }
    }
    Ok(())
}
