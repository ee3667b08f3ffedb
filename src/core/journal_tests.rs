//! Unit tests of the journal's notes: which entry each operation makes, and its fields.

#![allow(clippy::cloned_ref_to_slice_refs)]

use crate::core::journal::*;
use crate::core::kind::PushMode;
use crate::core::memstore::MemStore;
use crate::core::policy::{Field, Limits, Policy};
use crate::core::queue_store::Store;
use crate::core::rules;

fn lim() -> Limits {
    Limits::server(1, 30_000, 1 << 20, 0)
}

fn m(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn journaled(n: i64) -> MemStore {
    let mut s = MemStore::default();
    let mut p = Policy::default();
    p.set(Field::Journal, n);
    s.set_policy(Some(&p));
    s
}

/// A note as (event, message, deliveries, id, standing, timer).
type Seen = (Event, String, u32, Option<u64>, Option<Standing>, bool);

/// The notes, and forgets them.
fn take(s: &mut MemStore) -> Vec<Seen> {
    std::mem::take(&mut s.journal)
        .into_iter()
        .map(|n| (n.event, String::from_utf8_lossy(&n.message).into_owned(), n.deliveries, n.id, n.standing, n.timer))
        .collect()
}

fn e(
    ev: Event,
    msg: &str,
    d: u32,
    id: Option<u64>,
    st: Option<Standing>,
    timer: bool,
) -> (Event, String, u32, Option<u64>, Option<Standing>, bool) {
    (ev, msg.to_string(), d, id, st, timer)
}

#[test]
fn off_notes_nothing() {
    let mut s = MemStore::default();
    rules::push(&mut s, 10, &lim(), PushMode::Delay(0), None, &[m("a")]).unwrap();
    rules::pop(&mut s, 10, 1, 100);
    rules::ack(&mut s, &[m("a")]);
    assert!(s.journal.is_empty());
    let mut s = journaled(0);
    rules::push(&mut s, 10, &lim(), PushMode::Delay(0), None, &[m("a")]).unwrap();
    assert!(s.journal.is_empty());
}

#[test]
fn push_pop_ack_and_merges() {
    let mut s = journaled(100);
    rules::push(&mut s, 10, &lim(), PushMode::Delay(5), None, &[m("a"), m("b"), m("a")]).unwrap();
    assert_eq!(
        take(&mut s),
        vec![
            e(Event::Pushed, "a", 0, None, Some(Standing::Due(15)), false),
            e(Event::Pushed, "b", 0, None, Some(Standing::Due(15)), false),
            e(Event::Merged, "a", 0, None, Some(Standing::Due(15)), false),
        ]
    );
    // Latest wins for DELAY: the merge's entry shows the new due time.
    rules::push(&mut s, 20, &lim(), PushMode::Delay(0), None, &[m("b")]).unwrap();
    assert_eq!(take(&mut s), vec![e(Event::Merged, "b", 0, None, Some(Standing::Due(20)), false)]);
    let p = rules::pop_named(&mut s, 30, 2, 1000);
    let id = p.first_id.unwrap();
    assert_eq!(take(&mut s), vec![e(Event::Popped, "a", 1, Some(id), None, false), e(Event::Popped, "b", 1, Some(id + 1), None, false)]);
    assert_eq!(rules::ack(&mut s, &[m("b"), m("b"), m("zz")]), 1);
    assert_eq!(take(&mut s), vec![e(Event::Acked, "b", 1, Some(id + 1), None, false)]);
    // An in-flight content pushed again: a new waiting copy, deliveries 0.
    rules::push(&mut s, 40, &lim(), PushMode::Delay(0), None, &[m("a")]).unwrap();
    assert_eq!(take(&mut s), vec![e(Event::Pushed, "a", 0, None, Some(Standing::Due(40)), false)]);
}

#[test]
fn nack_expiry_and_dead() {
    let mut s = journaled(100);
    rules::push(&mut s, 0, &lim(), PushMode::Priority(7), None, &[m("a"), m("b")]).unwrap();
    take(&mut s);
    rules::pop(&mut s, 0, 2, 100);
    take(&mut s);
    // NACK with a delay on a priority queue: held, its priority kept.
    assert_eq!(rules::nack(&mut s, 10, &lim(), &m("a"), Some(50), false), Some(rules::Rollback::Requeued));
    assert_eq!(take(&mut s), vec![e(Event::Nacked, "a", 1, None, Some(Standing::Priority(7.0)), false)]);
    // The lease of b runs out: expired, the clock's doing.
    let out = rules::sweep(&mut s, 200, &lim(), 10);
    assert_eq!(out.expired, 1);
    assert_eq!(take(&mut s), vec![e(Event::Expired, "b", 1, None, Some(Standing::Priority(7.0)), true)]);
    rules::pop(&mut s, 300, 2, 400);
    take(&mut s);
    // Past its retries (1): dead, one entry, not also nacked or expired.
    assert_eq!(rules::nack(&mut s, 310, &lim(), &m("a"), None, false), Some(rules::Rollback::Dead));
    assert_eq!(take(&mut s), vec![e(Event::Dead, "a", 2, None, None, false)]);
    let out = rules::sweep(&mut s, 500, &lim(), 10);
    assert_eq!(out.dead, 1);
    assert_eq!(take(&mut s), vec![e(Event::Dead, "b", 2, None, None, true)]);
    assert_eq!(rules::replay(&mut s, 600, 10), 2);
    assert_eq!(
        take(&mut s),
        vec![
            e(Event::Replayed, "a", 0, None, Some(Standing::Priority(7.0)), false),
            e(Event::Replayed, "b", 0, None, Some(Standing::Priority(7.0)), false)
        ]
    );
    assert_eq!(rules::cancel(&mut s, &[m("a"), m("nope")]), 1);
    assert_eq!(take(&mut s), vec![e(Event::Cancelled, "a", 0, None, None, false)]);
}

#[test]
fn rollback_into_a_newer_copy_shows_that_copy() {
    let mut s = journaled(100);
    rules::push(&mut s, 0, &lim(), PushMode::At(1_000_000_000_000), None, &[m("a")]).unwrap();
    rules::pop(&mut s, 1_000_000_000_000, 1, 1_000_000_100_000);
    rules::push(&mut s, 1_000_000_000_001, &lim(), PushMode::At(1_000_000_000_500), None, &[m("a")]).unwrap();
    take(&mut s);
    rules::nack(&mut s, 1_000_000_000_002, &lim(), &m("a"), Some(5), false);
    assert_eq!(take(&mut s), vec![e(Event::Nacked, "a", 1, None, Some(Standing::Due(1_000_000_000_500)), false)]);
}

#[test]
fn purge_notes_at_most_the_journal() {
    let mut s = journaled(2);
    purged(&mut s, [(m("a"), 0), (m("b"), 3), (m("c"), 1)]);
    assert_eq!(take(&mut s), vec![e(Event::Purged, "a", 0, None, None, false), e(Event::Purged, "b", 3, None, None, false)]);
    let mut off = MemStore::default();
    purged(&mut off, [(m("a"), 0)]);
    assert!(off.journal.is_empty());
}

#[test]
fn fields_cut_long_messages_and_hash_them() {
    let long = vec![b'x'; 300];
    let n = Note { event: Event::Popped, message: long.clone(), deliveries: 2, id: Some(9), standing: None, timer: false };
    let f = fields(&n, b"worker-1");
    let names: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, ["event", "message", "sha1", "deliveries", "by", "id"]);
    assert_eq!(f[1].1.to_bytes(), vec![b'x'; MESSAGE_BYTES]);
    // sha1 of 300 'x' (printf 'x%.0s' {1..300} | sha1sum).
    assert_eq!(f[2].1.to_bytes(), b"02fd68253071f895718c8d41f7ff665abe1a6290".to_vec());
    assert_eq!((f[3].1.to_bytes(), f[4].1.to_bytes(), f[5].1.to_bytes()), (b"2".to_vec(), b"worker-1".to_vec(), b"9".to_vec()));
    assert!(same_message(&long, &f[1].1.to_bytes(), Some(&f[2].1.to_bytes())));
    let mut other = long.clone();
    other[299] = b'y';
    assert!(!same_message(&other, &f[1].1.to_bytes(), Some(&f[2].1.to_bytes())));
    assert!(!same_message(&long, &f[1].1.to_bytes(), None));
    // Exactly 256 bytes: kept whole, no sha1.
    let exact = vec![b'z'; MESSAGE_BYTES];
    assert_eq!(cut(&exact), (&exact[..], None));
    assert!(same_message(&exact, &exact, None));
    let timer = Note { event: Event::Expired, message: m("a"), deliveries: 1, id: None, standing: Some(Standing::Due(5)), timer: true };
    let f = fields(&timer, b"7");
    assert_eq!(
        f.iter().map(|(k, v)| (*k, v.to_bytes())).collect::<Vec<_>>(),
        vec![
            ("event", b"expired".to_vec()),
            ("message", b"a".to_vec()),
            ("deliveries", b"1".to_vec()),
            ("by", b"timer".to_vec()),
            ("due", b"5".to_vec())
        ]
    );
    let p = Note { standing: Some(Standing::Priority(-2.5)), timer: false, ..timer };
    assert_eq!(fields(&p, b"7").last().map(|(k, v)| (*k, v.to_bytes())), Some(("priority", b"-2.5".to_vec())));
    assert_eq!(Event::ALL.map(Event::name).len(), 10);
}
