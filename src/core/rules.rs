//! The queue's rules, over any `Store`, with the clock passed in: push and merge per kind,
//! pop order and the never-twice-in-flight rule, ack, rollback with retries and dead
//! letters, lease changes, replay and the read-only views. No FFI here.

use crate::core::error::{Result, RmqError};
use crate::core::kind::{Kind, PushMode};
use crate::core::store::{Flight, Set, Store};

/// The settings the rules depend on (read once per command).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub retries: u32,
    pub max_message_bytes: i64,
    pub max_queue_length: i64,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct PushOutcome {
    pub added: u64,
    pub merged: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rollback {
    Requeued,
    Dead,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    pub expired: u64,
    pub dead: u64,
}

/// RMQ.PUSH: validates the whole batch first (kind, sizes, queue length) so an error
/// changes nothing, then adds or merges each message.
pub fn push<S: Store>(s: &mut S, now: i64, lim: &Limits, mode: PushMode, msgs: &[S::M]) -> Result<PushOutcome> {
    let kind = mode.kind();
    if let Some(holds) = s.kind() {
        if holds != kind {
            return Err(RmqError::KindMismatch { holds, pushed: kind });
        }
    }
    let score = mode.score(now).ok_or(RmqError::DueTooLate(mode))? as f64;
    for m in msgs {
        let len = m.as_ref().len() as i64;
        if len == 0 {
            return Err(RmqError::EmptyMessage);
        }
        if len > lim.max_message_bytes {
            return Err(RmqError::TooLong(lim.max_message_bytes));
        }
    }
    if lim.max_queue_length > 0 {
        let mut fresh: Vec<&[u8]> = msgs.iter().filter(|m| s.score(Set::Store, m).is_none()).map(|m| m.as_ref()).collect();
        fresh.sort_unstable();
        fresh.dedup();
        if s.len(Set::Store) + fresh.len() as u64 > lim.max_queue_length as u64 {
            return Err(RmqError::QueueFull(lim.max_queue_length));
        }
    }
    if s.kind().is_none() {
        s.set_kind(kind);
    }
    let mut out = PushOutcome::default();
    for m in msgs {
        if s.upsert(Set::Store, m, score, mode.replaces_waiting()) {
            out.added += 1;
        } else {
            out.merged += 1;
        }
    }
    Ok(out)
}

/// The score range a pop may take from the store, and its direction.
fn deliverable_range(kind: Kind, now: i64) -> (f64, f64, bool) {
    if kind.is_timed() {
        (f64::NEG_INFINITY, now as f64, false)
    } else {
        (f64::NEG_INFINITY, f64::INFINITY, true)
    }
}

/// RMQ.POP: moves up to `count` deliverable messages to prepare with `deadline`; returns
/// each with its delivery count. A waiting copy whose content is in flight is skipped.
pub fn pop<S: Store>(s: &mut S, now: i64, count: usize, deadline: i64) -> Vec<(S::M, u32)> {
    let Some(kind) = s.kind() else { return Vec::new() };
    let (min, max, rev) = deliverable_range(kind, now);
    let mut picked: Vec<(S::M, f64)> = Vec::with_capacity(count.min(64));
    s.scan(Set::Store, min, max, rev, &mut |m, score| {
        if s.score(Set::Prepare, &m).is_none() {
            picked.push((m, score));
        }
        picked.len() < count
    });
    picked
        .into_iter()
        .map(|(m, score)| {
            s.rem(Set::Store, &m);
            let deliveries = s.waiting_deliveries(&m) + 1;
            if deliveries > 1 {
                s.set_waiting_deliveries(&m, 0);
            }
            s.add(Set::Prepare, &m, deadline as f64);
            let priority = (kind == Kind::Priority).then_some(score);
            let f = Flight { deliveries, priority };
            if f != Flight::default() {
                s.set_flight(&m, Some(f));
            }
            (m, deliveries)
        })
        .collect()
}

/// The earliest lease deadline of the queue.
pub fn next_expiry<S: Store>(s: &S) -> Option<i64> {
    s.first(Set::Prepare, false).map(|(_, d)| d as i64)
}

/// When the next waiting message of a timed queue comes due, if later than `now`: the time
/// a blocked consumer must be woken at.
pub fn next_due_after<S: Store>(s: &S, now: i64) -> Option<i64> {
    if !s.kind()?.is_timed() {
        return None;
    }
    let mut due = None;
    s.scan(Set::Store, now.saturating_add(1) as f64, f64::INFINITY, false, &mut |_, sc| {
        due = Some(sc as i64);
        false
    });
    due
}

/// Deletes the metadata of a queue that has become completely empty.
pub fn tidy<S: Store>(s: &mut S) {
    if s.is_empty() && s.kind().is_some() {
        s.clear_meta();
    }
}

/// RMQ.ACK: ends the in-flight deliveries; returns how many were in flight.
pub fn ack<S: Store>(s: &mut S, msgs: &[S::M]) -> u64 {
    let mut n = 0;
    for m in msgs {
        if s.rem(Set::Prepare, m) {
            s.set_flight(m, None);
            n += 1;
        }
    }
    tidy(s);
    n
}

/// Fails one in-flight delivery (NACK, or a lease run out): to dead if `dead` or its retries
/// are used up, else back to waiting (`delay` ms from now for timed kinds). The caller has
/// checked that `m` is in flight.
fn roll_back<S: Store>(s: &mut S, now: i64, retries: u32, m: &S::M, delay: i64, dead: bool) -> Rollback {
    let f = s.take_flight(m);
    s.rem(Set::Prepare, m);
    let kind = s.kind().unwrap_or(Kind::Fixed);
    if dead || f.deliveries > retries {
        s.add(Set::Dead, m, now as f64);
        if kind == Kind::Priority {
            s.set_dead_priority(m, Some(f.priority.unwrap_or(0.0)));
        }
        return Rollback::Dead;
    }
    if s.score(Set::Store, m).is_none() {
        let score = match kind {
            Kind::Priority => f.priority.unwrap_or(0.0),
            _ => now.saturating_add(delay) as f64,
        };
        s.add(Set::Store, m, score);
    }
    // A newer waiting copy keeps its own score and inherits the delivery count.
    s.set_waiting_deliveries(m, f.deliveries);
    Rollback::Requeued
}

/// RMQ.NACK: None if `m` was not in flight.
pub fn nack<S: Store>(s: &mut S, now: i64, lim: &Limits, m: &S::M, delay: Option<i64>, dead: bool) -> Result<Option<Rollback>> {
    if delay.is_some() && s.kind() == Some(Kind::Priority) {
        return Err(RmqError::DelayOnPriority);
    }
    if s.score(Set::Prepare, m).is_none() {
        return Ok(None);
    }
    let r = roll_back(s, now, lim.retries, m, delay.unwrap_or(0), dead);
    tidy(s);
    Ok(Some(r))
}

/// RMQ.SWEEP and the timer: rolls back up to `limit` expired leases (deadline <= now),
/// soonest first.
pub fn sweep<S: Store>(s: &mut S, now: i64, lim: &Limits, limit: usize) -> SweepOutcome {
    let mut expired: Vec<S::M> = Vec::new();
    if limit > 0 {
        s.scan(Set::Prepare, f64::NEG_INFINITY, now as f64, false, &mut |m, _| {
            expired.push(m);
            expired.len() < limit
        });
    }
    let mut out = SweepOutcome::default();
    for m in &expired {
        out.expired += 1;
        if roll_back(s, now, lim.retries, m, 0, false) == Rollback::Dead {
            out.dead += 1;
        }
    }
    tidy(s);
    out
}

/// RMQ.EXTEND: the new deadline, or None if `m` was not in flight.
pub fn extend<S: Store>(s: &mut S, m: &S::M, deadline: i64) -> Option<i64> {
    s.score(Set::Prepare, m)?;
    s.add(Set::Prepare, m, deadline as f64);
    Some(deadline)
}

/// RMQ.CANCEL: removes waiting copies; returns how many.
pub fn cancel<S: Store>(s: &mut S, msgs: &[S::M]) -> u64 {
    let mut n = 0;
    for m in msgs {
        if s.rem(Set::Store, m) {
            s.set_waiting_deliveries(m, 0);
            n += 1;
        }
    }
    tidy(s);
    n
}

/// RMQ.REPLAY: moves up to `limit` dead messages, oldest death first, back to waiting with
/// the delivery count reset; a content already waiting merges by the kind's push rule.
pub fn replay<S: Store>(s: &mut S, now: i64, limit: usize) -> u64 {
    let mut dead: Vec<S::M> = Vec::new();
    if limit > 0 {
        s.scan(Set::Dead, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
            dead.push(m);
            dead.len() < limit
        });
    }
    let kind = s.kind().unwrap_or(Kind::Fixed);
    for m in &dead {
        s.rem(Set::Dead, m);
        let score = if kind == Kind::Priority {
            let p = s.dead_priority(m).unwrap_or(0.0);
            s.set_dead_priority(m, None);
            p
        } else {
            now as f64
        };
        let waiting = s.score(Set::Store, m).is_some();
        if !waiting || kind != Kind::Range {
            s.add(Set::Store, m, score);
        }
        s.set_waiting_deliveries(m, 0);
    }
    dead.len() as u64
}

/// RMQ.INFO, computed without scanning the queue.
#[derive(Debug, PartialEq)]
pub struct Info {
    pub kind: Option<Kind>,
    pub waiting: u64,
    pub ready: u64,
    pub inflight: u64,
    pub dead: u64,
    pub next_due: Option<i64>,
    pub next_expiry: Option<i64>,
}

pub fn info<S: Store>(s: &S, now: i64) -> Info {
    let kind = s.kind();
    let waiting = s.len(Set::Store);
    let timed = kind.is_some_and(Kind::is_timed);
    let (ready, next_due) = if timed {
        let due = s.first(Set::Store, false).map(|(_, sc)| sc as i64);
        (s.count(Set::Store, f64::NEG_INFINITY, now as f64), due)
    } else {
        (waiting, None)
    };
    Info { kind, waiting, ready, inflight: s.len(Set::Prepare), dead: s.len(Set::Dead), next_due, next_expiry: next_expiry(s) }
}

/// RMQ.PENDING: up to `limit` in-flight deliveries, soonest deadline first, as
/// (message, deliveries, deadline).
pub fn pending<S: Store>(s: &S, limit: usize) -> Vec<(S::M, u32, i64)> {
    let mut out = Vec::new();
    if limit == 0 {
        return out;
    }
    s.scan(Set::Prepare, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, deadline| {
        let d = s.flight(&m).deliveries;
        out.push((m, d, deadline as i64));
        out.len() < limit
    });
    out
}
