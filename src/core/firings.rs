//! The timer's index of schedule firings (RMQ.SCHEDULE): every schedule of every queue by
//! its next planned time, so the timer looks only at the head. An entry may be stale (its
//! schedule replaced, deleted or moved away): the timer checks it against the stored
//! schedule before firing, so the index never needs to be exact, only complete.

use std::collections::BTreeSet;

/// A schedule: its database, queue and name.
pub type ScheduleId = (i32, Vec<u8>, Vec<u8>);

#[derive(Default, Debug)]
pub struct Firings {
    by_time: BTreeSet<(i64, i32, Vec<u8>, Vec<u8>)>,
}

impl Firings {
    /// Notes that schedule `name` of `queue` fires at `t`; true if `t` became the earliest.
    pub fn note(&mut self, db: i32, queue: &[u8], name: &[u8], t: i64) -> bool {
        self.by_time.insert((t, db, queue.to_vec(), name.to_vec())) && self.next() == Some(t)
    }

    /// Forgets the entry of a schedule that was planned at `t`.
    pub fn forget(&mut self, db: i32, queue: &[u8], name: &[u8], t: i64) {
        self.by_time.remove(&(t, db, queue.to_vec(), name.to_vec()));
    }

    pub fn next(&self) -> Option<i64> {
        self.by_time.first().map(|e| e.0)
    }

    /// Takes the earliest entry if it is due at `now`: (planned time, schedule).
    pub fn pop_due(&mut self, now: i64) -> Option<(i64, ScheduleId)> {
        if self.next()? > now {
            return None;
        }
        let (t, db, q, name) = self.by_time.pop_first()?;
        Some((t, (db, q, name)))
    }

    pub fn len(&self) -> usize {
        self.by_time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_time.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_time.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_forgotten_entries_gone() {
        let mut f = Firings::default();
        assert!(f.note(0, b"q", b"a", 100));
        assert!(!f.note(0, b"q", b"b", 150));
        assert!(f.note(1, b"q", b"a", 90), "another db, another schedule");
        assert!(!f.note(1, b"q", b"a", 90), "noted twice is noted once");
        assert_eq!(f.len(), 3);
        f.forget(0, b"q", b"a", 100);
        assert_eq!(f.pop_due(89), None);
        assert_eq!(f.pop_due(1000), Some((90, (1, b"q".to_vec(), b"a".to_vec()))));
        assert_eq!(f.pop_due(149), None);
        assert_eq!(f.pop_due(150), Some((150, (0, b"q".to_vec(), b"b".to_vec()))));
        assert!(f.is_empty());
        f.note(0, b"q", b"a", 5);
        f.clear();
        assert_eq!(f.next(), None);
    }
}
