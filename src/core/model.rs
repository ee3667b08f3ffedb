//! The model of the queue rules shared by the model test (`rules_tests`) and the fuzz
//! target `rules` (fuzz/): operations applied to a `MemStore`, each checked against what
//! the contract promises, computed by brute force from the store before and after it.
//!
//! Checked after every step: metadata is consistent; a content has at most one waiting
//! copy (in `Store`, `Park` or `Hold`) and one delivery in flight; a group has at most one
//! delivery in flight and a free group's parked messages wait behind a deliverable one
//! in `Store` (the v3 contract); every copy of a
//! content moves only as the operation allows (nothing appears, is lost or duplicated:
//! each followed content is waiting, in flight or dead, or was acked, cancelled or merged
//! into a copy of itself); pops take what the brute-force reference says; `has_deliverable`,
//! `info`, `next_due_after`, `next_work` and `pending` agree with the store.
//!
//! Order through retries (the v5 contract) is followed here, not read from the store: a grouped
//! message whose delivery is rolled back back into its group is its group's *pinned*
//! message (`Model::pins`) until it is next delivered, cancelled or dead, or leaves the
//! group; while it is, the reference pop takes nothing else of the group.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::error::RmqError;
use crate::core::kind::{Kind, PushMode};
use crate::core::ledger_records::{sequenced, Claim, Seen};
use crate::core::ledger_rules::{self, Dedup, Entry, Outcome, PRUNE_PER_PUSH};
use crate::core::mem_ledger::MemLedger;
use crate::core::memstore::MemStore;
use crate::core::policy::Limits;
use crate::core::queue_store::{Flight, Set, Store};
use crate::core::rules::*;

/// A push's DEDUP id ms [NOTE note].
pub type DedupOp = (Vec<u8>, i64, Option<Vec<u8>>);

/// One operation on the queue, with the arguments the commands would pass.
#[derive(Clone, Debug)]
pub enum Op {
    Push {
        mode: PushMode,
        group: Option<Vec<u8>>,
        msgs: Vec<Vec<u8>>,
    },
    /// POP COUNT count with a lease of `lease` ms (and IDS when `named`).
    Pop {
        count: usize,
        lease: i64,
        named: bool,
    },
    Ack(Vec<Vec<u8>>),
    /// ACKID of names given so far, each by how many were given after it (0: the last one;
    /// past the first one: a name never given).
    AckId(Vec<usize>),
    Nack {
        m: Vec<u8>,
        delay: Option<i64>,
        dead: bool,
    },
    Sweep(usize),
    Extend {
        m: Vec<u8>,
        ms: i64,
    },
    Cancel(Vec<Vec<u8>>),
    Replay(usize),
    /// RMQ.PURGE, with DEAD when `dead`.
    Purge {
        dead: bool,
    },
    /// RMQ.DROP (the journal, the push sequence, the deduplication records and the claims,
    /// keys of their own, go with the rest).
    Drop,
    /// RMQ.PUSH with SEQUENCE `prefix` and/or DEDUP (id, window, note).
    LedgerPush {
        mode: PushMode,
        group: Option<Vec<u8>>,
        msgs: Vec<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        dedup: Option<DedupOp>,
    },
    /// RMQ.REDRIVE CLAIM COUNT count STALE stale.
    Claim {
        count: usize,
        stale: i64,
    },
    /// RMQ.REDRIVE DONE.
    Done(Vec<Vec<u8>>),
    /// The timer releasing ended holds.
    Release(usize),
    /// The queue's settings change (RMQ.POLICY or the server's).
    Limits(Limits),
    /// The clock is set (it may go back, as the test clock can).
    Clock(i64),
}

/// Where the copies of one content are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Copies {
    waiting: bool,
    flight: bool,
    dead: bool,
}

/// A queue under test and what the model follows about it.
#[derive(Clone, Debug)]
pub struct Model {
    pub s: MemStore,
    /// The queue's push sequence, deduplication records and claims.
    pub l: MemLedger,
    pub now: i64,
    pub lim: Limits,
    /// Every content ever pushed: the copies followed.
    contents: BTreeSet<Vec<u8>>,
    /// Every group ever pushed.
    groups: BTreeSet<Vec<u8>>,
    /// The most retries any setting allowed (bounds the delivery counts).
    max_retries: u32,
    /// Every delivery name given, in order.
    ids: Vec<u64>,
    /// Each group's pinned message: the model's own record of who must go first.
    pins: BTreeMap<Vec<u8>, Vec<u8>>,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($fmt)+));
        }
    };
}

fn better(kind: Kind, a: f64, b: f64) -> bool {
    if kind.is_timed() {
        a <= b
    } else {
        a >= b
    }
}

/// What a pop must take, computed from the contract by brute force: every waiting copy that is
/// deliverable (content and group not in flight, due, not held), best first, at most one
/// per group, up to `count`, and of a group with a pinned message (`pins`: group →
/// message) that one only. Returns the scores (ties make the messages unspecified).
pub fn reference_pop(s: &MemStore, pins: &BTreeMap<Vec<u8>, Vec<u8>>, now: i64, count: usize) -> Vec<f64> {
    let kind = s.kind.unwrap_or(Kind::Fixed);
    let mut cands: Vec<(f64, Option<Vec<u8>>)> = Vec::new();
    for set in [Set::Store, Set::Park, Set::Hold] {
        for (m, score) in s.members(set) {
            let w = s.waiting(&m);
            let score = if set == Set::Hold {
                if score > now as f64 {
                    continue;
                }
                w.held_priority.unwrap_or(0.0)
            } else {
                score
            };
            let free = w.group.as_ref().is_none_or(|g| !s.busy.contains_key(g) && pins.get(g).is_none_or(|p| *p == m));
            let due = !kind.is_timed() || score <= now as f64;
            if free && due && s.score(Set::Prepare, &m).is_none() {
                cands.push((score, w.group));
            }
        }
    }
    cands.sort_by(|a, b| if kind.is_timed() { a.0.total_cmp(&b.0) } else { b.0.total_cmp(&a.0) });
    let mut taken: Vec<Vec<u8>> = Vec::new();
    let mut out = Vec::new();
    for (score, g) in cands {
        if out.len() == count {
            break;
        }
        if let Some(g) = g {
            if taken.contains(&g) {
                continue;
            }
            taken.push(g);
        }
        out.push(score);
    }
    out
}

fn distinct(msgs: &[Vec<u8>]) -> BTreeSet<&Vec<u8>> {
    msgs.iter().collect()
}

impl Model {
    pub fn new(now: i64, lim: Limits) -> Model {
        Model {
            s: MemStore::default(),
            l: MemLedger::default(),
            now,
            lim,
            contents: BTreeSet::new(),
            groups: BTreeSet::new(),
            max_retries: lim.retries,
            ids: Vec::new(),
            pins: BTreeMap::new(),
        }
    }

    fn copies(&self, s: &MemStore) -> BTreeMap<Vec<u8>, Copies> {
        self.contents
            .iter()
            .map(|m| {
                let waiting = [Set::Store, Set::Park, Set::Hold].iter().any(|&set| s.score(set, m).is_some());
                let c = Copies { waiting, flight: s.score(Set::Prepare, m).is_some(), dead: s.score(Set::Dead, m).is_some() };
                (m.clone(), c)
            })
            .collect()
    }

    /// Applies `op` and checks it and the state it leaves.
    pub fn step(&mut self, op: &Op) -> Result<(), String> {
        if let Op::Push { msgs, group, .. } = op {
            self.contents.extend(msgs.iter().filter(|m| !m.is_empty()).cloned());
            self.groups.extend(group.iter().cloned());
        }
        if let Op::LedgerPush { msgs, group, prefix, .. } = op {
            let stored = self.numbered(prefix.as_deref(), msgs);
            self.contents.extend(stored.into_iter().filter(|m| !m.is_empty()));
            self.groups.extend(group.iter().cloned());
        }
        let before = self.s.clone();
        let was = self.copies(&before);
        // The copies each content must have after `op`, filled in by each arm below.
        let mut want = was.clone();
        let (now, lim) = (self.now, self.lim);
        match op {
            Op::Push { mode, group, msgs } => {
                let r = push(&mut self.s, now, &lim, *mode, group.as_deref(), msgs);
                self.pushed(&before, &was, &mut want, *mode, group, msgs, r)?;
            }
            Op::LedgerPush { mode, group, msgs, prefix, dedup } => {
                self.ledger_pushed(&before, &was, &mut want, *mode, group, msgs, prefix.as_deref(), dedup)?;
            }
            Op::Claim { count, stale } => self.claimed(&before, &mut want, *count, *stale)?,
            Op::Done(msgs) => {
                let had = self.l.clone();
                let n = ledger_rules::done(&mut self.l, msgs);
                let ended = distinct(msgs).into_iter().filter(|m| had.claims.contains_key(*m)).count() as u64;
                ensure!(n == ended, "done dropped {n} claims, expected {ended}");
                let mut left = had.claims.clone();
                left.retain(|m, _| !msgs.contains(m));
                ensure!(self.l.claims == left && self.l.records == had.records, "done drops exactly the claims named");
            }
            Op::Pop { count, lease, named } => {
                let expected = reference_pop(&before, &self.pins, now, *count);
                let deadline = now.saturating_add(*lease);
                let popped = if *named { pop_named(&mut self.s, now, *count, deadline) } else { pop(&mut self.s, now, *count, deadline) };
                let got = popped.got;
                ensure!(popped.first_id.is_some() == (*named && !got.is_empty()), "pop named {named}: first id {:?}", popped.first_id);
                for (i, (m, _)) in got.iter().enumerate() {
                    let id = popped.first_id.map(|f| f + i as u64);
                    ensure!(self.s.flight(m).id == id, "{m:?}: in flight as {:?}, named {id:?}", self.s.flight(m).id);
                    if let Some(id) = id {
                        ensure!(self.ids.last().is_none_or(|&l| id > l), "name {id} given after {:?}: never twice", self.ids.last());
                        self.ids.push(id);
                    }
                }
                let kind = self.s.kind.unwrap_or(Kind::Fixed);
                let mut scores = Vec::new();
                for (m, d) in &got {
                    let c = want.get_mut(m).ok_or(format!("popped {m:?}, never pushed"))?;
                    ensure!(c.waiting && !c.flight, "popped {m:?} with copies {c:?}: never twice in flight");
                    c.waiting = false;
                    c.flight = true;
                    ensure!(*d == before.waiting(m).deliveries + 1, "{m:?}: delivery {d} after {:?}", before.waiting(m));
                    ensure!(*d <= self.max_retries + 1, "{m:?}: delivery {d} past the retries");
                    ensure!(self.s.score(Set::Prepare, m) == Some(deadline as f64), "{m:?}: lease deadline");
                    scores.push(match kind {
                        Kind::Priority => self.s.flight(m).priority.ok_or("a priority delivery keeps its priority")?,
                        _ => [Set::Store, Set::Park].iter().find_map(|&set| before.score(set, m)).ok_or("popped a waiting copy")?,
                    });
                }
                let mut expected = expected;
                expected.sort_by(f64::total_cmp);
                scores.sort_by(f64::total_cmp);
                ensure!(scores == expected, "pop took {scores:?}, the reference {expected:?}");
            }
            Op::Ack(msgs) => {
                let n = ack(&mut self.s, msgs);
                let ended: Vec<_> = distinct(msgs).into_iter().filter(|m| was.get(*m).is_some_and(|c| c.flight)).collect();
                ensure!(n == ended.len() as u64, "ack ended {n}, expected {}", ended.len());
                for m in ended {
                    want.get_mut(m).expect("followed").flight = false;
                }
            }
            Op::AckId(picks) => {
                let given = |back: usize| self.ids.len().checked_sub(back + 1).map(|i| self.ids[i]);
                let ids: Vec<u64> = picks.iter().map(|&back| given(back).unwrap_or(crate::core::codec::MAX_ID)).collect();
                let msgs: Vec<Vec<u8>> = ids.iter().filter_map(|&id| named(&self.s, id)).collect();
                let n = ack(&mut self.s, &msgs);
                // Exactly the deliveries in flight under those names end.
                let ended: BTreeSet<&Vec<u8>> =
                    before.flights.iter().filter(|(_, f)| f.id.is_some_and(|id| ids.contains(&id))).map(|(m, _)| m).collect();
                ensure!(n == ended.len() as u64, "ackid of {ids:?} ended {n}, expected {}", ended.len());
                for m in ended {
                    want.get_mut(m).expect("followed").flight = false;
                }
            }
            Op::Nack { m, delay, dead } => {
                let f = before.flight(m);
                let r = nack(&mut self.s, now, &lim, m, *delay, *dead);
                let c = was.get(m).copied().unwrap_or_default();
                ensure!(r.is_some() == c.flight, "nack {m:?} answered {r:?} with copies {c:?}");
                if let Some(r) = r {
                    self.rolled_back(&before, &mut want, m, &f, r, *delay, *dead)?;
                }
            }
            Op::Sweep(limit) => {
                let out = sweep(&mut self.s, now, &lim, *limit);
                let expired: Vec<(Vec<u8>, f64)> = before.members(Set::Prepare).into_iter().filter(|(_, d)| *d <= now as f64).collect();
                ensure!(out.expired == expired.len().min(*limit) as u64, "sweep {out:?} of {} expired", expired.len());
                let mut dead = 0;
                let mut last_done: Option<f64> = None;
                for (m, deadline) in &expired {
                    if self.s.score(Set::Prepare, m).is_some() {
                        continue;
                    }
                    last_done = Some(last_done.map_or(*deadline, |l: f64| l.max(*deadline)));
                    let f = before.flight(m);
                    let r = if f.deliveries > lim.retries { Rollback::Dead } else { Rollback::Requeued };
                    dead += (r == Rollback::Dead) as u64;
                    self.rolled_back(&before, &mut want, m, &f, r, None, false)?;
                }
                ensure!(out.dead == dead, "sweep {out:?}, {dead} went dead");
                if let Some(last) = last_done {
                    let left = expired.iter().filter(|(m, _)| self.s.score(Set::Prepare, m).is_some());
                    for (m, d) in left {
                        ensure!(*d >= last, "sweep left {m:?} (deadline {d}) but rolled back one due at {last}");
                    }
                }
            }
            Op::Extend { m, ms } => {
                let deadline = now.saturating_add(*ms);
                let r = extend(&mut self.s, m, deadline);
                let flight = was.get(m).is_some_and(|c| c.flight);
                ensure!(r == flight.then_some(deadline), "extend {m:?} answered {r:?}");
                if flight {
                    ensure!(self.s.score(Set::Prepare, m) == Some(deadline as f64), "extend: the new deadline");
                }
            }
            Op::Cancel(msgs) => {
                let n = cancel(&mut self.s, msgs);
                let gone: Vec<_> = distinct(msgs).into_iter().filter(|m| was.get(*m).is_some_and(|c| c.waiting)).collect();
                ensure!(n == gone.len() as u64, "cancel removed {n}, expected {}", gone.len());
                for m in gone {
                    want.get_mut(m).expect("followed").waiting = false;
                }
            }
            Op::Purge { dead } => {
                let n = purge(&mut self.s, *dead);
                let sets: &[Set] = if *dead {
                    &[Set::Store, Set::Park, Set::Hold, Set::Prepare, Set::Dead]
                } else {
                    &[Set::Store, Set::Park, Set::Hold, Set::Prepare]
                };
                let expected: u64 = sets.iter().map(|&set| before.len(set)).sum();
                ensure!(n == expected, "purge removed {n}, expected {expected}");
                for c in want.values_mut() {
                    (c.waiting, c.flight) = (false, false);
                    c.dead &= !*dead;
                }
                ensure!(self.s.policy == before.policy && self.s.last_id == before.last_id, "purge keeps the policy and the names given");
                if !*dead {
                    ensure!(self.s.members(Set::Dead) == before.members(Set::Dead) && self.s.dead == before.dead, "purge keeps the dead");
                }
                let notes = self.s.journal.len() - before.journal.len();
                let keep = before.journal_len().min(expected) as usize;
                ensure!(notes == keep, "purge noted {notes}, expected {keep}");
            }
            Op::Drop => {
                let had = drop_queue(&mut self.s);
                self.s.journal.clear();
                let emptied = MemStore { last_id: before.last_id, ..MemStore::default() };
                ensure!(had == (before != MemStore { journal: Vec::new(), ..emptied.clone() }), "drop answered {had}");
                ensure!(self.s == emptied, "drop left {:?}", self.s);
                // Its sequence, deduplication and claim keys go too (core::names).
                self.l = MemLedger::default();
                for c in want.values_mut() {
                    *c = Copies::default();
                }
            }
            Op::Replay(limit) => {
                let n = replay(&mut self.s, now, *limit);
                let dead = before.members(Set::Dead);
                ensure!(n == dead.len().min(*limit) as u64, "replay moved {n} of {} dead", dead.len());
                let back: Vec<&(Vec<u8>, f64)> = dead.iter().filter(|(m, _)| self.s.score(Set::Dead, m).is_none()).collect();
                ensure!(back.len() as u64 == n, "replay: {n} said, {} moved", back.len());
                let last = back.iter().map(|(_, t)| *t).fold(f64::NEG_INFINITY, f64::max);
                for (m, t) in &dead {
                    let c = want.get_mut(m).expect("followed");
                    if self.s.score(Set::Dead, m).is_none() {
                        c.dead = false;
                        c.waiting = true;
                        ensure!(self.s.waiting(m).deliveries == 0, "{m:?}: replay resets the count");
                    } else {
                        ensure!(*t >= last, "replay left {m:?} (died {t}) but moved one that died at {last}");
                    }
                }
            }
            Op::Release(limit) => {
                let n = release_holds(&mut self.s, now, *limit);
                let ended = before.count(Set::Hold, f64::NEG_INFINITY, now as f64) as usize;
                ensure!(n == ended.min(*limit), "released {n} of {ended} ended holds");
            }
            Op::Limits(l) => {
                self.lim = *l;
                self.max_retries = self.max_retries.max(l.retries);
            }
            Op::Clock(t) => self.now = *t,
        }
        self.follow_pins(op, &before);
        let is = self.copies(&self.s);
        for (m, c) in &is {
            ensure!(want[m] == *c, "{m:?} went from {:?} to {c:?}, expected {:?} ({op:?})", was[m], want[m]);
        }
        self.check()
    }

    /// Notes the pins `op` made or ended (the v5 contract): a rollback that leaves a grouped
    /// delivery's message waiting in the delivery's group pins it there; a pin ends when its
    /// message is delivered again (its group is busy then), cancelled or dead, or a push
    /// moves it to another group (or none).
    fn follow_pins(&mut self, op: &Op, before: &MemStore) {
        let s = &self.s;
        let waits_in = |m: &Vec<u8>, g: &Vec<u8>| {
            [Set::Store, Set::Park, Set::Hold].iter().any(|&set| s.score(set, m).is_some()) && s.waiting(m).group.as_ref() == Some(g)
        };
        self.pins.retain(|g, m| waits_in(m, g));
        let (rolled_back, dead): (Vec<&Vec<u8>>, bool) = match op {
            Op::Nack { m, dead, .. } => (vec![m], *dead),
            Op::Sweep(_) => (before.flights.keys().collect(), false),
            _ => (Vec::new(), false),
        };
        for m in rolled_back {
            let died = dead || before.flight(m).deliveries > self.lim.retries;
            let ended = !died && s.score(Set::Prepare, m).is_none() && before.score(Set::Prepare, m).is_some();
            if let Some(g) = before.flight(m).group.filter(|g| ended && waits_in(m, g)) {
                self.pins.insert(g, m.clone());
            }
        }
    }

    /// Checks a push of `msgs` (the contents stored) that answered `r`, and notes their
    /// copies.
    #[allow(clippy::too_many_arguments)]
    fn pushed(
        &self,
        before: &MemStore,
        was: &BTreeMap<Vec<u8>, Copies>,
        want: &mut BTreeMap<Vec<u8>, Copies>,
        mode: PushMode,
        group: &Option<Vec<u8>>,
        msgs: &[Vec<u8>],
        r: Result<PushOutcome, RmqError>,
    ) -> Result<(), String> {
        let expected = self.push_error(before, mode, msgs);
        match r {
            Err(e) => {
                ensure!(expected.as_ref() == Some(&e), "push answered {e:?}, expected {expected:?}");
                ensure!(self.s == *before, "a refused push changed the queue");
            }
            Ok(out) => {
                ensure!(expected.is_none(), "push accepted, expected {expected:?}");
                let fresh = distinct(msgs).into_iter().filter(|m| !was[*m].waiting).count() as u64;
                ensure!(out.added == fresh && out.merged == msgs.len() as u64 - fresh, "push {out:?}: {fresh} new");
                let score = mode.score(self.now).expect("checked") as f64;
                for m in distinct(msgs) {
                    want.get_mut(m).expect("followed").waiting = true;
                    let w = self.s.waiting(m);
                    ensure!(w.group == *group, "{m:?}: the latest push sets the group");
                    let held = before.score(Set::Hold, m).is_some();
                    let old = [Set::Store, Set::Park].iter().find_map(|&set| before.score(set, m));
                    let now_score = [Set::Store, Set::Park, Set::Hold].iter().find_map(|&set| self.s.score(set, m));
                    if held {
                        ensure!(w.held_priority == Some(score), "{m:?}: a held copy takes the latest priority");
                        ensure!(now_score == before.score(Set::Hold, m), "{m:?}: a held copy stays held");
                    } else {
                        let expect = match old {
                            Some(old) if !mode.replaces_waiting() => old,
                            _ => score,
                        };
                        ensure!(now_score == Some(expect), "{m:?}: scored {now_score:?}, expected {expect}");
                    }
                }
            }
        }
        Ok(())
    }

    /// The contents a push with SEQUENCE `prefix` stores, numbered after the last number.
    fn numbered(&self, prefix: Option<&[u8]>, msgs: &[Vec<u8>]) -> Vec<Vec<u8>> {
        match prefix {
            Some(p) => msgs.iter().zip(self.l.last + 1..).map(|(m, n)| sequenced(p, n, m)).collect(),
            None => msgs.to_vec(),
        }
    }

    /// Checks a push with SEQUENCE and/or DEDUP: an empty message is refused; a live
    /// window answers the first push's numbers and note and changes nothing; else the
    /// numbered contents are pushed as any push, the sequence advances by the batch, the
    /// id's record is the push's and at most `PRUNE_PER_PUSH` ended records, earliest end
    /// first, are gone; an error changes nothing.
    #[allow(clippy::too_many_arguments)]
    fn ledger_pushed(
        &mut self,
        before: &MemStore,
        was: &BTreeMap<Vec<u8>, Copies>,
        want: &mut BTreeMap<Vec<u8>, Copies>,
        mode: PushMode,
        group: &Option<Vec<u8>>,
        msgs: &[Vec<u8>],
        prefix: Option<&[u8]>,
        dedup: &Option<DedupOp>,
    ) -> Result<(), String> {
        let (now, lim, had) = (self.now, self.lim, self.l.clone());
        let d = dedup.as_ref().map(|(id, window, note)| Dedup { id, window: *window, note: note.as_deref() });
        let live = d.and_then(|d| had.records.get(d.id)).filter(|r| r.expires > now);
        let stored = self.numbered(prefix, msgs);
        let unchanged = |m: &Model| m.s == *before && m.l == had;
        match ledger_rules::screen(&self.l, d, now, msgs) {
            Err(e) => {
                ensure!(e == RmqError::EmptyMessage && msgs.iter().any(|m| m.is_empty()), "screen answered {e:?}");
                ensure!(unchanged(self), "a refused push changed something");
                return Ok(());
            }
            Ok(Some(dup)) => {
                let seen = live.ok_or("a duplicate without a live window")?;
                let expect: Vec<Entry> =
                    (0..msgs.len()).map(|i| Entry { outcome: Outcome::Duplicate, seq: seen.seq_of(i), note: seen.note.clone() }).collect();
                ensure!(dup == expect, "duplicate answered {dup:?}, expected {expect:?}");
                ensure!(unchanged(self), "a duplicate changed something");
                return Ok(());
            }
            Ok(None) => {
                ensure!(live.is_none() && !msgs.iter().any(|m| m.is_empty()), "screen let {msgs:?} through ({live:?})");
            }
        }
        let r = ledger_rules::push(&mut self.s, &mut self.l, now, &lim, mode, group.as_deref(), prefix, d, msgs, |v| v);
        let first = prefix.map(|_| had.last + 1);
        let r = match r {
            Err(e) => {
                ensure!(self.l == had, "a refused push changed the ledger");
                Err(e)
            }
            Ok((entries, out)) => {
                let mut met = BTreeSet::new();
                let expect: Vec<Entry> = stored
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        let fresh = met.insert(m) && !was[m].waiting;
                        Entry {
                            outcome: if fresh { Outcome::Added } else { Outcome::Merged },
                            seq: first.map(|f| f + i as u64),
                            note: None,
                        }
                    })
                    .collect();
                ensure!(entries == expect, "push answered {entries:?}, expected {expect:?}");
                ensure!(self.l.last == had.last + prefix.map_or(0, |_| msgs.len() as u64), "sequence {} after {}", self.l.last, had.last);
                let mut records = had.records.clone();
                if let Some(d) = d {
                    let mut ended: Vec<(i64, Vec<u8>)> =
                        records.iter().filter(|(_, r)| r.expires <= now).map(|(id, r)| (r.expires, id.clone())).collect();
                    ended.sort();
                    for (_, id) in ended.iter().take(PRUNE_PER_PUSH) {
                        records.remove(id);
                    }
                    let seen = Seen {
                        expires: now.saturating_add(d.window),
                        first_seq: first,
                        count: msgs.len() as u64,
                        note: d.note.map(<[u8]>::to_vec),
                    };
                    records.insert(d.id.to_vec(), seen);
                }
                ensure!(self.l.records == records, "records {:?}, expected {records:?}", self.l.records);
                ensure!(self.l.claims == had.claims, "a push leaves the claims");
                Ok(out)
            }
        };
        self.pushed(before, was, want, mode, group, &stored, r)
    }

    /// Checks RMQ.REDRIVE CLAIM: first up to `count` claims at least `stale` ms old, then
    /// dead messages, oldest death first, each claimed now with its dead record's priority
    /// and group (out of the queue: no longer dead).
    fn claimed(&mut self, before: &MemStore, want: &mut BTreeMap<Vec<u8>, Copies>, count: usize, stale: i64) -> Result<(), String> {
        let (now, had) = (self.now, self.l.clone());
        let taken = ledger_rules::claim(&mut self.s, &mut self.l, now, count, stale);
        let old: Vec<&Vec<u8>> = had.claims.iter().filter(|(_, c)| c.at <= now.saturating_sub(stale)).map(|(m, _)| m).collect();
        let n_old = old.len().min(count);
        let dead = before.members(Set::Dead);
        let n_dead = dead.len().min(count - n_old);
        ensure!(taken.len() == n_old + n_dead, "claimed {}, expected {n_old} stale and {n_dead} dead", taken.len());
        let mut claims = had.claims.clone();
        for (i, (m, c)) in taken.iter().enumerate() {
            let kept = if i < n_old {
                let cl = had.claims.get(m).filter(|_| old.contains(&m)).ok_or(format!("claimed {m:?}: no stale claim"))?;
                (cl.priority, cl.group.clone())
            } else {
                ensure!(
                    before.score(Set::Dead, m).is_some() && self.s.score(Set::Dead, m).is_none(),
                    "claimed {m:?}: not dead before, or still"
                );
                want.get_mut(m).expect("followed").dead = false;
                let d = before.dead(m);
                (d.priority, d.group)
            };
            ensure!(*c == Claim { at: now, priority: kept.0, group: kept.1 }, "claim of {m:?}: {c:?}");
            claims.insert(m.clone(), c.clone());
        }
        if let Some(last) = taken[n_old..].iter().filter_map(|(m, _)| before.score(Set::Dead, m)).reduce(f64::max) {
            for (m, t) in dead.iter().filter(|(m, _)| self.s.score(Set::Dead, m).is_some()) {
                ensure!(*t >= last, "claim left {m:?} (died {t}) but took one that died at {last}");
            }
        }
        ensure!(
            self.l.claims == claims && self.l.records == had.records && self.l.last == had.last,
            "claims {:?}, expected {claims:?}",
            self.l.claims
        );
        Ok(())
    }

    /// The error a push must answer, if any (checked in the order of the contract).
    fn push_error(&self, s: &MemStore, mode: PushMode, msgs: &[Vec<u8>]) -> Option<RmqError> {
        if let Some(holds) = s.kind.or_else(|| kind_of(s)) {
            let inferred_timed = s.kind.is_none() && holds.is_timed() && mode.kind().is_timed();
            if holds != mode.kind() && !inferred_timed {
                return Some(RmqError::KindMismatch { holds, pushed: mode.kind() });
            }
        }
        if mode.score(self.now).is_none() {
            return Some(RmqError::DueTooLate(mode));
        }
        for m in msgs {
            if m.is_empty() {
                return Some(RmqError::EmptyMessage);
            }
            if m.len() as i64 > self.lim.max_message_bytes {
                return Some(RmqError::TooLong(self.lim.max_message_bytes));
            }
        }
        let fresh = distinct(msgs).into_iter().filter(|m| [Set::Store, Set::Park, Set::Hold].iter().all(|&set| s.score(set, m).is_none()));
        let len = self.lim.max_queue_length;
        if len > 0 && s.waiting_len() + fresh.count() as u64 > len as u64 {
            return Some(RmqError::QueueFull(len));
        }
        None
    }

    /// Checks a rollback of `m` (delivered as `f`) that answered `r`, and notes its copies.
    #[allow(clippy::too_many_arguments)]
    fn rolled_back(
        &self,
        before: &MemStore,
        want: &mut BTreeMap<Vec<u8>, Copies>,
        m: &Vec<u8>,
        f: &Flight,
        r: Rollback,
        delay: Option<i64>,
        dead: bool,
    ) -> Result<(), String> {
        let c = want.get_mut(m).expect("followed");
        ensure!(c.flight, "{m:?} rolled back, not in flight");
        c.flight = false;
        let must_die = dead || f.deliveries > self.lim.retries;
        ensure!((r == Rollback::Dead) == must_die, "{m:?}: {r:?} after delivery {} (retries {})", f.deliveries, self.lim.retries);
        if r == Rollback::Dead {
            c.dead = true;
            ensure!(self.s.score(Set::Dead, m) == Some(self.now as f64), "{m:?}: died now");
            return Ok(());
        }
        let merged = c.waiting;
        c.waiting = true;
        ensure!(self.s.waiting(m).deliveries == f.deliveries, "{m:?}: the waiting copy keeps the delivery count");
        if merged {
            let kept = [Set::Store, Set::Park, Set::Hold].iter().find_map(|&set| before.score(set, m));
            let now_score = [Set::Store, Set::Park, Set::Hold].iter().find_map(|&set| self.s.score(set, m));
            ensure!(kept == now_score, "{m:?}: a newer waiting copy keeps its score");
            return Ok(());
        }
        let delay = delay.unwrap_or_else(|| self.lim.backoff(f.deliveries));
        let until = self.now.saturating_add(delay) as f64;
        match self.s.kind {
            Some(Kind::Priority) if delay > 0 => {
                ensure!(self.s.score(Set::Hold, m) == Some(until), "{m:?}: held until {until}");
                ensure!(self.s.waiting(m).held_priority == Some(f.priority.unwrap_or(0.0)), "{m:?}: held with its priority");
            }
            kind => {
                let score = if kind == Some(Kind::Priority) { f.priority.unwrap_or(0.0) } else { until };
                let at = self.s.score(Set::Store, m).or(self.s.score(Set::Park, m));
                ensure!(at == Some(score), "{m:?}: requeued at {at:?}, expected {score}");
            }
        }
        Ok(())
    }

    /// The invariants of a queue at rest.
    pub fn check(&self) -> Result<(), String> {
        let (s, now) = (&self.s, self.now);
        ensure!(s.meta_consistent(), "metadata inconsistent");
        ensure!(s.kind().is_none() == s.is_empty(), "kind iff not empty");
        if s.kind() != Some(Kind::Priority) {
            ensure!(s.len(Set::Hold) == 0, "only priority queues hold");
        }
        let all: BTreeSet<Vec<u8>> = s.sets.iter().flat_map(|set| set.keys().cloned()).collect();
        ensure!(all.is_subset(&self.contents), "a content appeared from nowhere");
        for m in &all {
            let copies = [Set::Store, Set::Park, Set::Hold].iter().filter(|&&set| s.score(set, m).is_some()).count();
            ensure!(copies <= 1, "{m:?}: two waiting copies of one content");
        }
        let mut in_flight_groups: Vec<Vec<u8>> = s.flights.values().filter_map(|f| f.group.clone()).collect();
        in_flight_groups.sort();
        let n = in_flight_groups.len();
        in_flight_groups.dedup();
        ensure!(n == in_flight_groups.len(), "two deliveries of a group in flight");
        let mut busy: Vec<Vec<u8>> = s.busy.keys().cloned().collect();
        busy.sort();
        ensure!(busy == in_flight_groups, "busy groups are exactly those in flight");
        let kind = s.kind.unwrap_or(Kind::Fixed);
        // the v3 contract: a group's later messages wait behind its first. A free group's parked
        // messages all come after a deliverable one of the group in `Store` (its head).
        let deliverable_in = |set, g: &Vec<u8>| -> Vec<f64> {
            let mine = s.members(set).into_iter().filter(|(m, _)| s.waiting(m).group.as_ref() == Some(g));
            mine.filter(|(m, _)| s.score(Set::Prepare, m).is_none()).map(|(_, sc)| sc).collect()
        };
        for g in &self.groups {
            if s.busy.contains_key(g) {
                continue;
            }
            if self.pins.contains_key(g) {
                // the v5 contract: its pinned message goes first, whatever its score (the reference
                // pop checks that nothing else of the group is taken).
                continue;
            }
            let heads = deliverable_in(Set::Store, g);
            for p in deliverable_in(Set::Park, g) {
                ensure!(
                    heads.iter().any(|&h| better(kind, h, p)),
                    "free group {g:?}: parked {p} comes before its messages in Store {heads:?}"
                );
            }
        }
        // What a pop would take now.
        let deliverable = !reference_pop(s, &self.pins, now, 1).is_empty();
        let has = has_deliverable(s, now);
        ensure!(!has || deliverable, "has_deliverable says yes, a pop would take nothing");
        if s.len(Set::Store) + s.len(Set::Hold) < 64 {
            ensure!(has || !deliverable, "has_deliverable says no, a pop would take a message");
        }
        // INFO, by brute force.
        let timed = kind.is_timed();
        let upto = |set| s.members(set).iter().filter(|(_, sc)| *sc <= now as f64).count() as u64;
        let first = |sets: &[Set]| sets.iter().flat_map(|&set| s.members(set)).map(|(_, sc)| sc).reduce(f64::min);
        let ready = if timed { upto(Set::Store) + upto(Set::Park) } else { s.len(Set::Store) + s.len(Set::Park) + upto(Set::Hold) };
        let next_due = if timed { first(&[Set::Store, Set::Park]) } else { first(&[Set::Hold]) };
        let expiry = first(&[Set::Prepare]).map(|d| d as i64);
        let want = Info {
            kind: s.kind(),
            waiting: all.iter().filter(|m| [Set::Store, Set::Park, Set::Hold].iter().any(|&set| s.score(set, m).is_some())).count() as u64,
            ready,
            inflight: s.sets[Set::Prepare as usize].len() as u64,
            dead: s.sets[Set::Dead as usize].len() as u64,
            next_due: next_due.map(|t| t as i64),
            next_expiry: expiry,
        };
        let got = info(s, now);
        ensure!(got == want, "info {got:?}, by brute force {want:?}");
        let hold = first(&[Set::Hold]).map(|t| t as i64);
        ensure!(next_work(s) == [expiry, hold].into_iter().flatten().min(), "next_work");
        // The next due time after now: what a pop does not take yet.
        let set = if timed { Set::Store } else { Set::Hold };
        let after = s.members(set).into_iter().map(|(_, sc)| sc).filter(|sc| *sc > now as f64).reduce(f64::min).map(|t| t as i64);
        let due = next_due_after(s, now);
        ensure!(due == after.filter(|_| s.kind().is_some()), "next_due_after({now}) = {due:?}, expected {after:?}");
        ensure!(due.is_none_or(|t| t > now), "next_due_after({now}) = {due:?} is not after now");
        let p = pending(s, 3);
        ensure!(p.len() as u64 == want.inflight.min(3), "pending lists {}", p.len());
        ensure!(p.windows(2).all(|w| w[0].deadline <= w[1].deadline), "pending is soonest first");
        for e in &p {
            let f = s.flight(&e.message);
            ensure!(e.deliveries == f.deliveries && e.group == f.group, "pending {e:?}");
        }
        Ok(())
    }
}
