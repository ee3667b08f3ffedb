//! The journal (the v5 contract): what happened to each message, one entry per event and message,
//! kept by a queue whose policy sets `journal n` (in the Stream `journal{Q}`, written by
//! `storage::journal_stream`). Here, pure: which entry (`journal_entry::Note`) an operation
//! produces, made by the rules at each event through `Store::note`, only while the queue
//! keeps a journal (`Store::journal_len`), with the state after the event read from the store.

pub use crate::core::journal_entry::*;
use crate::core::kind::Kind;
use crate::core::queue_store::{Flight, Set, Store};

/// Where the waiting copy of `m` stands, if it has one.
pub fn standing<S: Store>(s: &S, kind: Kind, m: &S::M) -> Option<Standing> {
    let score = s.score(Set::Store, m).or_else(|| s.score(Set::Park, m));
    if kind != Kind::Priority {
        return score.map(|t| Standing::Due(t as i64));
    }
    let held = || s.score(Set::Hold, m).map(|_| s.waiting(m).held_priority.unwrap_or(0.0));
    score.or_else(held).map(Standing::Priority)
}

/// The note of an event that leaves `m` waiting (pushed, merged, replayed) in a queue of
/// `kind`: its copy's delivery count and standing.
pub fn waiting<S: Store>(s: &S, kind: Kind, event: Event, m: &S::M) -> Note<S::M> {
    Note { event, message: m.clone(), deliveries: s.waiting(m).deliveries, id: None, standing: standing(s, kind, m), timer: false }
}

/// The note of a delivery that ended (acked) or was taken (popped), from its record.
pub fn delivery<M: Clone>(event: Event, m: &M, f: &Flight) -> Note<M> {
    Note { event, message: m.clone(), deliveries: f.deliveries, id: f.id, standing: None, timer: false }
}

/// The note of a delivery `f` of `m` rolled back (`nacked`, or `expired` by the clock): to
/// dead, or waiting again (maybe merged into a newer copy: its standing).
pub fn rolled_back<S: Store>(s: &S, kind: Kind, m: &S::M, f: &Flight, dead: bool, expiry: bool) -> Note<S::M> {
    if dead {
        return Note { event: Event::Dead, timer: expiry, ..delivery(Event::Dead, m, f) };
    }
    let event = if expiry { Event::Expired } else { Event::Nacked };
    Note { event, standing: standing(s, kind, m), timer: expiry, ..delivery(event, m, f) }
}

/// The notes of a push: for each message in the batch, `pushed` if its first mention made
/// a new waiting copy (`fresh`: the push added one in its turn), else `merged`; each with the
/// copy's state after the batch.
pub fn pushed<S: Store>(s: &mut S, kind: Kind, msgs: &[S::M], fresh: &[bool]) {
    for (m, &new) in msgs.iter().zip(fresh) {
        let n = waiting(s, kind, if new { Event::Pushed } else { Event::Merged }, m);
        s.note(n);
    }
}

/// The notes of the deliveries a pop took (`got`: message and count; named from `first_id`
/// on, in order).
pub fn popped<S: Store>(s: &mut S, got: &[(S::M, u32)], first_id: Option<u64>) {
    for (i, (m, deliveries)) in got.iter().enumerate() {
        let id = first_id.map(|f| f + i as u64);
        s.note(Note { event: Event::Popped, message: m.clone(), deliveries: *deliveries, id, standing: None, timer: false });
    }
}

/// For RMQ.PURGE: notes `purged` for each message it removed (with the delivery count its
/// copy had), at most as many as the journal keeps (it would keep no more). Call it with
/// the removed messages after the removal; it does nothing when the queue keeps no journal.
pub fn purged<S: Store>(s: &mut S, removed: impl IntoIterator<Item = (S::M, u32)>) {
    let keep = s.journal_len();
    for (m, deliveries) in removed.into_iter().take(keep.min(usize::MAX as u64) as usize) {
        s.note(Note { event: Event::Purged, message: m, deliveries, id: None, standing: None, timer: false });
    }
}
