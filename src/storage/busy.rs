//! A queue's deliveries in flight with a group, in memory. SPEC v3 lets this live here: a
//! pop and an ACK then change a set here instead of a field of `meta{Q}` (a write and its
//! replication each), and an ACK learns the delivery's group here instead of reading its
//! record. The keys stay the truth: a queue's state is filled from its in-flight records
//! (`prepare{Q}` and each delivery's group in `meta{Q}`) the first time a command asks, and
//! forgotten whenever its keys may have changed without the module (RESTORE/MIGRATE,
//! RENAME, MOVE, COPY, DEL, any write by another command) or all of them may have (a load,
//! a promotion, SWAPDB, FLUSH), so it is filled again from what the keys then hold.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::fnv::FnvMap;

/// The hasher of group names and messages, chosen by whoever pushes: keyed with a random
/// seed per process (from the OS) and per set, so no one can choose names that collide.
/// aHash, not std's SipHash-1-3: as resistant to such floods (its claim), and a fifth of
/// the cost on short names.
type Keyed = ahash::RandomState;

/// What is known of a queue's grouped deliveries in flight.
#[derive(Default)]
pub struct Flights {
    /// Groups with a delivery in flight.
    pub busy: HashSet<Vec<u8>, Keyed>,
    /// Each grouped delivery in flight (those with a group record), found by its message.
    pub groups: HashSet<Delivery, Keyed>,
}

/// A grouped delivery in flight: its message then its group, in one allocation (each
/// delivery stores and frees one, not two).
pub struct Delivery {
    both: Box<[u8]>,
    /// The message's length.
    split: usize,
}

impl Delivery {
    pub fn new(m: &[u8], g: &[u8]) -> Delivery {
        Delivery { both: [m, g].concat().into(), split: m.len() }
    }

    fn message(&self) -> &[u8] {
        &self.both[..self.split]
    }

    /// The group, in the same allocation (moved to its start).
    pub fn into_group(self) -> Vec<u8> {
        let mut v = self.both.into_vec();
        v.drain(..self.split);
        v
    }
}

// Found by its message: hashed and compared as the message's bytes are (`Borrow`'s rule).
impl Borrow<[u8]> for Delivery {
    fn borrow(&self) -> &[u8] {
        self.message()
    }
}

impl Hash for Delivery {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.message().hash(state);
    }
}

impl PartialEq for Delivery {
    fn eq(&self, other: &Delivery) -> bool {
        self.message() == other.message()
    }
}

impl Eq for Delivery {}

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
        }
    }
}

/// Every queue's keys may have changed (a load, a promotion, SWAPDB, FLUSH).
pub fn forget_all() {
    known().clear();
}
