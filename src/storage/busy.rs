//! Which groups of a queue have a delivery in flight. SPEC v3 lets this live in memory:
//! a pop and an ACK then change a set here instead of a field of `meta{Q}` (a write and
//! its replication each). The keys stay the truth: a queue's set is filled from its
//! in-flight records (`prepare{Q}` and each delivery's group in `meta{Q}`) the first time
//! a command asks, and forgotten whenever its keys may have changed without the module
//! (RESTORE/MIGRATE, RENAME, MOVE, COPY, DEL) or all of them may have (a load, a
//! promotion, SWAPDB, FLUSH), so it is filled again from what the keys then hold.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::core::fnv::FnvMap;

/// The busy groups of each queue known, per database. Group names are chosen by whoever
/// pushes: their sets use the standard (keyed) hasher.
type Known = FnvMap<Vec<u8>, Vec<(i32, HashSet<Vec<u8>>)>>;
static KNOWN: LazyLock<Mutex<Known>> = LazyLock::new(Mutex::default);

fn known() -> MutexGuard<'static, Known> {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the busy groups of queue `q` in `db`, filled by `fill` if not known.
pub fn with<R>(q: &[u8], db: i32, fill: impl FnOnce() -> HashSet<Vec<u8>>, f: impl FnOnce(&mut HashSet<Vec<u8>>) -> R) -> R {
    let present = known().get(q).is_some_and(|v| v.iter().any(|(d, _)| *d == db));
    // Filled outside the lock: it reads the keys.
    let filled = (!present).then(fill);
    let mut k = known();
    let dbs = k.entry(q.to_vec()).or_default();
    let at = match dbs.iter().position(|(d, _)| *d == db) {
        Some(i) => i,
        None => {
            dbs.push((db, filled.unwrap_or_default()));
            dbs.len() - 1
        }
    };
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
