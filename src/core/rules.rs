//! The queue's rules, over any `Store`, with the clock passed in: push and merge per kind,
//! pop order, the never-twice-in-flight rules (per content and per group), ack, rollback
//! with retries, backoff and dead letters, lease changes, replay and the read-only views.
//!
//! Groups without a scan (the v3 contract): a group's later messages are *parked* (`Set::Park`,
//! indexed by group) from their push on, behind its *head*, its first deliverable waiting
//! message, the only one kept in `Store` (indexed with them, so the group's first indexed
//! message is its head when it is in `Store`: no record per group); while the group has a
//! delivery in flight, all of them are parked. A push that comes before the
//! head takes its place; when the group's delivery ends, its best parked message goes back
//! as the new head. So a pop never walks past a held-back message, and a group is consumed
//! one message at a time in the queue's order. A message of a busy group that a pop finds
//! in `Store` anyway (data of an older version, which kept an idle group's messages there)
//! is parked then, a bounded number per pop. A waiting copy whose content is in flight
//! stays in `Store` without heading its group, and pops skip it; there are at most as many
//! as deliveries in flight.
//!
//! Order through retries (the v5 contract): a grouped message whose delivery is rolled back becomes
//! its group's head again, *pinned*: indexed under `codec::PINNED`, before any other key,
//! so it stays first whatever its score (its due time after a retry delay, or a push that
//! comes first), and a held one (`Hold`, priority) heads its group from there, nothing of
//! the group in `Store` meanwhile. The pin ends with its waiting copy (popped, cancelled,
//! or moved to another group by a push); a delivery of it rolled back again pins it again.
//! Nothing is read or written for it on any other path: the pin is the index member.

use hashbrown::HashTable;

use crate::core::codec::{self, PINNED};
use crate::core::error::{Result, RmqError};
use crate::core::journal;
use crate::core::keyed::Keyed;
use crate::core::kind::{Kind, PushMode, MIN_AT};
use crate::core::policy::Limits;
use crate::core::queue_store::{Dead, Flight, Indexed, Set, Store, Waiting};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct PushOutcome {
    pub added: u64,
    pub merged: u64,
}

#[derive(Debug, PartialEq)]
pub struct Popped<M> {
    /// Each message taken, with its delivery count.
    pub got: Vec<(M, u32)>,
    /// Messages passed over because their group had a delivery in flight: parked by this
    /// pop, or held back behind a message it took.
    pub group_waits: u64,
    /// The pop stopped at `PARK_PER_POP` parked messages: more may be deliverable.
    pub cut: bool,
    /// A named pop's first delivery name: the i-th message taken has name first_id + i.
    pub first_id: Option<u64>,
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

/// Where a waiting copy is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Store,
    Park,
    Hold,
}

/// Where the waiting copy of `m` is, if it has one.
fn place_of<S: Store>(s: &S, m: &S::M) -> Option<Place> {
    if s.score(Set::Store, m).is_some() {
        Some(Place::Store)
    } else if s.score(Set::Park, m).is_some() {
        Some(Place::Park)
    } else if s.score(Set::Hold, m).is_some() {
        Some(Place::Hold)
    } else {
        None
    }
}

/// Whether message `a` scored `sa` comes before `b` scored `sb` in their group: in the
/// group index's order (the queue's, equal scores by content), which `best_indexed` follows.
fn before(kind: Kind, a: &[u8], sa: f64, b: &[u8], sb: f64) -> bool {
    (codec::order_key(kind, sa), a) < (codec::order_key(kind, sb), b)
}

/// Puts a waiting message where it belongs (the v3 contract: a group's later messages are held
/// back behind its first, so `Q` holds at most one deliverable message per group): parked
/// while its group is busy or its first indexed message (its head, or a parked one about
/// to go back) comes first; else in `Store` as the group's head, the old head parked
/// behind it. A copy whose content is in flight is not deliverable and heads nothing: it
/// waits in `Store` (pops skip it), out of the index, without holding the group back.
fn insert<S: Store>(s: &mut S, m: &S::M, score: f64, group: Option<&[u8]>) {
    let Some(g) = group else { return s.add(Set::Store, m, score) };
    if s.busy(g) {
        return s.park(m, score, g);
    }
    if s.score(Set::Prepare, m).is_some() {
        return s.add(Set::Store, m, score);
    }
    let kind = kind_of(s).unwrap_or(Kind::Fixed);
    match s.best_indexed(g) {
        Some(f) if f.pinned || !before(kind, m.as_ref(), score, f.m.as_ref(), f.score) => s.park(m, score, g),
        first => {
            park_head(s, first, g);
            s.add(Set::Store, m, score);
            s.index_head(m, score, Some(g));
        }
    }
}

/// The group's head in `Store`, if `first` is one, waits behind a new head, parked.
fn park_head<S: Store>(s: &mut S, first: Option<Indexed<S::M>>, g: &[u8]) {
    if let Some(Indexed { m: h, score: hs, set: Set::Store, pinned }) = first {
        s.rem(Set::Store, &h);
        s.park_keyed(&h, hs, if pinned { PINNED } else { hs }, g);
    }
}

/// the v5 contract: a grouped message whose delivery was rolled back waits as its group's pinned
/// head until it is acked, cancelled or dead: nothing of its group goes before it, not
/// even a message pushed later that comes first. Held back by a retry delay till `until`
/// (priority: in `Hold`), the whole group waits. Parked while the group is still busy (a
/// second delivery of older data) or another pinned head is first. Its waiting record is
/// written.
fn pin<S: Store>(s: &mut S, m: &S::M, score: f64, g: &[u8], until: Option<f64>) {
    let first = s.best_indexed(g);
    let behind = first.as_ref().is_some_and(|f| f.pinned) || s.busy(g);
    match until {
        Some(t) => {
            if !behind {
                park_head(s, first, g);
            }
            s.add(Set::Hold, m, t);
            s.index_head(m, PINNED, Some(g));
        }
        None if behind => s.park_keyed(m, score, PINNED, g),
        None => {
            park_head(s, first, g);
            s.add(Set::Store, m, score);
            s.index_head(m, PINNED, Some(g));
        }
    }
}

/// Takes the waiting copy of `m`, kept with `score`, out of the group index; returns
/// whether it was indexed, and whether as its group's pinned head (tried second: a head
/// that is not pinned, the usual case, costs one removal).
fn unindex<S: Store>(s: &mut S, m: &S::M, score: f64) -> (bool, bool) {
    if s.index_head(m, score, None) {
        (true, false)
    } else {
        let pinned = s.index_head(m, PINNED, None);
        (pinned, pinned)
    }
}

/// Keeps a group that is not busy with its first deliverable message in `Store` as its
/// head: after its delivery ends, or its head left `Store` or its group, or a member's
/// score changed.
fn refresh<S: Store>(s: &mut S, g: &[u8]) {
    if !s.busy(g) {
        bring_back(s, g);
    }
}

/// `refresh` for a group known not to be busy: while its first indexed message is parked,
/// it goes back to `Store` as the head; one whose content is in flight goes back too but
/// heads nothing (it leaves the index), and the next follows.
fn bring_back<S: Store>(s: &mut S, g: &[u8]) {
    while let Some(Indexed { m, score, set: Set::Park, pinned }) = s.best_indexed(g) {
        s.unpark_to_head(&m, score);
        if s.score(Set::Prepare, &m).is_none() {
            break;
        }
        s.index_head(&m, if pinned { PINNED } else { score }, None);
    }
}

/// Adds a new waiting copy with its metadata.
fn add_waiting<S: Store>(s: &mut S, m: &S::M, score: f64, w: Waiting) {
    s.set_waiting(m, Some(&w));
    insert(s, m, score, w.group.as_deref());
}

/// Takes the waiting copy of `m` out of where it is; returns its place, its score and
/// whether it was its group's pinned head.
fn take_waiting<S: Store>(s: &mut S, m: &S::M) -> Option<(Place, f64, bool)> {
    let place = place_of(s, m)?;
    let set = match place {
        Place::Store => Set::Store,
        Place::Park => Set::Park,
        Place::Hold => Set::Hold,
    };
    let score = s.score(set, m)?;
    s.rem(set, m);
    // If it headed its group or was parked (a held copy is indexed only when pinned).
    let pinned = match place {
        Place::Hold => s.index_head(m, PINNED, None),
        _ => unindex(s, m, score).1,
    };
    Some((place, score, pinned))
}

/// The queue's kind: as stored, or, if its metadata was lost (`meta{Q}` deleted, or `Q`
/// renamed without it) while messages remain, inferred from them: holds, priorities kept
/// with in-flight or dead messages, or waiting scores that cannot be Unix ms times say
/// `priority`; else `fixed` (a timed kind: range and fixed pop alike, and a push of either
/// timed kind is accepted and stored).
pub fn kind_of<S: Store>(s: &S) -> Option<Kind> {
    if let Some(k) = s.kind() {
        return Some(k);
    }
    if s.is_empty() {
        return None;
    }
    let untimed = |set| s.first(set, false).is_some_and(|(_, sc)| sc < MIN_AT as f64);
    let prepare_priority = s.first(Set::Prepare, false).is_some_and(|(m, _)| s.flight(&m).priority.is_some());
    let dead_priority = s.first(Set::Dead, false).is_some_and(|(m, _)| s.dead(&m).priority.is_some());
    let priority = s.len(Set::Hold) > 0 || untimed(Set::Store) || untimed(Set::Park) || prepare_priority || dead_priority;
    Some(if priority { Kind::Priority } else { Kind::Fixed })
}

/// RMQ.PUSH: validates the whole batch first (kind, sizes, queue length) so an error
/// changes nothing, then adds or merges each message. With `group`, each message joins
/// it; without, a merged copy leaves its group (the latest push sets the group).
pub fn push<S: Store>(s: &mut S, now: i64, lim: &Limits, mode: PushMode, group: Option<&[u8]>, msgs: &[S::M]) -> Result<PushOutcome> {
    let kind = mode.kind();
    let stored = s.kind();
    // Metadata outlives a completely empty queue only when its keys were deleted by hand
    // around `meta{Q}`. the contract ends the kind there: once the batch is valid, it is cleared as
    // `tidy` would have (the policy stays) and this push sets the kind anew.
    let mut stale = false;
    if let Some(holds) = stored.or_else(|| kind_of(s)) {
        let inferred_timed = stored.is_none() && holds.is_timed() && kind.is_timed();
        if holds != kind && !inferred_timed {
            if !s.is_empty() {
                return Err(RmqError::KindMismatch { holds, pushed: kind });
            }
            stale = true;
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
        let mut fresh: Vec<&[u8]> = msgs.iter().filter(|m| place_of(s, m).is_none()).map(|m| m.as_ref()).collect();
        fresh.sort_unstable();
        fresh.dedup();
        if s.waiting_len() + fresh.len() as u64 > lim.max_queue_length as u64 {
            return Err(RmqError::QueueFull(lim.max_queue_length));
        }
    }
    if stale {
        s.clear_meta();
    }
    if stored.is_none() || stale {
        s.set_kind(kind);
    }
    // For the journal, `out.added` before each message: it made a new waiting copy (a
    // first mention without one) if its turn added one.
    let mut added_before = (s.journal_len() > 0).then(|| Vec::with_capacity(msgs.len() + 1));
    let mut out = PushOutcome::default();
    let none_held = s.len(Set::Park) == 0 && s.len(Set::Hold) == 0;
    for m in msgs {
        if let Some(a) = added_before.as_mut() {
            a.push(out.added);
        }
        let (parked, held) = if none_held { (None, None) } else { (s.score(Set::Park, m), s.score(Set::Hold, m)) };
        if parked.is_none() && held.is_none() && group.is_none() {
            // The common case in one lookup: new, or waiting in `Store`.
            if s.upsert(Set::Store, m, score, false) {
                out.added += 1;
            } else {
                out.merged += 1;
                merge_into_store(s, m, score, mode.replaces_waiting());
            }
            continue;
        }
        let mut w = s.waiting(m);
        let old_group = std::mem::replace(&mut w.group, group.map(<[u8]>::to_vec));
        if held.is_some() {
            // Held back by a retry delay: it stays held until the same time, with the latest
            // priority and group (written only if they change: WATCH holds otherwise).
            out.merged += 1;
            if w.held_priority != Some(score) || old_group.as_deref() != group {
                w.held_priority = Some(score);
                s.set_waiting(m, Some(&w));
            }
            // Moved to another group, it heads its old one no more.
            if let Some(old) = old_group.as_deref().filter(|&o| Some(o) != group) {
                if s.index_head(m, PINNED, None) {
                    refresh(s, old);
                }
            }
            continue;
        }
        let same_group = old_group.as_deref() == group;
        if let Some(old) = parked.or_else(|| s.score(Set::Store, m)) {
            if same_group && (!mode.replaces_waiting() || score == old) {
                // The push changes neither its score nor its group: no write.
                out.merged += 1;
                continue;
            }
        }
        match take_waiting(s, m) {
            None => {
                out.added += 1;
                add_waiting(s, m, score, Waiting { deliveries: 0, held_priority: None, group: w.group });
            }
            Some((_, old, pinned)) => {
                out.merged += 1;
                let new = if mode.replaces_waiting() { score } else { old };
                match group.filter(|_| pinned && same_group) {
                    // Still in its group: still its pinned head.
                    Some(g) => {
                        s.set_waiting(m, Some(&w));
                        pin(s, m, new, g, None);
                    }
                    None => add_waiting(s, m, new, w),
                }
                // The copy may have left its group, or now rank behind a parked member.
                for g in old_group.as_deref().into_iter().chain(group) {
                    refresh(s, g);
                }
            }
        }
    }
    if let Some(mut a) = added_before {
        a.push(out.added);
        let fresh: Vec<bool> = a.windows(2).map(|w| w[1] > w[0]).collect();
        journal::pushed(s, kind_of(s).unwrap_or(kind), msgs, &fresh);
    }
    Ok(out)
}

/// A push without a group merged into the waiting copy in `Store`: the score is replaced
/// if the kind says so, and the copy leaves its group, if it had one (the latest push sets
/// the group), and that group keeps its head. (The copy leaves the group index under its
/// old score: the score changes after.)
fn merge_into_store<S: Store>(s: &mut S, m: &S::M, score: f64, replace: bool) {
    let mut w = s.waiting(m);
    let old_group = w.group.take();
    if old_group.is_some() {
        s.set_waiting(m, Some(&w));
        if let Some(old) = s.score(Set::Store, m) {
            unindex(s, m, old);
        }
    }
    if replace {
        s.upsert(Set::Store, m, score, true);
    }
    if let Some(g) = old_group {
        refresh(s, &g);
    }
}

/// The score range a pop may take from the store, and its direction.
fn deliverable_range(kind: Kind, now: i64) -> (f64, f64, bool) {
    if kind.is_timed() {
        (f64::NEG_INFINITY, now as f64, false)
    } else {
        (f64::NEG_INFINITY, f64::INFINITY, true)
    }
}

/// Moves up to `limit` priority messages whose retry delay has ended (earliest end first)
/// back to waiting; returns how many. A pop releases a bounded number so that a million
/// holds ending together never stall one command: the timer releases the rest in small
/// steps (see `next_work`).
pub fn release_holds<S: Store>(s: &mut S, now: i64, limit: usize) -> usize {
    if s.len(Set::Hold) == 0 || limit == 0 {
        return 0;
    }
    let mut ended: Vec<S::M> = Vec::new();
    s.scan(Set::Hold, f64::NEG_INFINITY, now as f64, false, &mut |m, _| {
        ended.push(m);
        ended.len() < limit
    });
    for m in &ended {
        s.rem(Set::Hold, m);
        let mut w = s.waiting(m);
        let priority = w.held_priority.take().unwrap_or(0.0);
        match w.group.clone().filter(|_| s.index_head(m, PINNED, None)) {
            // A pinned head goes on heading its group, now deliverable.
            Some(g) => {
                s.set_waiting(m, Some(&w));
                pin(s, m, priority, &g, None);
            }
            None => add_waiting(s, m, priority, w),
        }
    }
    ended.len()
}

/// Holds a pop releases at most before it takes messages.
pub const RELEASE_PER_POP: usize = 1024;

/// Messages a pop parks at most. Since groups are held back from their push on, a pop
/// meets a message of a busy group in `Store` only in data written before that (a v2
/// queue) or when a copy whose content was in flight became deliverable beside its group's
/// head: each is parked once, and a pop that meets more than this many stops there and
/// leaves the rest to the next (`Popped::cut`), so no pop's work grows with a backlog.
pub const PARK_PER_POP: usize = 256;

/// A group a pop holds (see `pop`): where its name is, in the messages taken or parked.
struct Held {
    hash: u64,
    parked: bool,
    at: usize,
}

fn held_group<'a, M>(h: &Held, picked: &'a [(M, f64, Waiting)], parked: &'a [(M, f64, Vec<u8>)]) -> &'a [u8] {
    if h.parked {
        &parked[h.at].2
    } else {
        picked[h.at].2.group.as_deref().unwrap_or_default()
    }
}

/// RMQ.POP: moves up to `count` deliverable messages to prepare with `deadline`; returns
/// each with its delivery count. A waiting copy whose group is busy (or already taken by
/// this pop) is parked (at most `PARK_PER_POP`); one whose content is in flight is skipped.
pub fn pop<S: Store>(s: &mut S, now: i64, count: usize, deadline: i64) -> Popped<S::M> {
    pop_with(s, now, count, deadline, false)
}

/// RMQ.POP ... IDS: `pop`, each delivery named (`Popped::first_id`).
pub fn pop_named<S: Store>(s: &mut S, now: i64, count: usize, deadline: i64) -> Popped<S::M> {
    pop_with(s, now, count, deadline, true)
}

fn pop_with<S: Store>(s: &mut S, now: i64, count: usize, deadline: i64, named: bool) -> Popped<S::M> {
    let mut out = Popped { got: Vec::new(), group_waits: 0, cut: false, first_id: None };
    (out.group_waits, out.cut, out.first_id) = pop_into(s, now, count, deadline, named, &mut Vec::new(), &mut out.got);
    out
}

/// `pop`, its messages appended to `got`, with `picked` (left empty) for the messages
/// picked: buffers a caller keeps from one pop to the next (a TPOP pops once per queue it
/// visits, and an allocation and its free cost ~250 instructions). Names the deliveries
/// when `named`. Returns `Popped`'s `group_waits`, `cut` and `first_id`.
pub fn pop_into<S: Store>(
    s: &mut S,
    now: i64,
    count: usize,
    deadline: i64,
    named: bool,
    picked: &mut Vec<(S::M, f64, Waiting)>,
    got: &mut Vec<(S::M, u32)>,
) -> (u64, bool, Option<u64>) {
    let (mut group_waits, mut cut) = (0, false);
    let Some(kind) = kind_of(s) else { return (group_waits, cut, None) };
    release_holds(s, now, RELEASE_PER_POP);
    let (min, max, rev) = deliverable_range(kind, now);
    picked.clear();
    picked.reserve(count.min(64));
    // Set aside: behind a busy group, and (`behind_pin` of them) behind their group's pinned
    // head; one vector for both (a second one to drop cost every pop ~24 instructions).
    let mut parked: Vec<(S::M, f64, Vec<u8>)> = Vec::new();
    let mut behind_pin = 0;
    // Groups this pop took a message of or found busy, each looked up in the store once:
    // found by its keyed hash (names are the pushers'), its name where the message taken
    // or parked keeps it (no copy). The hasher is seeded at the first group met: a pop of
    // ungrouped messages does not pay for it.
    let (mut keyed, mut held) = (None, HashTable::<Held>::new());
    s.scan(Set::Store, min, max, rev, &mut |m, score| {
        let mut w = s.waiting(&m);
        let group = w.group.as_deref().map(|g| (g, keyed.get_or_insert_with(Keyed::new).hash_one(g)));
        if let Some((g, hash)) = group {
            let is_g = |h: &Held| h.hash == hash && held_group(h, picked, &parked) == g;
            let known = held.find(hash, is_g).is_some();
            if known || s.busy(g) {
                if !known {
                    held.insert_unique(hash, Held { hash, parked: true, at: parked.len() }, |h| h.hash);
                }
                parked.push((m, score, w.group.take().unwrap_or_default()));
                cut = parked.len() - behind_pin >= PARK_PER_POP;
                return !cut;
            }
        }
        if s.score(Set::Prepare, &m).is_none() {
            if let Some((g, hash)) = group {
                // A group whose pinned head waits (the v5 contract) delivers nothing else: a copy
                // found in `Store` beside it (its content was in flight, or older data) is
                // parked behind it, and the pop goes on to take the head in its turn.
                if s.pinned_head(g).is_some_and(|h| h.as_ref() != m.as_ref()) {
                    parked.push((m, score, w.group.take().unwrap_or_default()));
                    behind_pin += 1;
                    cut = parked.len() >= PARK_PER_POP;
                    return !cut;
                }
                held.insert_unique(hash, Held { hash, parked: false, at: picked.len() }, |h| h.hash);
            }
            picked.push((m, score, w));
        }
        picked.len() < count
    });
    // Each message taken of a group leaves the index: it headed its group; or it was found
    // in `Store` without heading it (a copy whose content was in flight, or older data),
    // and then the group's head, if it has one in `Store`, waits behind this delivery,
    // parked. (Before the parking below: till then a group's head is its first indexed.)
    for (m, score, w) in picked.iter() {
        if let Some(g) = &w.group {
            if !unindex(s, m, *score).0 {
                let first = s.best_indexed(g);
                park_head(s, first, g);
            }
        }
    }
    group_waits = (parked.len() - behind_pin) as u64;
    for (m, score, g) in parked.iter() {
        s.rem(Set::Store, m);
        s.park(m, *score, g);
    }
    let some_parked = s.len(Set::Park) > 0;
    s.will_add(Set::Prepare, picked.len());
    let first_id = (named && !picked.is_empty()).then(|| s.name_deliveries(now, picked.len() as u64));
    let mut next_id = first_id;
    let took_from = got.len();
    got.extend(picked.drain(..).map(|(m, score, w)| {
        s.rem(Set::Store, &m);
        if w != Waiting::default() {
            s.set_waiting(&m, None);
        }
        s.add(Set::Prepare, &m, deadline as f64);
        let priority = (kind == Kind::Priority).then_some(score);
        let id = next_id;
        next_id = next_id.map(|i| i + 1);
        let f = Flight { deliveries: w.deliveries + 1, priority, group: w.group, id };
        if let Some(g) = &f.group {
            // The group's next messages wait behind this delivery now (held back at
            // their push, they are passed over here: counted once per delivery).
            group_waits += (some_parked && s.may_have_indexed(g)) as u64;
        }
        if f != Flight::default() {
            s.set_flight(&m, Some(&f));
        }
        // The group read from the waiting copy is the one the store keeps (no copy).
        if let Some(g) = f.group {
            s.set_busy(g, &m);
        }
        (m, f.deliveries)
    }));
    if s.journal_len() > 0 {
        journal::popped(s, &got[took_from..], first_id);
    }
    (group_waits, cut, first_id)
}

/// The message whose delivery named `id` is in flight (RMQ.ACKID, NACKID, EXTENDID); None
/// once that delivery has ended, whatever became of its content since.
pub fn named<S: Store>(s: &S, id: u64) -> Option<S::M> {
    let m = s.named(id)?;
    (s.score(Set::Prepare, &m).is_some() && s.flight(&m).id == Some(id)).then_some(m)
}

/// The earliest lease deadline of the queue.
pub fn next_expiry<S: Store>(s: &S) -> Option<i64> {
    s.first(Set::Prepare, false).map(|(_, d)| d as i64)
}

/// When the timer next has work on the queue: a lease to roll back or a hold to release.
pub fn next_work<S: Store>(s: &S) -> Option<i64> {
    let hold = s.first(Set::Hold, false).map(|(_, t)| t as i64);
    [next_expiry(s), hold].into_iter().flatten().min()
}

/// Whether a pop would find a message now, looking at no more than a few dozen waiting
/// messages (read-only: nothing is parked). For accounting a pop cut short by a rate limit.
pub fn has_deliverable<S: Store>(s: &S, now: i64) -> bool {
    const LOOK: usize = 64;
    let Some(kind) = kind_of(s) else { return false };
    let (min, max, rev) = deliverable_range(kind, now);
    let (mut seen, mut found) = (0, false);
    let mut look = |m: S::M, _| {
        seen += 1;
        // A group whose pinned head waits delivers nothing else (a copy beside it is parked).
        let behind_pin = |g: &[u8]| s.pinned_head(g).is_some_and(|h| h.as_ref() != m.as_ref());
        let free = s.waiting(&m).group.is_none_or(|g| !s.busy(&g) && !behind_pin(&g));
        found = free && s.score(Set::Prepare, &m).is_none();
        !found && seen < LOOK
    };
    // A hold that ended is released by the pop, but parked if its group is busy.
    let mut go_on = true;
    if kind == Kind::Priority {
        s.scan(Set::Hold, f64::NEG_INFINITY, now as f64, false, &mut |m, sc| {
            go_on = look(m, sc);
            go_on
        });
    }
    if go_on {
        s.scan(Set::Store, min, max, rev, &mut look);
    }
    found
}

/// When the next waiting message comes due (timed kinds) or out of its retry delay
/// (priority), if later than `now`: the time a blocked consumer must be woken at.
pub fn next_due_after<S: Store>(s: &S, now: i64) -> Option<i64> {
    let set = if kind_of(s)?.is_timed() { Set::Store } else { Set::Hold };
    let mut due = None;
    // A pop now takes scores up to `now as f64`: start just above it. (`now + 1` as a
    // double is `now` again from 2^53 on, and a score due now is not "after".)
    s.scan(set, (now as f64).next_up(), f64::INFINITY, false, &mut |_, sc| {
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

/// A delivery has ended: its group is free, and the group's best parked message may go.
fn end_delivery<S: Store>(s: &mut S, group: Option<&[u8]>) {
    if let Some(g) = group {
        s.set_free(g);
        bring_back(s, g);
    }
}

/// RMQ.ACK: ends the in-flight deliveries; returns how many were in flight.
pub fn ack<S: Store>(s: &mut S, msgs: &[S::M]) -> u64 {
    let mut n = 0;
    let journaled = s.journal_len() > 0;
    for m in msgs {
        if s.rem(Set::Prepare, m) {
            // Its record, read before the delivery ends (only for the journal: an ACK
            // needs no read).
            if journaled {
                let f = s.flight(m);
                s.note(journal::delivery(journal::Event::Acked, m, &f));
            }
            // The delivery's group is free again: its next message may go.
            if let Some(g) = s.end_flight(m) {
                bring_back(s, &g);
            }
            n += 1;
        }
    }
    tidy(s);
    n
}

/// Fails one in-flight delivery (NACK, or a lease run out): to dead if `dead` or its retries
/// are used up, else back to waiting after `delay` ms (or the queue's backoff). The caller
/// has checked that `m` is in flight. `kind` is the queue's, read while `m` was in flight
/// (a queue written by ZADD has no stored kind, and its delivery's record may be all that
/// says "priority").
fn roll_back<S: Store>(s: &mut S, now: i64, lim: &Limits, kind: Kind, m: &S::M, delay: Option<i64>, dead: bool) -> Rollback {
    let f = s.take_flight(m);
    s.rem(Set::Prepare, m);
    if dead || f.deliveries > lim.retries {
        end_delivery(s, f.group.as_deref());
        s.add(Set::Dead, m, now as f64);
        let d = Dead { priority: (kind == Kind::Priority).then(|| f.priority.unwrap_or(0.0)), group: f.group };
        // A content already dead dies again: the record is its latest death's (even none).
        s.set_dead(m, Some(&d).filter(|d| **d != Dead::default()));
        return Rollback::Dead;
    }
    // The delivery's group is free of it, and the message heads it again (`pin`) rather
    // than the group's next message.
    if let Some(g) = &f.group {
        s.set_free(g);
    }
    if place_of(s, m).is_some() {
        // A newer waiting copy keeps its own score and group and inherits the count; in the
        // delivery's group, it is the rolled-back message and heads it.
        let mut w = s.waiting(m);
        w.deliveries = f.deliveries;
        s.set_waiting(m, Some(&w));
        match f.group.as_deref().filter(|&g| w.group.as_deref() == Some(g)) {
            Some(g) => {
                if let Some((_, score, _)) = take_waiting(s, m) {
                    pin(s, m, score, g, None);
                }
            }
            None => {
                if let Some(g) = &f.group {
                    refresh(s, g);
                }
            }
        }
        return Rollback::Requeued;
    }
    let delay = delay.unwrap_or_else(|| lim.backoff(f.deliveries));
    let until = now.saturating_add(delay) as f64;
    let mut w = Waiting { deliveries: f.deliveries, held_priority: None, group: f.group };
    let score = match kind {
        Kind::Priority => f.priority.unwrap_or(0.0),
        _ => until,
    };
    let held = (kind == Kind::Priority && delay > 0).then_some(until);
    if held.is_some() {
        w.held_priority = Some(score);
    }
    match (w.group.clone(), held) {
        (Some(g), _) => {
            s.set_waiting(m, Some(&w));
            pin(s, m, score, &g, held);
        }
        (None, Some(t)) => {
            s.set_waiting(m, Some(&w));
            s.add(Set::Hold, m, t);
        }
        (None, None) => add_waiting(s, m, score, w),
    }
    Rollback::Requeued
}

/// RMQ.NACK: None if `m` was not in flight.
pub fn nack<S: Store>(s: &mut S, now: i64, lim: &Limits, m: &S::M, delay: Option<i64>, dead: bool) -> Option<Rollback> {
    s.score(Set::Prepare, m)?;
    let f = (s.journal_len() > 0).then(|| s.flight(m));
    let kind = kind_of(s).unwrap_or(Kind::Fixed);
    let r = roll_back(s, now, lim, kind, m, delay, dead);
    if let Some(f) = f {
        let n = journal::rolled_back(s, kind, m, &f, r == Rollback::Dead, false);
        s.note(n);
    }
    tidy(s);
    Some(r)
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
    let journaled = !expired.is_empty() && s.journal_len() > 0;
    // Read before the first rollback (see `roll_back`), and only if there is one.
    let kind = expired.first().and_then(|_| kind_of(s)).unwrap_or(Kind::Fixed);
    for m in &expired {
        out.expired += 1;
        let f = journaled.then(|| s.flight(m));
        let r = roll_back(s, now, lim, kind, m, None, false);
        if r == Rollback::Dead {
            out.dead += 1;
        }
        if let Some(f) = f {
            let n = journal::rolled_back(s, kind, m, &f, r == Rollback::Dead, true);
            s.note(n);
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
    let journaled = s.journal_len() > 0;
    for m in msgs {
        let w = s.waiting(m);
        if let Some((place, _, pinned)) = take_waiting(s, m) {
            s.set_waiting(m, None);
            if journaled {
                let e = journal::Event::Cancelled;
                s.note(journal::Note { event: e, message: m.clone(), deliveries: w.deliveries, id: None, standing: None, timer: false });
            }
            // The group's head went (a pinned one may have been held): its next heads it.
            if let (true, Some(g)) = (place == Place::Store || pinned, &w.group) {
                refresh(s, g);
            }
            n += 1;
        }
    }
    tidy(s);
    n
}

/// RMQ.REPLAY: moves up to `limit` dead messages, oldest death first, back to waiting with
/// the delivery count reset and the group they had; a content already waiting merges into
/// the waiting copy, which keeps its score and group (it is the newer).
pub fn replay<S: Store>(s: &mut S, now: i64, limit: usize) -> u64 {
    let dead = oldest_dead(s, limit);
    let kind = kind_of(s).unwrap_or(Kind::Fixed);
    let journaled = !dead.is_empty() && s.journal_len() > 0;
    for m in &dead {
        s.rem(Set::Dead, m);
        let d = s.dead(m);
        s.set_dead(m, None);
        if place_of(s, m).is_some() {
            let mut w = s.waiting(m);
            w.deliveries = 0;
            s.set_waiting(m, Some(&w));
        } else {
            let score = if kind == Kind::Priority { d.priority.unwrap_or(0.0) } else { now as f64 };
            add_waiting(s, m, score, Waiting { deliveries: 0, held_priority: None, group: d.group });
        }
        if journaled {
            let n = journal::waiting(s, kind, journal::Event::Replayed, m);
            s.note(n);
        }
    }
    dead.len() as u64
}

/// RMQ.REDRIVE CLAIM: takes up to `limit` dead messages out of the queue, oldest death
/// first, with what is kept about each (they are in none of its states any more: the
/// caller keeps them while it moves them elsewhere).
pub fn take_dead<S: Store>(s: &mut S, limit: usize) -> Vec<(S::M, Dead)> {
    let out = oldest_dead(s, limit)
        .into_iter()
        .map(|m| {
            s.rem(Set::Dead, &m);
            let d = s.dead(&m);
            s.set_dead(&m, None);
            (m, d)
        })
        .collect();
    tidy(s);
    out
}

/// Up to `limit` dead messages, oldest death first.
fn oldest_dead<S: Store>(s: &S, limit: usize) -> Vec<S::M> {
    let mut dead: Vec<S::M> = Vec::new();
    if limit > 0 {
        s.scan(Set::Dead, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
            dead.push(m);
            dead.len() < limit
        });
    }
    dead
}

/// What RMQ.PURGE removes: every waiting message (held back included) and every delivery
/// in flight, and with `dead` the dead messages.
fn purged_sets(dead: bool) -> &'static [Set] {
    if dead {
        &[Set::Store, Set::Park, Set::Hold, Set::Prepare, Set::Dead]
    } else {
        &[Set::Store, Set::Park, Set::Hold, Set::Prepare]
    }
}

/// RMQ.PURGE: removes every waiting (held back included) and in-flight message, and with
/// `dead` the dead ones; returns how many. The deliveries it removes have ended (nothing
/// of them is left to roll back or to ack); the policy, the kind's records of what stays
/// and the delivery names given stay. The journal notes `purged` for at most as many
/// removed messages as it keeps, each with its copy's delivery count (0 for a dead one:
/// a dead message keeps none).
pub fn purge<S: Store>(s: &mut S, dead: bool) -> u64 {
    let sets = purged_sets(dead);
    let n = sets.iter().map(|&set| s.len(set)).sum();
    if n == 0 {
        return 0;
    }
    let keep = usize::try_from(s.journal_len()).unwrap_or(usize::MAX);
    let mut removed: Vec<(S::M, Set)> = Vec::new();
    for &set in sets {
        if removed.len() >= keep {
            break;
        }
        s.scan(set, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, _| {
            removed.push((m, set));
            removed.len() < keep
        });
    }
    let noted: Vec<(S::M, u32)> = removed
        .into_iter()
        .map(|(m, set)| {
            let deliveries = match set {
                Set::Prepare => s.flight(&m).deliveries,
                Set::Dead => 0,
                _ => s.waiting(&m).deliveries,
            };
            (m, deliveries)
        })
        .collect();
    s.purge_all(dead);
    journal::purged(s, noted);
    tidy(s);
    n
}

/// RMQ.DROP of what the store keeps: every message in every state, the records and the
/// policy (the queue's other keys are the caller's to delete); returns whether it had any.
/// The delivery names given stay known, so a later queue of the name never gives one
/// again (an ACKID of a former delivery ends nothing).
pub fn drop_queue<S: Store>(s: &mut S) -> bool {
    let had = !s.is_empty() || s.kind().is_some();
    s.purge_all(true);
    let had_policy = s.set_policy(None);
    s.clear_meta();
    had || had_policy
}

/// Whether the content has a waiting copy (a push of it merges).
pub fn waits<S: Store>(s: &S, m: &S::M) -> bool {
    place_of(s, m).is_some()
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
    let kind = kind_of(s);
    let upto = |set| s.count(set, f64::NEG_INFINITY, now as f64);
    let first = |set| s.first(set, false).map(|(_, sc)| sc as i64);
    let (ready, next_due) = match kind {
        Some(k) if k.is_timed() => {
            let due = [first(Set::Store), first(Set::Park)].into_iter().flatten().min();
            (upto(Set::Store) + upto(Set::Park), due)
        }
        _ => (s.len(Set::Store) + s.len(Set::Park) + upto(Set::Hold), first(Set::Hold)),
    };
    Info {
        kind,
        waiting: s.waiting_len(),
        ready,
        inflight: s.len(Set::Prepare),
        dead: s.len(Set::Dead),
        next_due,
        next_expiry: next_expiry(s),
    }
}

/// One in-flight delivery, as RMQ.PENDING shows it.
#[derive(Debug, PartialEq)]
pub struct Pending<M> {
    pub message: M,
    pub deliveries: u32,
    pub deadline: i64,
    pub group: Option<Vec<u8>>,
}

/// RMQ.PENDING: up to `limit` in-flight deliveries, soonest deadline first.
pub fn pending<S: Store>(s: &S, limit: usize) -> Vec<Pending<S::M>> {
    let mut out = Vec::new();
    if limit == 0 {
        return out;
    }
    s.scan(Set::Prepare, f64::NEG_INFINITY, f64::INFINITY, false, &mut |m, deadline| {
        let f = s.flight(&m);
        out.push(Pending { message: m, deliveries: f.deliveries, deadline: deadline as i64, group: f.group });
        out.len() < limit
    });
    out
}
