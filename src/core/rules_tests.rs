//! Unit and model tests of the queue rules over the in-memory store.

// Tests pass one-message batches as `&[m.clone()]`: clearer than `slice::from_ref`.
#![allow(clippy::cloned_ref_to_slice_refs)]

use crate::core::error::RmqError;
use crate::core::kind::{Kind, PushMode};
use crate::core::memstore::MemStore;
use crate::core::rules::*;
use crate::core::store::{Flight, Set, Store};

const LIM: Limits = Limits { retries: 2, max_message_bytes: 16, max_queue_length: 0 };

fn m(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}
fn ms(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| m(s)).collect()
}
fn names(v: &[(Vec<u8>, u32)]) -> Vec<(String, u32)> {
    v.iter().map(|(m, d)| (String::from_utf8_lossy(m).into_owned(), *d)).collect()
}
fn pairs(v: &[(&str, u32)]) -> Vec<(String, u32)> {
    v.iter().map(|(m, d)| (m.to_string(), *d)).collect()
}

#[test]
fn range_merge_keeps_first_due_time() {
    let mut s = MemStore::default();
    let out = push(&mut s, 1000, &LIM, PushMode::Range(100), &ms(&["a", "b", "a"])).unwrap();
    assert_eq!(out, PushOutcome { added: 2, merged: 1 });
    push(&mut s, 1050, &LIM, PushMode::Range(100), &ms(&["a"])).unwrap();
    assert_eq!(s.score(Set::Store, &m("a")), Some(1100.0));
    assert!(pop(&mut s, 1099, 10, 5000).is_empty());
    let got = pop(&mut s, 1100, 10, 5000);
    assert_eq!(got.len(), 2);
    assert_eq!(s.kind(), Some(Kind::Range));
}

#[test]
fn priority_latest_wins_and_highest_first() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Priority(1), &ms(&["lo", "x"])).unwrap();
    push(&mut s, 0, &LIM, PushMode::Priority(9), &ms(&["hi"])).unwrap();
    let out = push(&mut s, 0, &LIM, PushMode::Priority(-5), &ms(&["x"])).unwrap();
    assert_eq!(out, PushOutcome { added: 0, merged: 1 });
    let got = pop(&mut s, 0, 3, 100);
    assert_eq!(names(&got), pairs(&[("hi", 1), ("lo", 1), ("x", 1)]));
    assert_eq!(s.flight(&m("hi")).priority, Some(9.0));
}

#[test]
fn fixed_latest_wins_oldest_due_first() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::At(2000), &ms(&["a"])).unwrap();
    push(&mut s, 0, &LIM, PushMode::At(1000), &ms(&["b"])).unwrap();
    push(&mut s, 0, &LIM, PushMode::Delay(500), &ms(&["a"])).unwrap();
    assert_eq!(s.score(Set::Store, &m("a")), Some(500.0));
    let got = pop(&mut s, 5000, 10, 9000);
    assert_eq!(names(&got), pairs(&[("a", 1), ("b", 1)]));
}

#[test]
fn kind_is_fixed_until_completely_empty() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Priority(1), &ms(&["a"])).unwrap();
    let e = push(&mut s, 0, &LIM, PushMode::Range(1), &ms(&["b"])).unwrap_err();
    assert_eq!(e, RmqError::KindMismatch { holds: Kind::Priority, pushed: Kind::Range });
    let got = pop(&mut s, 0, 1, 10);
    assert_eq!(got.len(), 1);
    // Store empty but in flight: still priority.
    assert!(push(&mut s, 0, &LIM, PushMode::At(crate::core::kind::MIN_AT), &ms(&["b"])).is_err());
    nack(&mut s, 0, &LIM, &m("a"), None, true).unwrap();
    // Only dead left: still priority.
    assert!(push(&mut s, 0, &LIM, PushMode::Range(1), &ms(&["b"])).is_err());
    assert_eq!(replay(&mut s, 0, usize::MAX), 1);
    assert_eq!(cancel(&mut s, &ms(&["a"])), 1);
    assert!(s.is_empty());
    assert_eq!(s.kind(), None);
    assert!(push(&mut s, 0, &LIM, PushMode::Range(1), &ms(&["b"])).is_ok());
}

#[test]
fn batch_errors_change_nothing() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Priority(1), &ms(&["keep"])).unwrap();
    let before = s.members(Set::Store);
    assert_eq!(push(&mut s, 0, &LIM, PushMode::Priority(2), &ms(&["a", ""])).unwrap_err(), RmqError::EmptyMessage);
    assert_eq!(push(&mut s, 0, &LIM, PushMode::Priority(2), &ms(&["a", "0123456789abcdefg"])).unwrap_err(), RmqError::TooLong(16));
    let lim = Limits { max_queue_length: 2, ..LIM };
    assert_eq!(push(&mut s, 0, &lim, PushMode::Priority(2), &ms(&["a", "b"])).unwrap_err(), RmqError::QueueFull(2));
    assert_eq!(s.members(Set::Store), before);
    // Merges and in-batch duplicates do not count against the length.
    assert_eq!(push(&mut s, 0, &lim, PushMode::Priority(2), &ms(&["keep", "a", "a"])).unwrap().added, 1);
    let e = push(&mut MemStore::default(), i64::MAX - 1, &LIM, PushMode::Range(5), &ms(&["a"])).unwrap_err();
    assert_eq!(e, RmqError::DueTooLate(PushMode::Range(5)));
    assert!(e.message().contains("RANGE"));
}

#[test]
fn never_twice_in_flight() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Priority(1), &ms(&["a", "b"])).unwrap();
    assert_eq!(names(&pop(&mut s, 0, 1, 100)).len(), 1);
    let first = s.members(Set::Prepare)[0].0.clone();
    // Push the in-flight content again: a second, fresh waiting copy, skipped by pop.
    assert_eq!(push(&mut s, 0, &LIM, PushMode::Priority(50), &[first.clone()]).unwrap().added, 1);
    let got = pop(&mut s, 0, 10, 100);
    assert_eq!(got.len(), 1);
    assert_ne!(got[0].0, first);
    assert!(pop(&mut s, 0, 10, 100).is_empty());
    assert_eq!(ack(&mut s, &[first.clone()]), 1);
    assert_eq!(pop(&mut s, 0, 10, 100), vec![(first, 1)]);
}

#[test]
fn nack_requeues_until_retries_used_then_dead() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Priority(7), &ms(&["a"])).unwrap();
    for round in 1..=3u32 {
        let got = pop(&mut s, 10, 1, 100);
        assert_eq!(got, vec![(m("a"), round)]);
        let r = nack(&mut s, 20, &LIM, &m("a"), None, false).unwrap();
        let want = if round <= LIM.retries { Rollback::Requeued } else { Rollback::Dead };
        assert_eq!(r, Some(want));
        if want == Rollback::Requeued {
            assert_eq!(s.score(Set::Store, &m("a")), Some(7.0), "priority kept");
        }
    }
    assert_eq!(s.members(Set::Dead), vec![(m("a"), 20.0)]);
    assert_eq!(s.dead_priority(&m("a")), Some(7.0));
    assert_eq!(nack(&mut s, 20, &LIM, &m("a"), None, false).unwrap(), None);
    assert_eq!(replay(&mut s, 30, 10), 1);
    assert_eq!(s.members(Set::Store), vec![(m("a"), 7.0)]);
    assert_eq!(pop(&mut s, 40, 1, 100), vec![(m("a"), 1)], "replay resets the count");
    assert!(s.meta_consistent());
}

#[test]
fn nack_delay_dead_and_merge() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Delay(0), &ms(&["a"])).unwrap();
    pop(&mut s, 0, 1, 100);
    assert_eq!(nack(&mut s, 10, &LIM, &m("a"), Some(50), false).unwrap(), Some(Rollback::Requeued));
    assert_eq!(s.score(Set::Store, &m("a")), Some(60.0));
    assert_eq!(pop(&mut s, 60, 1, 100), vec![(m("a"), 2)]);
    // A newer copy waits meanwhile: it keeps its score and inherits the count.
    push(&mut s, 70, &LIM, PushMode::At(5000), &ms(&["a"])).unwrap();
    assert_eq!(nack(&mut s, 80, &LIM, &m("a"), Some(1), false).unwrap(), Some(Rollback::Requeued));
    assert_eq!(s.members(Set::Store), vec![(m("a"), 5000.0)]);
    assert_eq!(pop(&mut s, 5000, 1, 9000), vec![(m("a"), 3)]);
    assert_eq!(nack(&mut s, 5001, &LIM, &m("a"), None, true).unwrap(), Some(Rollback::Dead));
    assert_eq!(s.members(Set::Dead), vec![(m("a"), 5001.0)]);
    assert_eq!(s.dead_priority(&m("a")), None);

    let mut p = MemStore::default();
    push(&mut p, 0, &LIM, PushMode::Priority(1), &ms(&["a"])).unwrap();
    pop(&mut p, 0, 1, 100);
    assert_eq!(nack(&mut p, 0, &LIM, &m("a"), Some(1), false).unwrap_err(), RmqError::DelayOnPriority);
    assert_eq!(p.members(Set::Prepare).len(), 1, "error changed nothing");
}

#[test]
fn retries_zero_means_one_delivery() {
    let lim = Limits { retries: 0, ..LIM };
    let mut s = MemStore::default();
    push(&mut s, 0, &lim, PushMode::Range(1), &ms(&["a"])).unwrap();
    pop(&mut s, 1, 1, 10);
    assert_eq!(nack(&mut s, 2, &lim, &m("a"), None, false).unwrap(), Some(Rollback::Dead));
}

#[test]
fn sweep_rolls_back_expired_only_with_limit() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Delay(0), &ms(&["a", "b", "c"])).unwrap();
    pop(&mut s, 0, 1, 10);
    pop(&mut s, 0, 1, 20);
    pop(&mut s, 0, 1, 30);
    assert_eq!(sweep(&mut s, 5, &LIM, usize::MAX), SweepOutcome::default());
    assert_eq!(sweep(&mut s, 25, &LIM, 1), SweepOutcome { expired: 1, dead: 0 });
    assert_eq!(s.len(Set::Prepare), 2);
    assert_eq!(sweep(&mut s, 25, &LIM, 10), SweepOutcome { expired: 1, dead: 0 });
    assert_eq!(s.members(Set::Store).iter().map(|x| x.1).collect::<Vec<_>>(), vec![25.0, 25.0]);
    assert_eq!(s.waiting_deliveries(&s.members(Set::Store)[0].0), 1);
}

#[test]
fn extend_cancel_info_pending() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::At(100), &ms(&["a", "b"])).unwrap();
    push(&mut s, 0, &LIM, PushMode::At(300), &ms(&["c"])).unwrap();
    pop(&mut s, 150, 1, 400);
    assert_eq!(extend(&mut s, &m("a"), 900), Some(900));
    assert_eq!(extend(&mut s, &m("c"), 900), None);
    let i = info(&s, 150);
    assert_eq!(
        i,
        Info { kind: Some(Kind::Fixed), waiting: 2, ready: 1, inflight: 1, dead: 0, next_due: Some(100), next_expiry: Some(900) }
    );
    let p = pending(&s, 10);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].1, 1);
    assert_eq!(p[0].2, 900);
    assert_eq!(cancel(&mut s, &ms(&["a", "b", "c", "zz"])), 2, "a is in flight, not waiting");
    ack(&mut s, &ms(&["a"]));
    assert!(s.is_empty());
    assert_eq!(info(&s, 0).kind, None);
}

#[test]
fn next_due_and_expiry() {
    let mut s = MemStore::default();
    assert_eq!(next_due_after(&s, 0), None);
    push(&mut s, 0, &LIM, PushMode::At(100), &ms(&["a"])).unwrap();
    push(&mut s, 0, &LIM, PushMode::At(200), &ms(&["b"])).unwrap();
    assert_eq!(next_due_after(&s, 50), Some(100));
    assert_eq!(next_due_after(&s, 100), Some(200), "due now is not 'after'");
    assert_eq!(next_due_after(&s, 200), None);
    pop(&mut s, 150, 1, 900);
    assert_eq!(next_expiry(&s), Some(900));
    let mut p = MemStore::default();
    push(&mut p, 0, &LIM, PushMode::Priority(1), &ms(&["a"])).unwrap();
    assert_eq!(next_due_after(&p, 0), None, "priority messages have no due time");
}

#[test]
fn flight_metadata_elided_for_first_delivery_of_timed_kinds() {
    let mut s = MemStore::default();
    push(&mut s, 0, &LIM, PushMode::Delay(0), &ms(&["a"])).unwrap();
    pop(&mut s, 0, 1, 10);
    assert!(s.flights.is_empty());
    assert_eq!(s.flight(&m("a")), Flight::default());
}

/// A tiny deterministic PRNG so the model test needs no crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random sequences of every operation, checking after each step the invariants the SPEC
/// promises: message conservation, metadata consistency, the kind rule, pop order, the
/// never-twice-in-flight rule, delivery counts and the retry bound.
#[test]
fn model_random_operations_keep_invariants() {
    for seed in 1..=300u64 {
        let mut r = Rng(seed * 0x9E37_79B9_7F4A_7C15);
        let mut s = MemStore::default();
        let mut now = 1_000_000i64;
        let lim = Limits { retries: (seed % 4) as u32, max_message_bytes: 8, max_queue_length: 0 };
        let words: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i as u8]).collect();
        for _ in 0..200 {
            now += r.below(40) as i64;
            let w = words[r.below(words.len() as u64) as usize].clone();
            let total = |s: &MemStore| s.len(Set::Store) + s.len(Set::Prepare) + s.len(Set::Dead);
            let total_before = total(&s);
            // Copies appear only by push and end only by ack or cancel, or by merging into a
            // copy of the same content (rollback/replay into a waiting one, or a second death).
            let (mut appeared, mut ended, mut may_merge) = (0u64, 0u64, 0u64);
            match r.below(8) {
                0 | 1 => {
                    let mode = match (s.kind(), r.below(3)) {
                        (Some(Kind::Range), _) | (None, 0) => PushMode::Range(1 + r.below(50) as i64),
                        (Some(Kind::Priority), _) | (None, 1) => PushMode::Priority(r.below(5) as i64),
                        _ => PushMode::Delay(r.below(50) as i64),
                    };
                    let was = s.score(Set::Store, &w);
                    let out = push(&mut s, now, &lim, mode, &[w.clone()]).unwrap();
                    appeared = out.added;
                    if mode.kind() == Kind::Range {
                        if let Some(old) = was {
                            assert_eq!(s.score(Set::Store, &w), Some(old), "range merge keeps due");
                        }
                    } else {
                        assert_eq!(s.score(Set::Store, &w), Some(mode.score(now).unwrap() as f64), "latest wins");
                    }
                }
                2 | 3 => {
                    let kind = s.kind();
                    let before = s.clone();
                    let got = pop(&mut s, now, 1 + r.below(3) as usize, now + r.below(100) as i64);
                    for (gm, d) in &got {
                        assert!(before.score(Set::Prepare, gm).is_none(), "never twice in flight");
                        assert_eq!(*d, before.waiting_deliveries(gm) + 1);
                        assert!(*d <= lim.retries + 1);
                    }
                    // Nothing better left behind: every still-deliverable waiting message
                    // ranks no better than the worst one popped.
                    if let (Some(k), Some((last, _))) = (kind, got.last()) {
                        let last_score = before.score(Set::Store, last).unwrap();
                        for (om, os) in s.members(Set::Store) {
                            if s.score(Set::Prepare, &om).is_some() || before.score(Set::Prepare, &om).is_some() {
                                continue;
                            }
                            if k.is_timed() {
                                assert!(os > now as f64 || os >= last_score);
                            } else {
                                assert!(os <= last_score);
                            }
                        }
                    }
                }
                4 => ended = ack(&mut s, &[w.clone()]),
                5 => {
                    let delay = if s.kind() == Some(Kind::Priority) { None } else { Some(r.below(30) as i64) };
                    may_merge = nack(&mut s, now, &lim, &w, delay, r.below(5) == 0).unwrap().is_some() as u64;
                }
                6 => {
                    may_merge = sweep(&mut s, now, &lim, 1 + r.below(4) as usize).expired;
                }
                _ => match r.below(3) {
                    0 => ended = cancel(&mut s, &[w.clone()]),
                    1 => may_merge = replay(&mut s, now, 1 + r.below(3) as usize),
                    _ => {
                        extend(&mut s, &w, now + 10);
                    }
                },
            }
            assert!(s.meta_consistent(), "seed {seed}: metadata without its message");
            assert_eq!(s.kind().is_none(), s.is_empty(), "seed {seed}: kind iff not empty");
            let after = total(&s) + ended;
            assert!(after <= total_before + appeared, "seed {seed}: a copy appeared from nowhere");
            assert!(after + may_merge >= total_before + appeared, "seed {seed}: a copy was lost");
        }
    }
}
