//! A queue's deliveries in flight with a group, in memory. the v3 contract lets this live here: a
//! pop and an ACK then change a set here instead of a field of `meta{Q}` (a write and its
//! replication each), and an ACK learns the delivery's group here instead of reading its
//! record. The keys stay the truth: a queue's state is filled from its in-flight records
//! (`prepare{Q}` and each delivery's group in `meta{Q}`) the first time a command asks, and
//! forgotten whenever its keys may have changed without the module (RESTORE/MIGRATE,
//! RENAME, MOVE, COPY, DEL, any write by another command) or all of them may have (a load,
//! a promotion, SWAPDB, FLUSH), so it is filled again from what the keys then hold.

use std::sync::{LazyLock, Mutex, MutexGuard};

use hashbrown::hash_table::{Entry, HashTable};

use crate::core::fnv::FnvMap;
use crate::core::keyed::Keyed;
use crate::core::shrink::{self, shrink};
use crate::ffi::rstr::Shared;

/// What is known of a queue's grouped deliveries in flight: a group is busy while one of
/// its deliveries is. Each delivery is found by its group and, through the hashes kept in
/// `by_message`, by its message (hashbrown's tables: each key hashed once, and an entry
/// found again by its stored hash, which std's sets cannot). `M`: the message's handle
/// (the Redis string itself, a reference, no copy; bytes in the unit tests).
pub struct Flights<M = Shared> {
    /// Each grouped delivery in flight (those with a group record), under its group's hash.
    by_group: HashTable<Delivery<M>>,
    /// Each of them again: its message's hash and its group's (where it is in `by_group`).
    by_message: HashTable<(u64, u64)>,
    keyed: Keyed,
}

impl<M> Default for Flights<M> {
    fn default() -> Self {
        Flights { by_group: HashTable::new(), by_message: HashTable::new(), keyed: Keyed::default() }
    }
}

/// A grouped delivery in flight: its message, and its group as the pop decoded it (no
/// allocation of its own).
struct Delivery<M> {
    message: M,
    group: Vec<u8>,
    group_hash: u64,
}

impl<M: AsRef<[u8]>> Flights<M> {
    /// Whether group `g` has a delivery in flight.
    pub fn busy(&self, g: &[u8]) -> bool {
        // Nothing in flight (a push into an idle queue): no hashing.
        !self.by_group.is_empty() && self.by_group.find(self.keyed.hash_one(g), |d| d.group == g).is_some()
    }

    /// Delivery `m` of group `g` is in flight (nothing changes if `m` is known).
    pub fn start(&mut self, m: M, g: Vec<u8>) {
        let (hm, hg) = (self.keyed.hash_one(m.as_ref()), self.keyed.hash_one(g.as_slice()));
        let by_group = &self.by_group;
        let is_m = |&(h, at): &(u64, u64)| h == hm && by_group.find(at, |d| d.message.as_ref() == m.as_ref()).is_some();
        if let Entry::Vacant(v) = self.by_message.entry(hm, is_m, |&(h, _)| h) {
            v.insert((hm, hg));
            self.by_group.insert_unique(hg, Delivery { message: m, group: g, group_hash: hg }, |d| d.group_hash);
        }
    }

    /// Delivery `m` ends: its group, if it had one (free unless another of its deliveries
    /// is in flight).
    pub fn end(&mut self, m: &[u8]) -> Option<Vec<u8>> {
        let hm = self.keyed.hash_one(m);
        let by_group = &self.by_group;
        let is_m = |&(h, at): &(u64, u64)| h == hm && by_group.find(at, |d| d.message.as_ref() == m).is_some();
        let ((_, hg), _) = self.by_message.find_entry(hm, is_m).ok()?.remove();
        let (d, _) = self.by_group.find_entry(hg, |d| d.message.as_ref() == m).ok()?.remove();
        // Both hold one entry per delivery: a long-lived queue's burst gives its room back.
        if let Some(n) = shrink::target(self.by_group.len(), self.by_group.capacity()) {
            self.by_group.shrink_to(n, |d| d.group_hash);
            self.by_message.shrink_to(n, |&(h, _)| h);
        }
        Some(d.group)
    }
}

/// The state of each queue known, per database.
type Known = FnvMap<Vec<u8>, Vec<(i32, Flights)>>;
static KNOWN: LazyLock<Mutex<Known>> = LazyLock::new(Mutex::default);

fn known() -> MutexGuard<'static, Known> {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner())
}

fn state<'a>(k: &'a mut Known, q: &[u8], db: i32) -> Option<&'a mut Flights> {
    k.get_mut(q)?.iter_mut().find(|(d, _)| *d == db).map(|(_, s)| s)
}

/// Runs `f` on queue `q`'s state in `db` if it is known.
pub fn if_known<R>(q: &[u8], db: i32, f: impl FnOnce(&mut Flights) -> R) -> Option<R> {
    state(&mut known(), q, db).map(f)
}

/// Runs `f` on queue `q`'s state in `db`, filled by `fill` if not known.
pub fn with<R>(q: &[u8], db: i32, fill: impl FnOnce() -> Flights, f: impl FnOnce(&mut Flights) -> R) -> R {
    // The usual case: one lock and one lookup, nothing allocated.
    if let Some(s) = state(&mut known(), q, db) {
        return f(s);
    }
    // Filled outside the lock: it reads the keys.
    let filled = fill();
    let mut k = known();
    let dbs = k.entry(q.to_vec()).or_default();
    let at = dbs.iter().position(|(d, _)| *d == db).unwrap_or_else(|| {
        dbs.push((db, filled));
        dbs.len() - 1
    });
    f(&mut dbs[at].1)
}

/// Queue `q`'s keys in `db` may have changed without the module.
pub fn forget(q: &[u8], db: i32) {
    let mut k = known();
    if let Some(dbs) = k.get_mut(q) {
        dbs.retain(|(d, _)| *d != db);
        if dbs.is_empty() {
            k.remove(q);
            shrink(&mut *k);
        }
    }
}

/// Every queue's keys may have changed (a load, a promotion, SWAPDB, FLUSH).
pub fn forget_all() {
    let mut k = known();
    k.clear();
    shrink(&mut *k);
}

#[cfg(test)]
mod tests {
    use super::Flights;

    #[test]
    fn a_group_is_busy_while_a_delivery_of_it_is_in_flight() {
        let mut f = Flights::<Vec<u8>>::default();
        f.start(b"m1".to_vec(), b"g".to_vec());
        f.start(b"m2".to_vec(), b"h".to_vec());
        // A message known already keeps its delivery.
        f.start(b"m1".to_vec(), b"other".to_vec());
        assert!(f.busy(b"g") && f.busy(b"h") && !f.busy(b"other") && !f.busy(b"m1"));
        assert_eq!(f.end(b"m1"), Some(b"g".to_vec()));
        assert!(!f.busy(b"g") && f.busy(b"h"));
        assert_eq!(f.end(b"m1"), None);
        // Two deliveries of one group (data written by hand): busy till both end.
        f.start(b"m3".to_vec(), b"h".to_vec());
        assert_eq!(f.end(b"m2"), Some(b"h".to_vec()));
        assert!(f.busy(b"h"));
        assert_eq!(f.end(b"m3"), Some(b"h".to_vec()));
        assert!(!f.busy(b"h"));
        // Empty names and bytes split anywhere stay apart.
        f.start(b"".to_vec(), b"ab".to_vec());
        f.start(b"a".to_vec(), b"b".to_vec());
        assert_eq!((f.end(b"a"), f.end(b"")), (Some(b"b".to_vec()), Some(b"ab".to_vec())));
    }
}
