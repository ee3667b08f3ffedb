//! The rules of RMQ.PUSH's SEQUENCE and DEDUP options and of RMQ.REDRIVE's claims, over
//! two small traits: `PushLedger` (a queue's push sequence and deduplication records) and
//! `ClaimStore` (its dead messages claimed for a move). The Redis keys implement them in
//! `storage` (`seq/dedup/dedupexp/moving{Q}`), `MemLedger` in memory, so the model and
//! the fuzz targets check these rules as they check the queue's.

use std::collections::HashSet;

use crate::core::error::{Result, RmqError};
use crate::core::kind::PushMode;
use crate::core::ledger_records::{first_seq, sequenced, Claim, Seen};
use crate::core::policy::Limits;
use crate::core::queue_store::{Member, Store};
use crate::core::rules;

/// Ended records a push removes at most (one push adds at most one record, so they never
/// pile up while pushes go on).
pub const PRUNE_PER_PUSH: usize = 16;

/// A queue's push sequence and deduplication records.
pub trait PushLedger {
    /// The last sequence number given (0: none yet); an error if what is kept is no number.
    fn last_seq(&self) -> Result<u64>;
    fn set_last_seq(&mut self, last: u64);
    /// The record of `id`, ended or not (None for one that cannot be read).
    fn record(&self, id: &[u8]) -> Option<Seen>;
    /// Up to `n` ids whose window ended by `now`, earliest end first.
    fn ended(&self, now: i64, n: usize) -> Vec<Vec<u8>>;
    fn forget(&mut self, id: &[u8]);
    fn put(&mut self, id: &[u8], seen: &Seen);
}

/// A queue's dead messages claimed for a move elsewhere.
pub trait ClaimStore {
    /// Every claim (in the store's own order).
    fn claims(&self) -> Vec<(Vec<u8>, Claim)>;
    fn put_claim(&mut self, m: &[u8], c: &Claim);
    /// Drops the claim of `m`; false if it had none.
    fn drop_claim(&mut self, m: &[u8]) -> bool;
}

/// What a push with SEQUENCE or DEDUP did to one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Added,
    Merged,
    Duplicate,
}

/// One reply entry: what happened, the message's number, the first push's note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub outcome: Outcome,
    pub seq: Option<u64>,
    pub note: Option<Vec<u8>>,
}

/// A push's DEDUP option: DEDUP id ms [NOTE note].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dedup<'a> {
    pub id: &'a [u8],
    pub window: i64,
    pub note: Option<&'a [u8]>,
}

/// The first step of a push with SEQUENCE or DEDUP, before the queue is looked at: an
/// empty message is refused as in any push (though a numbered content would not be
/// empty); then, if the id's window has not ended at `now`, the push is a duplicate and
/// this is the reply (per message, the first push's number in its place and its note).
pub fn screen<L: PushLedger, M: Member>(l: &L, dedup: Option<Dedup>, now: i64, msgs: &[M]) -> Result<Option<Vec<Entry>>> {
    if msgs.iter().any(|m| m.as_ref().is_empty()) {
        return Err(RmqError::EmptyMessage);
    }
    let Some(seen) = dedup.and_then(|d| l.record(d.id)).filter(|s| s.expires > now) else { return Ok(None) };
    Ok(Some((0..msgs.len()).map(|i| Entry { outcome: Outcome::Duplicate, seq: seen.seq_of(i), note: seen.note.clone() }).collect()))
}

/// RMQ.PUSH with SEQUENCE `prefix` and/or `dedup`, once `screen` let it through: the
/// messages, numbered with `prefix`, pushed as any push (`make` turns a numbered content
/// into a member), then the sequence and the id's record written; all or nothing.
#[allow(clippy::too_many_arguments)]
pub fn push<S: Store, L: PushLedger>(
    s: &mut S,
    l: &mut L,
    now: i64,
    lim: &Limits,
    mode: PushMode,
    group: Option<&[u8]>,
    prefix: Option<&[u8]>,
    dedup: Option<Dedup>,
    msgs: &[S::M],
    make: impl Fn(Vec<u8>) -> S::M,
) -> Result<(Vec<Entry>, rules::PushOutcome)> {
    let first = match prefix {
        Some(_) => Some(first_seq(l.last_seq()?, msgs.len()).ok_or(RmqError::NotASequence)?),
        None => None,
    };
    let stored: Vec<S::M> = match (prefix, first) {
        (Some(p), Some(f)) => msgs.iter().zip(f..).map(|(m, n)| make(sequenced(p, n, m.as_ref()))).collect(),
        _ => msgs.to_vec(),
    };
    // Added, or merged into a waiting copy (an earlier one of this push included).
    let mut met = HashSet::new();
    let fresh: Vec<bool> = stored.iter().map(|m| met.insert(m.as_ref().to_vec()) && !rules::waits(s, m)).collect();
    let out = rules::push(s, now, lim, mode, group, &stored)?;
    if let Some(f) = first {
        l.set_last_seq(f + msgs.len() as u64 - 1);
    }
    if let Some(d) = dedup {
        for id in l.ended(now, PRUNE_PER_PUSH) {
            l.forget(&id);
        }
        let seen =
            Seen { expires: now.saturating_add(d.window), first_seq: first, count: msgs.len() as u64, note: d.note.map(<[u8]>::to_vec) };
        l.put(d.id, &seen);
    }
    let entries = fresh
        .into_iter()
        .enumerate()
        .map(|(i, f)| Entry { outcome: if f { Outcome::Added } else { Outcome::Merged }, seq: first.map(|s| s + i as u64), note: None })
        .collect();
    Ok((entries, out))
}

/// RMQ.REDRIVE CLAIM: up to `count` messages, first claims at least `stale` ms old (taken
/// again at `now`), then dead messages, oldest death first, out of the queue; each is
/// claimed at `now` with what its dead record kept.
pub fn claim<S: Store, C: ClaimStore>(s: &mut S, c: &mut C, now: i64, count: usize, stale: i64) -> Vec<(Vec<u8>, Claim)> {
    // Claims left by a mover that stopped between claim and done are the oldest deaths.
    let mut taken: Vec<(Vec<u8>, Claim)> = c
        .claims()
        .into_iter()
        .filter(|(_, cl)| cl.at <= now.saturating_sub(stale))
        .take(count)
        .map(|(m, cl)| (m, Claim { at: now, ..cl }))
        .collect();
    for (m, d) in rules::take_dead(s, count - taken.len()) {
        taken.push((m.as_ref().to_vec(), Claim { at: now, priority: d.priority, group: d.group }));
    }
    for (m, cl) in &taken {
        c.put_claim(m, cl);
    }
    taken
}

/// RMQ.REDRIVE DONE: drops the claims of `msgs`; how many had one.
pub fn done<C: ClaimStore, M: Member>(c: &mut C, msgs: &[M]) -> u64 {
    msgs.iter().filter(|m| c.drop_claim(m.as_ref())).count() as u64
}
