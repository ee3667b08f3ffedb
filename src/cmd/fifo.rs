//! What an SQS-style front (rmq-gateway) needs beyond plain pushes: RMQ.PUSH with
//! SEQUENCE and DEDUP (numbered contents, deduplication windows), and RMQ.REDRIVE (dead
//! messages claimed, moved elsewhere by the caller, then dropped), each on the keys of one
//! queue so that it works under Redis Cluster whatever slot the move's target is in.

use std::collections::HashSet;

use crate::cmd::args::{self, PushArgs, RedriveOp};
use crate::cmd::Call;
use crate::core::error::{Result, RmqError};
use crate::core::ledger_records::{sequenced, Claim, Seen};
use crate::core::rules;
use crate::ffi::context::now_ms;
use crate::ffi::{reply, Ctx, RStr};
use crate::runtime::delivery::{pushed, Opened};
use crate::runtime::{cluster_slots, registry, settings};
use crate::storage::claims::Claims;
use crate::storage::ledger_keys::Ledger;

/// One reply entry per message: `[outcome, sequence, note]`.
fn entry(ctx: Ctx, outcome: &std::ffi::CStr, seq: Option<u64>, note: Option<&[u8]>) {
    reply::array(ctx, 3);
    reply::simple(ctx, outcome);
    match seq {
        // Sequence numbers end at 2^63 - 1 (core::ledger_records::MAX_SEQ): always an integer.
        Some(s) => reply::int(ctx, s as i64),
        None => reply::null(ctx),
    }
    match note {
        Some(n) => reply::bytes(ctx, n),
        None => reply::null(ctx),
    }
}

/// RMQ.PUSH with SEQUENCE or DEDUP. A push whose deduplication id has a record whose
/// window has not ended changes nothing and answers, per message, what the first push did;
/// else the messages (numbered with SEQUENCE) are pushed as any push, and the sequence and
/// the id's record are written with them, all or nothing.
pub fn push(c: &Call, a: &PushArgs) -> Result<()> {
    let now = now_ms();
    let q_name = c.args[0];
    let ledger = Ledger::open(c.ctx, q_name, a.sequence.is_some(), a.dedup.is_some())?;
    let msgs = c.argv.members(a.first);
    // Empty is refused as in any push, though a numbered content would not be.
    if msgs.iter().any(|m| m.as_ref().is_empty()) {
        return Err(RmqError::EmptyMessage);
    }
    if let Some(seen) = a.dedup.as_ref().and_then(|d| ledger.seen(d.id, now)) {
        reply::array(c.ctx, msgs.len());
        for i in 0..msgs.len() {
            entry(c.ctx, c"duplicate", seen.seq_of(i), seen.note.as_deref());
        }
        return Ok(());
    }
    let mut q = Opened::open(c.ctx, c.argv.get(0), true)?;
    cluster_slots::check_arrived(c.ctx, &q)?;
    let lim = settings::limits(&*q);
    let first_seq = match a.sequence {
        Some(_) => Some(ledger.next_seq(msgs.len())?),
        None => None,
    };
    let stored: Vec<RStr> = match (a.sequence, first_seq) {
        (Some(prefix), Some(first)) => msgs.iter().zip(first..).map(|(m, s)| RStr::from_bytes(&sequenced(prefix, s, m.as_ref()))).collect(),
        _ => msgs.to_vec(),
    };
    // Added, or merged into a waiting copy (an earlier one of this push included).
    let mut met = HashSet::new();
    let added: Vec<bool> = stored.iter().map(|m| met.insert(m.as_ref().to_vec()) && !rules::waits(&*q, m)).collect();
    let out = rules::push(&mut *q, now, &lim, a.mode, a.group, &stored)?;
    pushed(c.ctx, &q, &out);
    let last_seq = first_seq.map(|f| f + msgs.len() as u64 - 1);
    let record = a.dedup.as_ref().map(|d| {
        let seen = Seen { expires: now + d.window, first_seq, count: msgs.len() as u64, note: d.note.map(<[u8]>::to_vec) };
        (d.id, seen)
    });
    ledger.commit(last_seq, record.as_ref().map(|(id, s)| (*id, s)), now);
    registry::noted(c.ctx, q_name);
    reply::array(c.ctx, msgs.len());
    for (i, fresh) in added.into_iter().enumerate() {
        entry(c.ctx, if fresh { c"added" } else { c"merged" }, first_seq.map(|f| f + i as u64), None);
    }
    q.close();
    Ok(())
}

/// RMQ.REDRIVE Q CLAIM [COUNT n] [STALE ms] | DONE message [message ...]
pub fn redrive(c: &Call) -> Result<()> {
    let op = args::redrive(c.args)?;
    let q_name = c.args[0];
    let claims = Claims::open(c.ctx, q_name)?;
    match op {
        RedriveOp::Done(first) => {
            let n = c.argv.members(first).iter().filter(|m| claims.drop_claim(m)).count();
            if n > 0 {
                registry::key_gone(c.ctx, claims.name());
            }
            reply::int(c.ctx, n as i64);
        }
        RedriveOp::Claim { count, stale } => {
            let now = now_ms();
            // Claims left by a mover that stopped between claim and done come first: they
            // are the oldest deaths.
            let mut taken: Vec<(RStr, Claim)> = claims
                .all()
                .into_iter()
                .filter(|(_, cl)| cl.at <= now - stale)
                .take(count)
                .map(|(m, cl)| (RStr::from_bytes(&m), Claim { at: now, ..cl }))
                .collect();
            let mut q = Opened::open(c.ctx, c.argv.get(0), true)?;
            cluster_slots::check_arrived(c.ctx, &q)?;
            for (m, d) in rules::take_dead(&mut *q, count - taken.len()) {
                taken.push((m, Claim { at: now, priority: d.priority, group: d.group }));
            }
            for (m, cl) in &taken {
                claims.put(m, cl);
            }
            if !taken.is_empty() {
                registry::noted(c.ctx, q_name);
            }
            reply::array(c.ctx, taken.len());
            for (m, cl) in &taken {
                reply::array(c.ctx, 3);
                reply::string(c.ctx, m);
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
