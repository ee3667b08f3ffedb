//! The storage a queue's logic runs over: three sorted sets and a little metadata per
//! message. `RedisQueue` implements it over real keys, `MemStore` in memory for tests.

use crate::core::kind::Kind;

/// The three sorted sets of a queue: `Q`, `prepare{Q}`, `dead{Q}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Set {
    Store,
    Prepare,
    Dead,
}

/// What is kept about an in-flight delivery besides its deadline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flight {
    /// Deliveries so far, this one included (1 on the first).
    pub deliveries: u32,
    /// The priority it was delivered with (priority queues only), restored on rollback.
    pub priority: Option<f64>,
}

impl Default for Flight {
    fn default() -> Self {
        Flight { deliveries: 1, priority: None }
    }
}

/// Members are the store's own handle on a message (a refcounted Redis string, or bytes in
/// tests) so the logic never copies message bodies.
pub trait Member: Clone + AsRef<[u8]> {}
impl<T: Clone + AsRef<[u8]>> Member for T {}

pub trait Store {
    type M: Member;

    fn len(&self, set: Set) -> u64;
    fn score(&self, set: Set, m: &Self::M) -> Option<f64>;
    /// Inserts or updates the member's score.
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
    /// Removes the member; returns whether it was there.
    fn rem(&mut self, set: Set, m: &Self::M) -> bool;
    /// Members with score in [min, max], ascending (or descending if `rev`), calling `f` on
    /// each until it returns false.
    fn scan(&self, set: Set, min: f64, max: f64, rev: bool, f: &mut dyn FnMut(Self::M, f64) -> bool);
    /// How many members have score in [min, max].
    fn count(&self, set: Set, min: f64, max: f64) -> u64;

    fn kind(&self) -> Option<Kind>;
    fn set_kind(&mut self, kind: Kind);
    /// Deletes all metadata (the queue is completely empty).
    fn clear_meta(&mut self);

    /// Deliveries already made of the waiting copy (0 for a fresh one).
    fn waiting_deliveries(&self, m: &Self::M) -> u32;
    fn set_waiting_deliveries(&mut self, m: &Self::M, n: u32);
    /// The in-flight delivery's metadata (the default if none was kept).
    fn flight(&self, m: &Self::M) -> Flight;
    /// Sets (Some) or forgets (None) the in-flight metadata.
    fn set_flight(&mut self, m: &Self::M, f: Option<Flight>);
    /// Reads and forgets the in-flight metadata (the delivery ends).
    fn take_flight(&mut self, m: &Self::M) -> Flight {
        let f = self.flight(m);
        self.set_flight(m, None);
        f
    }
    /// The priority a dead priority-queue message last had.
    fn dead_priority(&self, m: &Self::M) -> Option<f64>;
    fn set_dead_priority(&mut self, m: &Self::M, p: Option<f64>);

    fn first(&self, set: Set, rev: bool) -> Option<(Self::M, f64)> {
        let mut out = None;
        self.scan(set, f64::NEG_INFINITY, f64::INFINITY, rev, &mut |m, s| {
            out = Some((m, s));
            false
        });
        out
    }

    fn is_empty(&self) -> bool {
        self.len(Set::Store) == 0 && self.len(Set::Prepare) == 0 && self.len(Set::Dead) == 0
    }
}
