//! A schedule of queues by time: which queue needs attention first (its earliest lease
//! deadline, or the next due time a blocked consumer waits for). Each queue appears once,
//! at the earliest time noted for it, so the timer looks only at the head: no scan of the
//! keyspace per tick. Times are lower bounds; a queue found with nothing to do is dropped.

use std::collections::BTreeSet;

use crate::core::fnv::FnvMap;
use crate::core::shrink::shrink;

/// A queue: its database and name.
pub type QueueId = (i32, Vec<u8>);

#[derive(Default, Debug)]
pub struct Schedule {
    by_time: BTreeSet<(i64, i32, Vec<u8>)>,
    /// FNV, not SipHash: every pop notes its queue's lease here (a TPOP, each queue's;
    /// SipHash cost ~300 instructions for the two lookups).
    at: FnvMap<i32, FnvMap<Vec<u8>, i64>>,
}

impl Schedule {
    /// Notes that `queue` needs attention at `t`. Keeps the earlier of `t` and what was
    /// noted; returns true if `t` became the schedule's earliest time.
    pub fn note(&mut self, db: i32, queue: &[u8], t: i64) -> bool {
        let per_db = self.at.entry(db).or_default();
        match per_db.get_mut(queue) {
            Some(old) if *old <= t => return false,
            Some(old) => {
                self.by_time.remove(&(*old, db, queue.to_vec()));
                *old = t;
            }
            None => {
                per_db.insert(queue.to_vec(), t);
            }
        }
        self.by_time.insert((t, db, queue.to_vec()));
        self.next() == Some(t)
    }

    /// The earliest noted time.
    pub fn next(&self) -> Option<i64> {
        self.by_time.first().map(|e| e.0)
    }

    /// Takes the queue with the earliest time if that time is <= now.
    pub fn pop_due(&mut self, now: i64) -> Option<QueueId> {
        if self.next()? > now {
            return None;
        }
        let (_, db, q) = self.by_time.pop_first()?;
        if let Some(per_db) = self.at.get_mut(&db) {
            per_db.remove(&q);
            shrink(per_db);
            if per_db.is_empty() {
                self.at.remove(&db);
            }
        }
        Some((db, q))
    }

    /// Forgets `queue` (it has nothing left to look at: no lease, no hold).
    pub fn forget(&mut self, db: i32, queue: &[u8]) {
        let Some(per_db) = self.at.get_mut(&db) else { return };
        if let Some(t) = per_db.remove(queue) {
            self.by_time.remove(&(t, db, queue.to_vec()));
            shrink(per_db);
            if per_db.is_empty() {
                self.at.remove(&db);
                shrink(&mut self.at);
            }
        }
    }

    pub fn clear(&mut self) {
        self.by_time.clear();
        self.at.clear();
        shrink(&mut self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_earliest_per_queue_and_orders_queues() {
        let mut s = Schedule::default();
        assert!(s.note(0, b"a", 100));
        assert!(!s.note(0, b"a", 150), "later time for a noted queue changes nothing");
        assert!(!s.note(0, b"b", 120));
        assert!(s.note(1, b"a", 90), "another db is another queue");
        assert!(s.note(0, b"b", 80), "lowered: now earliest");
        assert_eq!(s.by_time.len(), 3);
        assert_eq!(s.pop_due(79), None);
        assert_eq!(s.pop_due(1000), Some((0, b"b".to_vec())));
        assert_eq!(s.pop_due(1000), Some((1, b"a".to_vec())));
        assert_eq!(s.next(), Some(100));
        assert_eq!(s.pop_due(1000), Some((0, b"a".to_vec())));
        assert_eq!(s.pop_due(1000), None);
        assert!(s.at.is_empty());
        assert!(s.note(0, b"a", 5), "a popped queue can be noted again");
        s.clear();
        assert_eq!(s.next(), None);
    }

    #[test]
    fn a_forgotten_queue_is_gone_and_others_stay() {
        let mut s = Schedule::default();
        s.note(0, b"a", 100);
        s.note(0, b"b", 120);
        s.note(1, b"a", 90);
        s.forget(0, b"a");
        s.forget(0, b"zz");
        s.forget(7, b"a");
        assert_eq!(s.pop_due(1000), Some((1, b"a".to_vec())));
        assert_eq!(s.pop_due(1000), Some((0, b"b".to_vec())));
        assert_eq!(s.pop_due(1000), None, "the forgotten queue is not due");
        s.note(0, b"c", 5);
        s.forget(0, b"c");
        assert!(s.at.is_empty() && s.by_time.is_empty(), "nothing kept for it");
    }
}
