//! Which queues of each topic have waiting messages on this node, in memory, so RMQ.TPOP
//! never walks empty queues. Kept up to date by every change a command or the timer makes
//! (`delivery::Opened`), rebuilt by the keyspace scan after a load, a promotion, a SWAPDB
//! or a FLUSH, and told about keys that arrive by RESTORE, RENAME, MOVE or COPY. An entry
//! may outlive its queue (deleted by hand, say): TPOP then finds it empty and drops it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::core::fnv::FnvMap;
use crate::core::route;
use crate::core::shrink::shrink;
use crate::ffi::rstr::Shared;

#[derive(Default)]
struct Topic {
    /// Slots whose queue has waiting messages, each with its queue's name once a TPOP has
    /// made it (kept: every TPOP would make it anew).
    slots: BTreeMap<u32, Option<Shared>>,
    /// Where the next TPOP starts: the slot after the last one served. Shared with the
    /// TPOP under way (`Resume`), which sets it once it knows, without a second lookup.
    next: Arc<AtomicU32>,
}

/// Topics by name, then by database (so a lookup needs no copy of the name).
type Topics = FnvMap<Vec<u8>, Vec<(i32, Topic)>>;
static TOPICS: LazyLock<Mutex<Topics>> = LazyLock::new(Mutex::default);

fn topics() -> MutexGuard<'static, Topics> {
    TOPICS.lock().unwrap_or_else(|e| e.into_inner())
}

fn in_db(dbs: &mut [(i32, Topic)], db: i32) -> Option<&mut Topic> {
    dbs.iter_mut().find(|(d, _)| *d == db).map(|(_, t)| t)
}

/// Records whether queue `q` of db `db` has waiting messages (nothing if `q` is not a
/// topic's slot).
pub fn note(db: i32, q: &[u8], waiting: bool) {
    let Some((topic, slot)) = route::split(q) else { return };
    let mut all = topics();
    if waiting {
        let dbs = match all.get_mut(topic) {
            Some(dbs) => dbs,
            None => all.entry(topic.to_vec()).or_default(),
        };
        match in_db(dbs, db) {
            Some(t) => {
                t.slots.entry(slot).or_default();
            }
            None => dbs.push((db, Topic { slots: BTreeMap::from([(slot, None)]), next: Arc::default() })),
        }
    } else if let Some(dbs) = all.get_mut(topic) {
        if let Some(t) = in_db(dbs, db) {
            t.slots.remove(&slot);
        }
        dbs.retain(|(_, t)| !t.slots.is_empty());
        if dbs.is_empty() {
            all.remove(topic);
            shrink(&mut *all);
        }
    }
}

/// Where a topic's next TPOP starts, for the TPOP under way to set.
pub struct Resume(Arc<AtomicU32>);

impl Resume {
    /// Slot `slot` of a topic of `slots` was served last.
    pub fn after(&self, slot: u32, slots: u32) {
        self.0.store((slot + 1) % slots, Ordering::Relaxed);
    }
}

/// Calls `each` with the slots below `slots` of `topic` with waiting messages, in the order
/// this TPOP tries them: from the one after the last one served, round the circle; and
/// with the place of the slot's queue name (for the caller to fill). Returns where the
/// next TPOP will start, for this one to set; None if the topic has no busy queue.
pub fn rotation(db: i32, topic: &[u8], slots: u32, mut each: impl FnMut(u32, &mut Option<Shared>)) -> Option<Resume> {
    let mut all = topics();
    let t = all.get_mut(topic).and_then(|dbs| in_db(dbs, db))?;
    let start = t.next.load(Ordering::Relaxed) % slots;
    // Open-ended ranges: one search of the tree each, where `start..slots` takes two.
    for (&slot, name) in t.slots.range_mut(start..).take_while(|(&s, _)| s < slots) {
        each(slot, name);
    }
    for (&slot, name) in t.slots.range_mut(..start) {
        each(slot, name);
    }
    Some(Resume(Arc::clone(&t.next)))
}

/// The slots below `slots` of `topic` with waiting messages.
pub fn busy_slots(db: i32, topic: &[u8], slots: u32) -> Vec<u32> {
    let mut all = topics();
    all.get_mut(topic).and_then(|dbs| in_db(dbs, db)).map_or_else(Vec::new, |t| t.slots.range(..slots).map(|(&s, _)| s).collect())
}

/// Forgets everything (before a keyspace scan rebuilds it).
pub fn clear() {
    let mut all = topics();
    all.clear();
    shrink(&mut *all);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rotation(db: i32, topic: &[u8], slots: u32) -> Vec<u32> {
        let mut out = Vec::new();
        super::rotation(db, topic, slots, |s, _| out.push(s));
        out
    }

    fn served(db: i32, topic: &[u8], slots: u32, slot: u32) {
        if let Some(r) = super::rotation(db, topic, slots, |_, _| {}) {
            r.after(slot, slots);
        }
    }

    #[test]
    fn rotation_starts_after_the_last_slot_served() {
        clear();
        for slot in [1, 3, 6] {
            note(9, &route::queue_name(b"t", slot), true);
        }
        note(9, b"t_8", true);
        note(9, b"not-a-slot", true);
        assert_eq!(rotation(9, b"t", 8), vec![1, 3, 6], "slot 8 is beyond an 8-slot topic");
        assert_eq!(rotation(9, b"t", 8), vec![1, 3, 6], "nothing served: the same start");
        served(9, b"t", 8, 1);
        assert_eq!(rotation(9, b"t", 8), vec![3, 6, 1]);
        served(9, b"t", 8, 3);
        assert_eq!(rotation(9, b"t", 8), vec![6, 1, 3]);
        served(9, b"t", 8, 6);
        assert_eq!(rotation(9, b"t", 8), vec![1, 3, 6], "round the circle");
        served(9, b"t", 8, 3);
        served(9, b"u", 8, 3);
        assert_eq!(rotation(9, b"t", 4), vec![1, 3], "fewer slots asked");
        note(9, b"t_3", false);
        assert_eq!(busy_slots(9, b"t", 16), vec![1, 6, 8]);
        assert_eq!(rotation(9, b"u", 8), Vec::<u32>::new());
        assert_eq!(rotation(8, b"t", 8), Vec::<u32>::new(), "per database");
        for slot in [1, 6, 8] {
            note(9, &route::queue_name(b"t", slot), false);
        }
        assert!(topics().is_empty());
    }
}
