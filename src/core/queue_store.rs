//! The storage a queue's rules run over: five sorted sets, an index of the waiting
//! messages of groups, and a little metadata per message and per group (busy). `RedisQueue` implements it over real keys, `MemStore` in
//! memory for tests.

use crate::core::journal_entry::Note;
use crate::core::kind::Kind;
use crate::core::policy::{Field, Policy};

/// A queue's sorted sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Set {
    /// `Q`: waiting messages that may be deliverable, by priority or due time.
    Store,
    /// In flight, by lease deadline.
    Prepare,
    /// Dead, by the time they died.
    Dead,
    /// Waiting but held back by their group (behind its head, or while it has a delivery
    /// in flight), scored as in `Store` (and indexed by group: `park`, `best_indexed`).
    Park,
    /// Priority messages held back by a retry delay, by the time the delay ends.
    Hold,
}

/// A message's group (binary-safe).
pub type Group = Vec<u8>;

/// What is kept about a waiting copy besides its score.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waiting {
    /// Deliveries already made (0 for a fresh copy).
    pub deliveries: u32,
    /// The priority of a held copy (in `Hold`, where the score is the release time).
    pub held_priority: Option<f64>,
    pub group: Option<Group>,
}

/// What is kept about an in-flight delivery besides its deadline.
#[derive(Clone, Debug, PartialEq)]
pub struct Flight {
    /// Deliveries so far, this one included (1 on the first).
    pub deliveries: u32,
    /// The priority it was delivered with (priority queues only), restored on rollback.
    pub priority: Option<f64>,
    pub group: Option<Group>,
    /// Its name, when the pop was asked for one (`RMQ.POP ... IDS`): unique for the queue,
    /// so a stale name never ends a later delivery of the same content.
    pub id: Option<u64>,
}

impl Default for Flight {
    fn default() -> Self {
        Flight { deliveries: 1, priority: None, group: None, id: None }
    }
}

/// What is kept about a dead message besides the time it died.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dead {
    /// The priority it last had (priority queues only).
    pub priority: Option<f64>,
    pub group: Option<Group>,
}

/// A group's first indexed message (`Store::best_indexed`).
#[derive(Clone, Debug, PartialEq)]
pub struct Indexed<M> {
    pub m: M,
    /// Its score in `set`.
    pub score: f64,
    /// Where it waits: `Store` (the group's head), `Park`, or `Hold` (a pinned head held
    /// back by a retry delay).
    pub set: Set,
    /// Indexed as the group's pinned head (the v5 contract: its delivery was rolled back, and
    /// nothing of its group goes before it).
    pub pinned: bool,
}

/// Members are the store's own handle on a message (a refcounted Redis string, or bytes in
/// tests) so the logic never copies message bodies.
pub trait Member: Clone + AsRef<[u8]> {}
impl<T: Clone + AsRef<[u8]>> Member for T {}

pub trait Store {
    type M: Member;

    fn len(&self, set: Set) -> u64;
    fn score(&self, set: Set, m: &Self::M) -> Option<f64>;
    /// Inserts or updates the member's score (not for `Park`: see `park`).
    fn add(&mut self, set: Set, m: &Self::M, score: f64);
    /// Adds the member if absent (returns true); if present, sets its score when `replace`
    /// (returns false).
    fn upsert(&mut self, set: Set, m: &Self::M, score: f64, replace: bool) -> bool {
        match self.score(set, m) {
            None => {
                self.add(set, m, score);
                true
            }
            Some(old) => {
                if replace && old != score {
                    self.add(set, m, score);
                }
                false
            }
        }
    }
    /// A hint: `n` members are about to be added to `set` (a store may get ready for them).
    fn will_add(&mut self, _set: Set, _n: usize) {}
    /// Removes the member; returns whether it was there (from `Park`, the set alone: `unpark`
    /// takes it out of the index too).
    fn rem(&mut self, set: Set, m: &Self::M) -> bool;
    /// Members with score in [min, max], ascending (or descending if `rev`), calling `f` on
    /// each until it returns false.
    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(Self::M, f64) -> bool);
    /// How many members have score in [min, max].
    fn count(&self, set: Set, min: f64, max: f64) -> u64;

    /// Parks a waiting message of group `g` with its queue score (indexed, if it was not).
    fn park(&mut self, m: &Self::M, score: f64, g: &[u8]) {
        self.park_keyed(m, score, score, g)
    }
    /// `park`, indexed under `key` (`codec::PINNED` for the group's pinned head, else its
    /// score).
    fn park_keyed(&mut self, m: &Self::M, score: f64, key: f64, g: &[u8]);
    /// Takes a message out of `Park` (and the index); its score, if it was there.
    fn unpark(&mut self, m: &Self::M) -> Option<f64> {
        let score = self.score(Set::Park, m)?;
        self.unpark_scored(m, score);
        Some(score)
    }
    /// Takes a message parked with `score` out of `Park` (and the index).
    fn unpark_scored(&mut self, m: &Self::M, score: f64);
    /// Moves a parked message to `Store` as its group's head (it stays indexed).
    fn unpark_to_head(&mut self, m: &Self::M, score: f64) {
        self.rem(Set::Park, m);
        self.add(Set::Store, m, score);
    }
    /// Indexes a message of group `g` as the group's head (`g` Some), or takes a message
    /// indexed under `score` out of the index (None); returns whether the index changed.
    /// `score` is the message's score in `Store`, or `codec::PINNED` for a pinned head
    /// (which may also wait in `Hold`).
    fn index_head(&mut self, m: &Self::M, score: f64, g: Option<&[u8]>) -> bool;
    /// The indexed message of group `g` that comes first in the group's order (a pinned
    /// head, then the queue's order).
    fn best_indexed(&self, g: &[u8]) -> Option<Indexed<Self::M>>;
    /// Whether group `g` may have indexed messages (a cheaper look than `best_indexed`,
    /// which may say yes for a group that shares its index hash with another).
    fn may_have_indexed(&self, g: &[u8]) -> bool {
        self.best_indexed(g).is_some()
    }
    /// Group `g`'s pinned head, if it has one (`best_indexed`, when pinned); a store may
    /// answer without reading any record when it can tell that nothing of `g` is pinned
    /// (a pop asks for every grouped message it takes).
    fn pinned_head(&self, g: &[u8]) -> Option<Self::M> {
        self.best_indexed(g).filter(|h| h.pinned).map(|h| h.m)
    }

    fn kind(&self) -> Option<Kind>;
    fn set_kind(&mut self, kind: Kind);
    /// Deletes all metadata but the policy (the queue is completely empty).
    fn clear_meta(&mut self);
    /// Empties the queue at once (RMQ.PURGE, RMQ.DROP): every waiting and in-flight message
    /// with its records, the group index and the busy groups, and with `dead` the dead
    /// messages too; the policy, the kind and the delivery names given stay. (A store may
    /// free large sets lazily: the cost is not the queue's length.)
    fn purge_all(&mut self, dead: bool);

    fn waiting(&self, m: &Self::M) -> Waiting;
    /// Sets (Some) or forgets (None, or the default) the waiting copy's metadata.
    fn set_waiting(&mut self, m: &Self::M, w: Option<&Waiting>);
    /// The in-flight delivery's metadata (the default if none was kept).
    fn flight(&self, m: &Self::M) -> Flight;
    /// Sets (Some) or forgets (None) the in-flight metadata; a named delivery's name is
    /// kept with it (`named`) until it is forgotten.
    fn set_flight(&mut self, m: &Self::M, f: Option<&Flight>);
    /// Reserves `n` delivery names and returns the first (the others follow it): each
    /// larger than any the queue gave before.
    fn name_deliveries(&mut self, now: i64, n: u64) -> u64;
    /// The message whose in-flight delivery has name `id`, if one has.
    fn named(&self, id: u64) -> Option<Self::M>;
    /// Reads and forgets the in-flight metadata (the delivery ends).
    fn take_flight(&mut self, m: &Self::M) -> Flight {
        let f = self.flight(m);
        self.set_flight(m, None);
        f
    }
    /// Forgets the in-flight metadata, frees the delivery's group and returns it: all an
    /// ACK needs.
    fn end_flight(&mut self, m: &Self::M) -> Option<Vec<u8>> {
        let group = self.take_flight(m).group;
        if let Some(g) = &group {
            self.set_free(g);
        }
        group
    }
    fn dead(&self, m: &Self::M) -> Dead;
    fn set_dead(&mut self, m: &Self::M, d: Option<&Dead>);

    /// Whether group `g` has a delivery in flight.
    fn busy(&self, g: &[u8]) -> bool;
    /// Marks group `g` busy with in-flight message `m` (the store may keep `g`).
    fn set_busy(&mut self, g: Group, m: &Self::M);
    /// Marks group `g` free (its delivery has ended).
    fn set_free(&mut self, g: &[u8]);
    /// The queue's own settings (empty when it has none).
    fn policy(&self) -> Policy;
    /// Sets or drops the queue's policy; returns whether it had one.
    fn set_policy(&mut self, p: Option<&Policy>) -> bool;

    /// How many events the queue's journal keeps (its policy's `journal`; 0: it keeps
    /// none, and the rules make no `Note`).
    fn journal_len(&self) -> u64 {
        self.policy().get(Field::Journal).unwrap_or(0) as u64
    }
    /// Records one event in the journal (called only while `journal_len` > 0).
    fn note(&mut self, _n: Note<Self::M>) {}

    fn first(&self, set: Set, rev: bool) -> Option<(Self::M, f64)> {
        let mut out = None;
        self.scan(set, f64::NEG_INFINITY, f64::INFINITY, rev, &mut |m, s| {
            out = Some((m, s));
            false
        });
        out
    }

    /// Waiting messages, wherever they are kept.
    fn waiting_len(&self) -> u64 {
        self.len(Set::Store) + self.len(Set::Park) + self.len(Set::Hold)
    }

    fn is_empty(&self) -> bool {
        self.waiting_len() == 0 && self.len(Set::Prepare) == 0 && self.len(Set::Dead) == 0
    }
}
