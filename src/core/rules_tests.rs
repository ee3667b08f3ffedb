//! Unit and model tests of the queue rules over the in-memory store.

// Tests pass one-message batches as `&[m.clone()]`: clearer than `slice::from_ref`.
#![allow(clippy::cloned_ref_to_slice_refs)]

use crate::core::error::RmqError;
use crate::core::kind::{Kind, PushMode};
use crate::core::memstore::MemStore;
use crate::core::model::{Model, Op};
use crate::core::policy::Limits;
use crate::core::queue_store::{Dead, Flight, Indexed, Set, Store};
use crate::core::rules::*;

fn lim() -> Limits {
    Limits::server(2, 30_000, 16, 0)
}

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
    let out = push(&mut s, 1000, &lim(), PushMode::Range(100), None, &ms(&["a", "b", "a"])).unwrap();
    assert_eq!(out, PushOutcome { added: 2, merged: 1 });
    push(&mut s, 1050, &lim(), PushMode::Range(100), None, &ms(&["a"])).unwrap();
    assert_eq!(s.score(Set::Store, &m("a")), Some(1100.0));
    assert!(pop(&mut s, 1099, 10, 5000).got.is_empty());
    let got = pop(&mut s, 1100, 10, 5000).got;
    assert_eq!(got.len(), 2);
    assert_eq!(s.kind(), Some(Kind::Range));
}

#[test]
fn priority_latest_wins_and_highest_first() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["lo", "x"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::Priority(9), None, &ms(&["hi"])).unwrap();
    let out = push(&mut s, 0, &lim(), PushMode::Priority(-5), None, &ms(&["x"])).unwrap();
    assert_eq!(out, PushOutcome { added: 0, merged: 1 });
    let got = pop(&mut s, 0, 3, 100).got;
    assert_eq!(names(&got), pairs(&[("hi", 1), ("lo", 1), ("x", 1)]));
    assert_eq!(s.flight(&m("hi")).priority, Some(9.0));
}

#[test]
fn fixed_latest_wins_oldest_due_first() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::At(2000), None, &ms(&["a"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::At(1000), None, &ms(&["b"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::Delay(500), None, &ms(&["a"])).unwrap();
    assert_eq!(s.score(Set::Store, &m("a")), Some(500.0));
    let got = pop(&mut s, 5000, 10, 9000).got;
    assert_eq!(names(&got), pairs(&[("a", 1), ("b", 1)]));
}

#[test]
fn kind_is_fixed_until_completely_empty() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["a"])).unwrap();
    let e = push(&mut s, 0, &lim(), PushMode::Range(1), None, &ms(&["b"])).unwrap_err();
    assert_eq!(e, RmqError::KindMismatch { holds: Kind::Priority, pushed: Kind::Range });
    let got = pop(&mut s, 0, 1, 10).got;
    assert_eq!(got.len(), 1);
    // Store empty but in flight: still priority.
    assert!(push(&mut s, 0, &lim(), PushMode::At(crate::core::kind::MIN_AT), None, &ms(&["b"])).is_err());
    nack(&mut s, 0, &lim(), &m("a"), None, true);
    // Only dead left: still priority.
    assert!(push(&mut s, 0, &lim(), PushMode::Range(1), None, &ms(&["b"])).is_err());
    assert_eq!(replay(&mut s, 0, usize::MAX), 1);
    assert_eq!(cancel(&mut s, &ms(&["a"])), 1);
    assert!(s.is_empty());
    assert_eq!(s.kind(), None);
    assert!(push(&mut s, 0, &lim(), PushMode::Range(1), None, &ms(&["b"])).is_ok());
}

#[test]
fn batch_errors_change_nothing() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["keep"])).unwrap();
    let before = s.members(Set::Store);
    assert_eq!(push(&mut s, 0, &lim(), PushMode::Priority(2), None, &ms(&["a", ""])).unwrap_err(), RmqError::EmptyMessage);
    assert_eq!(push(&mut s, 0, &lim(), PushMode::Priority(2), None, &ms(&["a", "0123456789abcdefg"])).unwrap_err(), RmqError::TooLong(16));
    let short = Limits { max_queue_length: 2, ..lim() };
    assert_eq!(push(&mut s, 0, &short, PushMode::Priority(2), None, &ms(&["a", "b"])).unwrap_err(), RmqError::QueueFull(2));
    assert_eq!(s.members(Set::Store), before);
    // Merges and in-batch duplicates do not count against the length.
    assert_eq!(push(&mut s, 0, &short, PushMode::Priority(2), None, &ms(&["keep", "a", "a"])).unwrap().added, 1);
    let e = push(&mut MemStore::default(), i64::MAX - 1, &lim(), PushMode::Range(5), None, &ms(&["a"])).unwrap_err();
    assert_eq!(e, RmqError::DueTooLate(PushMode::Range(5)));
    assert!(e.message().contains("RANGE"));
}

#[test]
fn never_twice_in_flight() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["a", "b"])).unwrap();
    assert_eq!(names(&pop(&mut s, 0, 1, 100).got).len(), 1);
    let first = s.members(Set::Prepare)[0].0.clone();
    // Push the in-flight content again: a second, fresh waiting copy, skipped by pop.
    assert_eq!(push(&mut s, 0, &lim(), PushMode::Priority(50), None, &[first.clone()]).unwrap().added, 1);
    let got = pop(&mut s, 0, 10, 100).got;
    assert_eq!(got.len(), 1);
    assert_ne!(got[0].0, first);
    assert!(pop(&mut s, 0, 10, 100).got.is_empty());
    assert_eq!(ack(&mut s, &[first.clone()]), 1);
    assert_eq!(pop(&mut s, 0, 10, 100).got, vec![(first, 1)]);
}

#[test]
fn nack_requeues_until_retries_used_then_dead() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(7), None, &ms(&["a"])).unwrap();
    for round in 1..=3u32 {
        let got = pop(&mut s, 10, 1, 100).got;
        assert_eq!(got, vec![(m("a"), round)]);
        let r = nack(&mut s, 20, &lim(), &m("a"), None, false);
        let want = if round <= lim().retries { Rollback::Requeued } else { Rollback::Dead };
        assert_eq!(r, Some(want));
        if want == Rollback::Requeued {
            assert_eq!(s.score(Set::Store, &m("a")), Some(7.0), "priority kept");
        }
    }
    assert_eq!(s.members(Set::Dead), vec![(m("a"), 20.0)]);
    assert_eq!(s.dead(&m("a")).priority, Some(7.0));
    assert_eq!(nack(&mut s, 20, &lim(), &m("a"), None, false), None);
    assert_eq!(replay(&mut s, 30, 10), 1);
    assert_eq!(s.members(Set::Store), vec![(m("a"), 7.0)]);
    assert_eq!(pop(&mut s, 40, 1, 100).got, vec![(m("a"), 1)], "replay resets the count");
    assert!(s.meta_consistent());
}

#[test]
fn nack_delay_dead_and_merge() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Delay(0), None, &ms(&["a"])).unwrap();
    pop(&mut s, 0, 1, 100);
    assert_eq!(nack(&mut s, 10, &lim(), &m("a"), Some(50), false), Some(Rollback::Requeued));
    assert_eq!(s.score(Set::Store, &m("a")), Some(60.0));
    assert_eq!(pop(&mut s, 60, 1, 100).got, vec![(m("a"), 2)]);
    // A newer copy waits meanwhile: it keeps its score and inherits the count.
    push(&mut s, 70, &lim(), PushMode::At(5000), None, &ms(&["a"])).unwrap();
    assert_eq!(nack(&mut s, 80, &lim(), &m("a"), Some(1), false), Some(Rollback::Requeued));
    assert_eq!(s.members(Set::Store), vec![(m("a"), 5000.0)]);
    assert_eq!(pop(&mut s, 5000, 1, 9000).got, vec![(m("a"), 3)]);
    assert_eq!(nack(&mut s, 5001, &lim(), &m("a"), None, true), Some(Rollback::Dead));
    assert_eq!(s.members(Set::Dead), vec![(m("a"), 5001.0)]);
    assert_eq!(s.dead(&m("a")).priority, None);
}

#[test]
fn retries_zero_means_one_delivery() {
    let lim = Limits { retries: 0, ..lim() };
    let mut s = MemStore::default();
    push(&mut s, 0, &lim, PushMode::Range(1), None, &ms(&["a"])).unwrap();
    pop(&mut s, 1, 1, 10);
    assert_eq!(nack(&mut s, 2, &lim, &m("a"), None, false), Some(Rollback::Dead));
}

#[test]
fn sweep_rolls_back_expired_only_with_limit() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Delay(0), None, &ms(&["a", "b", "c"])).unwrap();
    pop(&mut s, 0, 1, 10);
    pop(&mut s, 0, 1, 20);
    pop(&mut s, 0, 1, 30);
    assert_eq!(sweep(&mut s, 5, &lim(), usize::MAX), SweepOutcome::default());
    assert_eq!(sweep(&mut s, 25, &lim(), 1), SweepOutcome { expired: 1, dead: 0 });
    assert_eq!(s.len(Set::Prepare), 2);
    assert_eq!(sweep(&mut s, 25, &lim(), 10), SweepOutcome { expired: 1, dead: 0 });
    assert_eq!(s.members(Set::Store).iter().map(|x| x.1).collect::<Vec<_>>(), vec![25.0, 25.0]);
    assert_eq!(s.waiting(&s.members(Set::Store)[0].0).deliveries, 1);
}

#[test]
fn extend_cancel_info_pending() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::At(100), None, &ms(&["a", "b"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::At(300), None, &ms(&["c"])).unwrap();
    pop(&mut s, 150, 1, 400);
    assert_eq!(extend(&mut s, &m("a"), 900), Some(900));
    assert_eq!(extend(&mut s, &m("c"), 900), None);
    let i = info(&s, 150);
    assert_eq!(
        i,
        Info { kind: Some(Kind::Fixed), waiting: 2, ready: 1, inflight: 1, dead: 0, next_due: Some(100), next_expiry: Some(900) }
    );
    let p = pending(&s, 10);
    assert_eq!(p, vec![Pending { message: m("a"), deliveries: 1, deadline: 900, group: None }]);
    assert_eq!(cancel(&mut s, &ms(&["a", "b", "c", "zz"])), 2, "a is in flight, not waiting");
    ack(&mut s, &ms(&["a"]));
    assert!(s.is_empty());
    assert_eq!(info(&s, 0).kind, None);
}

#[test]
fn next_due_and_expiry() {
    let mut s = MemStore::default();
    assert_eq!(next_due_after(&s, 0), None);
    push(&mut s, 0, &lim(), PushMode::At(100), None, &ms(&["a"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::At(200), None, &ms(&["b"])).unwrap();
    assert_eq!(next_due_after(&s, 50), Some(100));
    assert_eq!(next_due_after(&s, 100), Some(200), "due now is not 'after'");
    assert_eq!(next_due_after(&s, 200), None);
    pop(&mut s, 150, 1, 900);
    assert_eq!(next_expiry(&s), Some(900));
    let mut p = MemStore::default();
    push(&mut p, 0, &lim(), PushMode::Priority(1), None, &ms(&["a"])).unwrap();
    assert_eq!(next_due_after(&p, 0), None, "priority messages have no due time until held");
}

#[test]
fn flight_metadata_elided_for_first_delivery_of_timed_kinds() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Delay(0), None, &ms(&["a"])).unwrap();
    pop(&mut s, 0, 1, 10);
    assert!(s.flights.is_empty());
    assert_eq!(s.flight(&m("a")), Flight::default());
}

fn grouped(s: &mut MemStore, now: i64, mode: PushMode, g: &str, msgs: &[&str]) -> PushOutcome {
    push(s, now, &lim(), mode, Some(g.as_bytes()), &ms(msgs)).unwrap()
}

#[test]
fn a_group_is_consumed_one_at_a_time_in_queue_order() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::At(30), "o1", &["o1:shipped"]);
    grouped(&mut s, 0, PushMode::At(10), "o1", &["o1:paid"]);
    grouped(&mut s, 0, PushMode::At(20), "o2", &["o2:paid"]);
    push(&mut s, 0, &lim(), PushMode::At(40), None, &ms(&["free"])).unwrap();
    // One pop takes at most one message of a group.
    let p = pop(&mut s, 100, 10, 500);
    assert_eq!(names(&p.got), pairs(&[("o1:paid", 1), ("o2:paid", 1), ("free", 1)]));
    assert_eq!(p.group_waits, 1, "o1:shipped passed over");
    assert_eq!(s.members(Set::Park), vec![(m("o1:shipped"), 30.0)]);
    assert!(pop(&mut s, 100, 10, 500).got.is_empty(), "held back while o1 is in flight");
    assert_eq!(info(&s, 100).ready, 1, "held back only by its group: ready");
    assert_eq!(info(&s, 100).waiting, 1);
    assert_eq!(ack(&mut s, &ms(&["o2:paid"])), 1);
    assert!(pop(&mut s, 100, 10, 500).got.is_empty(), "another group's end frees nothing");
    assert_eq!(ack(&mut s, &ms(&["o1:paid"])), 1);
    assert_eq!(s.members(Set::Store), vec![(m("o1:shipped"), 30.0)], "freed: back in the store");
    assert_eq!(pop(&mut s, 100, 10, 500).got, vec![(m("o1:shipped"), 1)]);
    assert!(s.meta_consistent());
}

#[test]
fn a_groups_later_messages_are_held_back_from_their_push_behind_its_head() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Priority(5), "g", &["a", "b", "c"]);
    assert_eq!(s.members(Set::Store), vec![(m("a"), 5.0)], "one message of an idle group in Q");
    assert_eq!(s.len(Set::Park), 2);
    assert_eq!(s.best_indexed(b"g"), Some(Indexed { m: m("a"), score: 5.0, set: Set::Store, pinned: false }), "the head is indexed first");
    // A push that beats the head swaps them; one that does not waits behind it.
    grouped(&mut s, 0, PushMode::Priority(9), "g", &["d"]);
    grouped(&mut s, 0, PushMode::Priority(1), "g", &["e"]);
    assert_eq!(s.members(Set::Store), vec![(m("d"), 9.0)]);
    assert_eq!(s.best_indexed(b"g"), Some(Indexed { m: m("d"), score: 9.0, set: Set::Store, pinned: false }));
    // A head whose score drops behind a parked message is overtaken.
    grouped(&mut s, 0, PushMode::Priority(0), "g", &["d"]);
    assert_eq!(s.members(Set::Store).len(), 1);
    assert_eq!(s.score(Set::Park, &m("d")), Some(0.0));
    let order: Vec<Vec<u8>> = (0..5)
        .map(|_| {
            let got = pop(&mut s, 0, 10, 500).got;
            assert_eq!(got.len(), 1, "one of the group per pop");
            ack(&mut s, &[got[0].0.clone()]);
            got[0].0.clone()
        })
        .collect();
    assert_eq!(order[3..], [m("e"), m("d")]);
    assert!(s.is_empty() && s.index.is_empty() && s.meta_consistent());
}

#[test]
fn a_backlog_of_a_busy_group_in_q_is_parked_a_bounded_number_per_pop() {
    // Data written before v3 (or by hand): a busy group's messages sit in `Q`.
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::At(10), None, &ms(&["x"])).unwrap();
    let n = PARK_PER_POP * 2 + 10;
    let w = crate::core::queue_store::Waiting { deliveries: 0, held_priority: None, group: Some(m("G")) };
    for i in 0..n {
        let msg = format!("g{i:05}").into_bytes();
        s.add(Set::Store, &msg, 20.0 + i as f64);
        s.set_waiting(&msg, Some(&w));
    }
    s.add(Set::Store, &m("o1"), 1e6);
    let p = pop(&mut s, 1e7 as i64, 2, 500);
    assert_eq!(names(&p.got), pairs(&[("x", 1), ("g00000", 1)]));
    let mut rounds = 0;
    let got = loop {
        let p = pop(&mut s, 1e7 as i64, 10, 500);
        assert!(p.group_waits as usize <= PARK_PER_POP, "a pop parks at most PARK_PER_POP");
        rounds += 1;
        if !p.cut {
            break p.got;
        }
        assert!(p.got.is_empty());
    };
    assert_eq!(names(&got), pairs(&[("o1", 1)]));
    assert_eq!(rounds, (n - 1).div_ceil(PARK_PER_POP));
    assert_eq!(s.len(Set::Park), (n - 1) as u64);
    assert!(s.meta_consistent());
}

#[test]
fn a_pop_takes_one_message_of_each_group_it_meets_in_q() {
    // Older data: 40 groups' messages interleaved in `Q`, 3 each (names that share
    // prefixes, and an empty one); group "g1" busy. A pop takes each idle group's first
    // and parks the rest, a held group's name known whether its message was taken or
    // parked.
    let mut s = MemStore::default();
    let names_of = |i: usize| if i == 0 { Vec::new() } else { format!("g{i}").into_bytes() };
    for r in 0..3 {
        for i in 0..40 {
            let msg = format!("m{r}-{i}").into_bytes();
            s.add(Set::Store, &msg, (r * 40 + i) as f64);
            let w = crate::core::queue_store::Waiting { deliveries: 0, held_priority: None, group: Some(names_of(i)) };
            s.set_waiting(&msg, Some(&w));
        }
    }
    s.set_kind(Kind::Fixed);
    s.set_busy(m("g1"), &m("elsewhere"));
    let p = pop(&mut s, 1e6 as i64, 1000, 500);
    let want: Vec<Vec<u8>> = (0..40).filter(|&i| i != 1).map(|i| format!("m0-{i}").into_bytes()).collect();
    assert_eq!(p.got.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>(), want);
    // Those parked, and each delivery with messages held back behind it.
    assert_eq!(p.group_waits, 81 + 39);
    assert_eq!((s.len(Set::Store), s.len(Set::Park)), (0, 81));
    assert!((0..40).filter(|&i| i != 1).all(|i| s.busy(&names_of(i))));
}

#[test]
fn every_way_a_delivery_ends_frees_its_group() {
    type End = fn(&mut MemStore);
    let ends: [(&str, End); 4] = [
        ("ack", |s| assert_eq!(ack(s, &ms(&["a"])), 1)),
        ("nack", |s| assert_eq!(nack(s, 50, &lim(), &m("a"), Some(1000), false), Some(Rollback::Requeued))),
        ("dead", |s| assert_eq!(nack(s, 50, &lim(), &m("a"), None, true), Some(Rollback::Dead))),
        ("expiry", |s| assert_eq!(sweep(s, 600, &lim(), 10), SweepOutcome { expired: 1, dead: 0 })),
    ];
    for (how, end) in ends {
        let mut s = MemStore::default();
        grouped(&mut s, 0, PushMode::Delay(0), "g", &["a"]);
        grouped(&mut s, 0, PushMode::Delay(5), "g", &["b"]);
        assert_eq!(pop(&mut s, 10, 1, 500).got, vec![(m("a"), 1)], "{how}");
        assert!(pop(&mut s, 10, 1, 500).got.is_empty(), "{how}: b held back");
        end(&mut s);
        assert!(s.meta_consistent(), "{how}");
        // Rolled back, a goes again first (the v5 contract), after its retry delay.
        let (at, first) = match how {
            "nack" => (1050, Some((m("a"), 2))),
            "expiry" => (600, Some((m("a"), 2))),
            _ => (600, None),
        };
        if let Some(first) = first {
            assert!(pop(&mut s, at - 1, 1, at + 500).got.iter().all(|(x, _)| x != &m("b")), "{how}: b waits");
            assert_eq!(pop(&mut s, at, 1, at + 500).got, vec![first], "{how}");
            assert_eq!(ack(&mut s, &ms(&["a"])), 1);
        }
        assert_eq!(pop(&mut s, at, 1, at + 500).got, vec![(m("b"), 1)], "{how}: b freed");
        assert!(s.meta_consistent(), "{how}");
    }
}

#[test]
fn a_second_death_keeps_only_its_own_metadata() {
    let (mut s, now) = (MemStore::default(), 1_000_000);
    grouped(&mut s, now, PushMode::Delay(0), "g", &["a"]);
    assert_eq!(pop(&mut s, now, 1, now + 100).got.len(), 1);
    assert_eq!(nack(&mut s, now, &lim(), &m("a"), None, true), Some(Rollback::Dead));
    push(&mut s, now, &lim(), PushMode::Delay(0), None, &[m("a")]).unwrap();
    assert_eq!(pop(&mut s, now, 1, now + 100).got.len(), 1);
    assert_eq!(nack(&mut s, now, &lim(), &m("a"), None, true), Some(Rollback::Dead));
    assert_eq!(s.dead(&m("a")), Dead::default(), "the latest death was in no group");
    assert_eq!(replay(&mut s, now, 10), 1);
    assert_eq!(s.waiting(&m("a")).group, None);
}

#[test]
fn a_push_that_changes_a_parked_copy_in_nothing_writes_nothing() {
    let (mut s, now) = (MemStore::default(), 1_000_000);
    grouped(&mut s, now, PushMode::Priority(5), "g", &["a"]);
    assert_eq!(pop(&mut s, now, 1, now + 100).got.len(), 1);
    grouped(&mut s, now, PushMode::Priority(1), "g", &["d"]);
    let before = s.clone();
    assert_eq!(grouped(&mut s, now, PushMode::Priority(1), "g", &["d"]), PushOutcome { added: 0, merged: 1 });
    assert_eq!(s, before);
    assert_eq!(grouped(&mut s, now, PushMode::Priority(2), "g", &["d"]), PushOutcome { added: 0, merged: 1 });
    assert_eq!(s.score(Set::Park, &m("d")), Some(2.0), "a new priority is taken");
}

#[test]
fn latest_push_sets_the_group() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Priority(5), "g", &["a", "b"]);
    assert_eq!(pop(&mut s, 0, 1, 100).got.len(), 1);
    let held = if s.score(Set::Prepare, &m("a")).is_some() { "b" } else { "a" };
    assert!(pop(&mut s, 0, 1, 100).got.is_empty());
    // Pushed again without a group: it leaves g and is deliverable at once.
    assert_eq!(push(&mut s, 0, &lim(), PushMode::Priority(6), None, &ms(&[held])).unwrap(), PushOutcome { added: 0, merged: 1 });
    assert_eq!(s.waiting(&m(held)).group, None);
    assert_eq!(pop(&mut s, 0, 1, 100).got, vec![(m(held), 1)]);
    // Moved from a busy group into another: follows the new group's state.
    let mut t = MemStore::default();
    grouped(&mut t, 0, PushMode::Priority(9), "x", &["x1"]);
    grouped(&mut t, 0, PushMode::Priority(1), "x", &["x2"]);
    assert_eq!(pop(&mut t, 0, 5, 100).got, vec![(m("x1"), 1)]);
    grouped(&mut t, 0, PushMode::Priority(1), "y", &["x2"]);
    assert_eq!(t.waiting(&m("x2")).group, Some(b"y".to_vec()));
    assert_eq!(pop(&mut t, 0, 5, 100).got, vec![(m("x2"), 1)]);
    assert_eq!(pending(&t, 10).iter().map(|p| p.group.clone()).collect::<Vec<_>>(), vec![Some(b"x".to_vec()), Some(b"y".to_vec())]);
    assert!(t.meta_consistent());
}

#[test]
fn cancelling_a_groups_head_frees_the_next() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::At(10), "g", &["a", "b"]);
    grouped(&mut s, 0, PushMode::At(20), "g", &["c"]);
    assert_eq!(pop(&mut s, 50, 1, 500).got, vec![(m("a"), 1)]);
    assert!(pop(&mut s, 50, 1, 500).got.is_empty());
    assert_eq!(ack(&mut s, &ms(&["a"])), 1);
    // b is back in the store, c still parked: cancelling b must free c.
    assert_eq!(cancel(&mut s, &ms(&["b"])), 1);
    assert_eq!(pop(&mut s, 50, 1, 500).got, vec![(m("c"), 1)]);
    assert!(s.meta_consistent());
}

#[test]
fn a_content_in_flight_and_its_waiting_copy_share_the_group_rule() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Range(1), "g", &["a"]);
    assert_eq!(pop(&mut s, 5, 1, 100).got, vec![(m("a"), 1)]);
    assert_eq!(grouped(&mut s, 5, PushMode::Range(1), "g", &["a"]), PushOutcome { added: 1, merged: 0 });
    assert_eq!(s.members(Set::Park), vec![(m("a"), 6.0)], "its group is busy: parked at push");
    assert_eq!(nack(&mut s, 7, &lim(), &m("a"), None, false), Some(Rollback::Requeued));
    // Merged into the waiting copy, which keeps its due time and inherits the count.
    assert_eq!(pop(&mut s, 7, 1, 100).got, vec![(m("a"), 2)]);
    assert!(s.meta_consistent());
}

#[test]
fn replay_merges_into_the_newer_waiting_copy() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::At(100), "old", &["a"]);
    pop(&mut s, 100, 1, 200);
    assert_eq!(nack(&mut s, 150, &lim(), &m("a"), None, true), Some(Rollback::Dead));
    assert_eq!(s.dead(&m("a")).group, Some(b"old".to_vec()));
    grouped(&mut s, 160, PushMode::At(900_000), "new", &["a"]);
    assert_eq!(replay(&mut s, 170, 10), 1);
    assert_eq!(s.members(Set::Store), vec![(m("a"), 900_000.0)], "the waiting copy keeps its due time");
    assert_eq!(s.waiting(&m("a")).group, Some(b"new".to_vec()), "and its group");
    // Without a waiting copy, a replayed message keeps the group it had.
    let mut p = MemStore::default();
    grouped(&mut p, 0, PushMode::Priority(3), "g", &["a", "b"]);
    assert_eq!(pop(&mut p, 0, 1, 100).got.len(), 1);
    let first = p.members(Set::Prepare)[0].0.clone();
    nack(&mut p, 0, &lim(), &first, None, true);
    assert_eq!(replay(&mut p, 0, 10), 1);
    assert_eq!(p.waiting(&first).group, Some(b"g".to_vec()));
    assert_eq!(p.score(Set::Store, &first).or(p.score(Set::Park, &first)), Some(3.0));
    assert!(p.meta_consistent());
}

#[test]
fn take_dead_hands_over_the_oldest_deaths_with_their_group_and_priority() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Priority(7), "g", &["a"]);
    push(&mut s, 0, &lim(), PushMode::Priority(2), None, &ms(&["b"])).unwrap();
    for (now, msg) in [(10, "a"), (20, "b")] {
        let got = pop(&mut s, now, 1, 100).got;
        assert_eq!(names(&got), pairs(&[(msg, 1)]));
        assert_eq!(nack(&mut s, now, &lim(), &m(msg), None, true), Some(Rollback::Dead));
    }
    assert!(!waits(&s, &m("a")));
    let first = take_dead(&mut s, 1);
    assert_eq!(first, vec![(m("a"), Dead { priority: Some(7.0), group: Some(b"g".to_vec()) })]);
    assert_eq!(s.members(Set::Dead), vec![(m("b"), 20.0)]);
    assert_eq!(take_dead(&mut s, 0), vec![]);
    assert_eq!(take_dead(&mut s, 10), vec![(m("b"), Dead { priority: Some(2.0), group: None })]);
    assert!(s.is_empty() && s.kind().is_none(), "a queue left empty is tidied");
    assert!(s.meta_consistent());
}

#[test]
fn priority_retry_delay_holds_back_then_competes_again() {
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::Priority(9), None, &ms(&["hi"])).unwrap();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["lo"])).unwrap();
    assert_eq!(pop(&mut s, 0, 1, 100).got, vec![(m("hi"), 1)]);
    assert_eq!(nack(&mut s, 10, &lim(), &m("hi"), Some(50), false), Some(Rollback::Requeued));
    assert_eq!(s.members(Set::Hold), vec![(m("hi"), 60.0)]);
    let i = info(&s, 20);
    assert_eq!((i.waiting, i.ready, i.next_due), (2, 1, Some(60)), "held: waiting, not ready");
    assert_eq!(next_due_after(&s, 20), Some(60));
    assert_eq!(pop(&mut s, 20, 1, 100).got, vec![(m("lo"), 1)]);
    assert!(pop(&mut s, 59, 1, 100).got.is_empty());
    // A push while held replaces the priority and keeps the hold.
    push(&mut s, 30, &lim(), PushMode::Priority(4), None, &ms(&["hi"])).unwrap();
    assert_eq!(info(&s, 60).ready, 1);
    assert_eq!(pop(&mut s, 60, 1, 100).got, vec![(m("hi"), 2)]);
    assert_eq!(s.flight(&m("hi")).priority, Some(4.0));
    assert!(s.meta_consistent());
}

#[test]
fn holds_are_released_in_bounded_steps() {
    let mut s = MemStore::default();
    let msgs: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    let names: Vec<&str> = msgs.iter().map(String::as_str).collect();
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&names)).unwrap();
    pop(&mut s, 0, 10, 100);
    for m in &msgs {
        nack(&mut s, 0, &lim(), &m.as_bytes().to_vec(), Some(50), false);
    }
    assert_eq!(next_work(&s), Some(50));
    assert_eq!(release_holds(&mut s, 49, 4), 0);
    assert_eq!(release_holds(&mut s, 50, 4), 4);
    assert_eq!((s.len(Set::Hold), s.len(Set::Store)), (6, 4));
    assert_eq!(release_holds(&mut s, 50, 100), 6);
    assert_eq!(next_work(&s), None);
    assert!(s.meta_consistent());
}

#[test]
fn backoff_delays_each_failed_delivery() {
    let l = Limits { backoff_ms: 100, backoff_max_ms: 250, retries: 5, ..lim() };
    let mut f = MemStore::default();
    push(&mut f, 0, &l, PushMode::Delay(0), None, &ms(&["a"])).unwrap();
    let mut now = 0;
    for (round, wait) in [(1, 100), (2, 200), (3, 250)] {
        assert_eq!(pop(&mut f, now, 1, now + 10).got, vec![(m("a"), round)]);
        assert_eq!(sweep(&mut f, now + 10, &l, 10).expired, 1, "expiry counts as a failed delivery");
        assert_eq!(f.score(Set::Store, &m("a")), Some((now + 10 + wait) as f64), "round {round}");
        now += 10 + wait;
    }
    assert_eq!(nack(&mut f, now, &l, &m("a"), Some(0), false), None, "not in flight");
    assert_eq!(pop(&mut f, now, 1, now + 10).got, vec![(m("a"), 4)]);
    assert_eq!(nack(&mut f, now, &l, &m("a"), Some(0), false), Some(Rollback::Requeued), "explicit DELAY wins");
    assert_eq!(f.score(Set::Store, &m("a")), Some(now as f64));
    let mut p = MemStore::default();
    push(&mut p, 0, &l, PushMode::Priority(2), None, &ms(&["a"])).unwrap();
    pop(&mut p, 0, 1, 10);
    nack(&mut p, 5, &l, &m("a"), None, false);
    assert_eq!(p.members(Set::Hold), vec![(m("a"), 105.0)], "priority: held by the backoff");
    assert_eq!(p.waiting(&m("a")).held_priority, Some(2.0));
}

#[test]
fn cancel_removes_parked_and_held_copies() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Priority(1), "g", &["a", "b"]);
    push(&mut s, 0, &lim(), PushMode::Priority(1), None, &ms(&["c"])).unwrap();
    pop(&mut s, 0, 3, 100);
    nack(&mut s, 0, &lim(), &m("c"), Some(100), false);
    assert_eq!((s.len(Set::Park), s.len(Set::Hold)), (1, 1));
    let parked = s.members(Set::Park)[0].0.clone();
    assert_eq!(cancel(&mut s, &[parked, m("c")]), 2);
    assert_eq!(s.waiting_len(), 0);
    assert!(s.meta_consistent());
}

#[test]
fn has_deliverable_sees_what_a_pop_would_take() {
    let mut s = MemStore::default();
    assert!(!has_deliverable(&s, 0));
    grouped(&mut s, 0, PushMode::At(10), "g", &["a", "b"]);
    assert!(!has_deliverable(&s, 9), "not due");
    assert!(has_deliverable(&s, 10));
    pop(&mut s, 10, 1, 100);
    assert!(!has_deliverable(&s, 10), "the other is held back by its group");
    let mut p = MemStore::default();
    push(&mut p, 0, &lim(), PushMode::Priority(1), None, &ms(&["a"])).unwrap();
    pop(&mut p, 0, 1, 100);
    nack(&mut p, 0, &lim(), &m("a"), Some(50), false);
    assert!(!has_deliverable(&p, 49));
    assert!(has_deliverable(&p, 50), "a hold that ended");
}

#[test]
fn a_lost_kind_is_inferred_from_what_is_left() {
    let mut f = MemStore::default();
    push(&mut f, 0, &lim(), PushMode::At(crate::core::kind::MIN_AT + 5), None, &ms(&["a"])).unwrap();
    f.kind = None; // meta{Q} deleted by hand
    assert_eq!(kind_of(&f), Some(Kind::Fixed));
    assert_eq!(pop(&mut f, crate::core::kind::MIN_AT + 5, 1, 1 << 50).got, vec![(m("a"), 1)], "pops work again");
    assert_eq!(push(&mut f, 0, &lim(), PushMode::Range(5), None, &ms(&["b"])).unwrap().added, 1, "either timed kind");
    assert_eq!(f.kind, Some(Kind::Range), "and the pushed kind is stored");
    let mut p = MemStore::default();
    push(&mut p, 0, &lim(), PushMode::Priority(3), None, &ms(&["a"])).unwrap();
    p.kind = None;
    assert_eq!(kind_of(&p), Some(Kind::Priority), "a score that is no time");
    assert_eq!(
        push(&mut p, 0, &lim(), PushMode::Delay(0), None, &ms(&["b"])).unwrap_err(),
        RmqError::KindMismatch { holds: Kind::Priority, pushed: Kind::Fixed }
    );
    let mut q = MemStore::default();
    push(&mut q, 0, &lim(), PushMode::Priority(crate::core::kind::MIN_AT), None, &ms(&["a"])).unwrap();
    pop(&mut q, 0, 1, 100);
    q.kind = None;
    assert_eq!(kind_of(&q), Some(Kind::Priority), "the priority an in-flight message keeps");
    assert_eq!(kind_of(&MemStore::default()), None);
}

/// A queue of one message written as ZADD writes it (no kind: it is inferred), popped.
fn zadded_and_popped(priority: f64) -> MemStore {
    let mut s = MemStore::default();
    s.add(Set::Store, &m("a"), priority);
    assert_eq!(pop(&mut s, 0, 1, 50).got, vec![(m("a"), 1)]);
    s
}

#[test]
fn a_message_written_without_a_kind_keeps_its_priority_through_failures() {
    // Once popped, the delivery's record is all that says "priority": a rollback reads the
    // kind before it ends the delivery.
    let mut s = zadded_and_popped(5.0);
    assert_eq!(nack(&mut s, 0, &lim(), &m("a"), None, true), Some(Rollback::Dead));
    assert_eq!(s.dead(&m("a")).priority, Some(5.0), "NACK DEAD keeps its priority");
    assert_eq!(replay(&mut s, 200, 10), 1);
    assert_eq!(s.score(Set::Store, &m("a")), Some(5.0), "replayed with its priority");

    let mut s = zadded_and_popped(5.0);
    assert_eq!(nack(&mut s, 0, &lim(), &m("a"), None, false), Some(Rollback::Requeued));
    assert_eq!(s.score(Set::Store, &m("a")), Some(5.0), "a NACK requeues it with its priority");
    let mut s = zadded_and_popped(5.0);
    assert_eq!(sweep(&mut s, 50, &lim(), 10).expired, 1);
    assert_eq!(s.score(Set::Store, &m("a")), Some(5.0), "so does an expiry");

    // Retries used up by expiries (3 deliveries with 2 retries), then claimed for a redrive.
    let mut s = zadded_and_popped(7.0);
    for now in [100, 200] {
        sweep(&mut s, now - 50, &lim(), 10);
        assert_eq!(pop(&mut s, now, 1, now + 50).got, vec![(m("a"), (now / 100 + 1) as u32)]);
    }
    assert_eq!(sweep(&mut s, 250, &lim(), 10).dead, 1);
    assert_eq!(take_dead(&mut s, 10), vec![(m("a"), Dead { priority: Some(7.0), group: None })], "a claim keeps it");
}

#[test]
fn a_kind_left_behind_by_deleted_keys_gives_way() {
    let mut f = MemStore::default();
    push(&mut f, 0, &lim(), PushMode::Priority(3), Some(b"g"), &ms(&["a"])).unwrap();
    f.sets[Set::Store as usize].clear(); // Q deleted by hand: meta{Q} keeps the kind and the waiting record
    assert!(f.is_empty() && f.kind == Some(Kind::Priority));
    let before = f.clone();
    assert_eq!(push(&mut f, 0, &lim(), PushMode::Range(5), None, &ms(&["b", ""])).unwrap_err(), RmqError::EmptyMessage);
    assert_eq!(f, before, "a push that errors changes nothing, the stale metadata included");
    assert_eq!(push(&mut f, 0, &lim(), PushMode::Range(5), None, &ms(&["b"])).unwrap().added, 1, "completely empty");
    assert_eq!(f.kind, Some(Kind::Range));
    assert!(f.waiting.is_empty(), "the stale records went with the kind");
    assert_eq!(
        push(&mut f, 0, &lim(), PushMode::Priority(1), None, &ms(&["c"])).unwrap_err(),
        RmqError::KindMismatch { holds: Kind::Range, pushed: Kind::Priority },
        "a queue that holds messages keeps its kind"
    );
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

/// Random sequences of every operation over groups, holds, backoff and retries, each
/// checked by the shared model (`core::model`, also driven by the fuzz target `rules`):
/// pops take exactly what the brute-force reference says (order, groups, due times,
/// holds), no two deliveries of a content or a group are in flight, a group that is free
/// has its best message deliverable, every copy of a content is followed (none appears or
/// is lost), metadata is consistent, delivery counts and the retry bound hold, and the
/// read-only views agree with the store.
#[test]
fn model_random_operations_keep_invariants() {
    for seed in 1..=1500u64 {
        let mut r = Rng(seed * 0x9E37_79B9_7F4A_7C15);
        let backoff = if seed % 3 == 0 { 10 } else { 0 };
        let lim = Limits { retries: (seed % 4) as u32, max_message_bytes: 8, backoff_ms: backoff, backoff_max_ms: 40, ..lim() };
        let mut model = Model::new(1_000_000, lim);
        let words: Vec<Vec<u8>> = (0..7).map(|i| vec![b'a' + i as u8]).collect();
        let groups: [Option<&[u8]>; 4] = [None, Some(b"g1"), Some(b"g2"), Some(b"g:3")];
        for step in 0..300 {
            let now = model.now + r.below(25) as i64;
            model.step(&Op::Clock(now)).unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            let w = words[r.below(words.len() as u64) as usize].clone();
            let op = match r.below(11) {
                0..=2 => {
                    let mode = match (model.s.kind(), r.below(3)) {
                        (Some(Kind::Range), _) | (None, 0) => PushMode::Range(1 + r.below(50) as i64),
                        (Some(Kind::Priority), _) | (None, 1) => PushMode::Priority(r.below(5) as i64),
                        _ => PushMode::Delay(r.below(50) as i64),
                    };
                    let group = groups[r.below(4) as usize].map(<[u8]>::to_vec);
                    Op::Push { mode, group, msgs: vec![w] }
                }
                3 | 4 => Op::Pop { count: 1 + r.below(3) as usize, lease: 1 + r.below(60) as i64, named: r.below(2) == 0 },
                5 => Op::Ack(vec![w]),
                6 => {
                    let delay = [None, Some(0), Some(r.below(30) as i64)][r.below(3) as usize];
                    Op::Nack { m: w, delay, dead: r.below(6) == 0 }
                }
                7 => Op::Sweep(1 + r.below(4) as usize),
                8 => {
                    let mode = match model.s.kind() {
                        Some(Kind::Priority) => PushMode::Priority(r.below(5) as i64),
                        _ => PushMode::Delay(r.below(50) as i64),
                    };
                    let group = groups[r.below(4) as usize].map(<[u8]>::to_vec);
                    let prefix = [None, Some(b"".to_vec()), Some(b"p ".to_vec())][r.below(3) as usize].clone();
                    let ids: [&[u8]; 3] = [b"d1", b"d2", b"d3"];
                    let dedup = (prefix.is_none() || r.below(2) == 0).then(|| {
                        (
                            ids[r.below(3) as usize].to_vec(),
                            1 + r.below(80) as i64,
                            [None, Some(b"n".to_vec())][r.below(2) as usize].clone(),
                        )
                    });
                    let mut msgs = vec![w];
                    if r.below(4) == 0 {
                        msgs.push(msgs[0].clone());
                    }
                    Op::LedgerPush { mode, group, msgs, prefix, dedup }
                }
                9 => {
                    if r.below(2) == 0 {
                        Op::Claim { count: 1 + r.below(3) as usize, stale: 1 + r.below(60) as i64 }
                    } else {
                        let claimed: Vec<Vec<u8>> = model.l.claims.keys().cloned().collect();
                        let pick = claimed.get(r.below(claimed.len().max(1) as u64) as usize).cloned().unwrap_or(w);
                        Op::Done(vec![pick])
                    }
                }
                _ => match r.below(5) {
                    // Rarely: they end the run's state, which the rest must build again.
                    4 if r.below(8) == 0 => {
                        if r.below(3) == 0 {
                            Op::Drop
                        } else {
                            Op::Purge { dead: r.below(2) == 0 }
                        }
                    }
                    0 | 4 => Op::Cancel(vec![w]),
                    1 => Op::Replay(1 + r.below(3) as usize),
                    2 => Op::AckId(vec![r.below(4) as usize, r.below(4) as usize]),
                    _ => Op::Extend { m: w, ms: 10 },
                },
            };
            model.step(&op).unwrap_or_else(|e| panic!("seed {seed} step {step}: {op:?}: {e}"));
        }
    }
}

#[test]
fn next_due_after_skips_scores_due_now_near_2_pow_53() {
    // (now + 1) as f64 rounds back to now at 2^53: a score due now must not be "after"
    // (a blocked consumer's wake-up would be armed in the past, again and again).
    let top = crate::core::kind::MAX_EXACT;
    let mut s = MemStore::default();
    push(&mut s, 0, &lim(), PushMode::At(top), None, &ms(&["a"])).unwrap();
    assert_eq!(next_due_after(&s, top - 1), Some(top));
    assert_eq!(pop(&mut s, top, 1, top + 10).got, vec![(m("a"), 1)]);
    // A new copy of the content in flight: due, but skipped by pops.
    assert_eq!(push(&mut s, top, &lim(), PushMode::At(top), None, &ms(&["a"])).unwrap().added, 1);
    assert!(pop(&mut s, top, 1, top + 10).got.is_empty());
    assert_eq!(next_due_after(&s, top), None, "due now is not 'after'");
    // A priority hold ending at 2^53 + 1, which a double rounds to 2^53: a pop at 2^53
    // releases it, so it is not due after 2^53.
    let mut p = MemStore::default();
    push(&mut p, top, &lim(), PushMode::Priority(1), None, &ms(&["a"])).unwrap();
    pop(&mut p, top, 1, top + 10);
    assert_eq!(nack(&mut p, top, &lim(), &m("a"), Some(1), false), Some(Rollback::Requeued));
    assert_eq!(p.len(Set::Hold), 1);
    assert_eq!(next_due_after(&p, top), None);
    assert_eq!(pop(&mut p, top, 1, top + 10).got, vec![(m("a"), 2)]);
}

#[test]
fn has_deliverable_looks_at_the_group_of_an_ended_hold() {
    let mut s = MemStore::default();
    grouped(&mut s, 0, PushMode::Priority(5), "g", &["x"]);
    assert_eq!(pop(&mut s, 0, 1, 1000).got, vec![(m("x"), 1)]);
    assert_eq!(nack(&mut s, 0, &lim(), &m("x"), Some(50), false), Some(Rollback::Requeued));
    // the v5 contract: a message of g pushed while x is held waits behind x (the whole group waits).
    grouped(&mut s, 0, PushMode::Priority(1), "g", &["y"]);
    assert!(!has_deliverable(&s, 10), "x's group waits for x: a pop would take nothing");
    assert!(pop(&mut s, 10, 1, 1000).got.is_empty());
    // When its delay ends, x is deliverable, then y.
    assert!(has_deliverable(&s, 50));
    assert_eq!(pop(&mut s, 50, 1, 1000).got, vec![(m("x"), 2)]);
    assert!(!has_deliverable(&s, 50), "x's group is busy");
    ack(&mut s, &ms(&["x"]));
    assert_eq!(pop(&mut s, 50, 1, 1000).got, vec![(m("y"), 1)]);
}

#[test]
fn a_name_ends_only_its_own_delivery() {
    let now = 1_764_300_000_000;
    let mut s = MemStore::default();
    push(&mut s, now, &lim(), PushMode::Priority(1), None, &ms(&["a", "b"])).unwrap();
    assert_eq!(pop(&mut s, now, 1, now + 10).first_id, None, "a plain pop names nothing");
    assert!(s.flights.values().all(|f| f.id.is_none()));
    let out = pop_named(&mut s, now, 5, now + 10);
    let first = out.first_id.expect("named");
    assert_eq!(out.got.len(), 1);
    assert_eq!(named(&s, first), Some(out.got[0].0.clone()));
    assert_eq!(named(&s, first + 1), None, "a name not given");
    // Expired and delivered again: the old name no longer names it.
    assert_eq!(sweep(&mut s, now + 11, &lim(), usize::MAX).expired, 2);
    let second = pop_named(&mut s, now + 11, 2, now + 20).first_id.unwrap();
    assert!(second > first);
    assert_eq!(named(&s, first), None);
    assert!(named(&s, second).is_some());
    // Acked by content, the queue empties: the next names still come after the earlier
    // ones, even at the same ms.
    ack(&mut s, &ms(&["a", "b"]));
    assert!(s.is_empty());
    push(&mut s, now + 11, &lim(), PushMode::Priority(1), None, &ms(&["b"])).unwrap();
    let third = pop_named(&mut s, now + 11, 1, now + 30).first_id.unwrap();
    assert!(third > second);
    assert_eq!(named(&s, second), None);
}

/// Pops one at a time at `now`, acking each: the order a group is consumed in.
fn drain(s: &mut MemStore, now: i64) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((m, _)) = pop(s, now, 1, now + 1000).got.pop() {
        ack(s, std::slice::from_ref(&m));
        out.push(String::from_utf8_lossy(&m).into_owned());
    }
    out
}

#[test]
fn a_rolled_back_grouped_message_goes_again_before_its_groups_later_ones() {
    // the v5 contract, for every kind and every rollback: NACK, NACK DELAY 0, a lease run out.
    for kind in [Kind::Fixed, Kind::Range, Kind::Priority] {
        for how in 0..3 {
            let mut s = MemStore::default();
            let mode = match kind {
                Kind::Fixed => PushMode::Delay(0),
                Kind::Range => PushMode::Range(1),
                Kind::Priority => PushMode::Priority(1),
            };
            grouped(&mut s, 90, mode, "o", &["created", "paid", "shipped"]);
            assert_eq!(names(&pop(&mut s, 100, 1, 200).got), pairs(&[("created", 1)]));
            match how {
                0 => assert_eq!(nack(&mut s, 150, &lim(), &m("created"), None, false), Some(Rollback::Requeued)),
                1 => assert_eq!(nack(&mut s, 150, &lim(), &m("created"), Some(0), false), Some(Rollback::Requeued)),
                _ => assert_eq!(sweep(&mut s, 200, &lim(), 10).expired, 1),
            }
            assert!(s.meta_consistent(), "{kind:?} {how}");
            assert_eq!(drain(&mut s, 300), ["created", "paid", "shipped"], "{kind:?} rollback {how}");
        }
    }
}

#[test]
fn a_group_waits_out_its_rolled_back_messages_retry_delay() {
    for kind in [Kind::Fixed, Kind::Range, Kind::Priority] {
        let mut s = MemStore::default();
        let mode = match kind {
            Kind::Fixed => PushMode::Delay(0),
            Kind::Range => PushMode::Range(1),
            Kind::Priority => PushMode::Priority(1),
        };
        grouped(&mut s, 90, mode, "o", &["a", "b"]);
        assert_eq!(names(&pop(&mut s, 100, 1, 200).got), pairs(&[("a", 1)]));
        push(&mut s, 90, &lim(), mode, None, &ms(&["free"])).unwrap();
        assert_eq!(nack(&mut s, 100, &lim(), &m("a"), Some(50), false), Some(Rollback::Requeued));
        // A message pushed into the group meanwhile waits too, even one that comes first.
        let early = match kind {
            Kind::Priority => PushMode::Priority(9),
            Kind::Range => PushMode::Range(1),
            _ => PushMode::Delay(0),
        };
        grouped(&mut s, 110, early, "o", &["late"]);
        assert!(s.meta_consistent());
        let taken: Vec<Vec<u8>> = pop(&mut s, 120, 10, 1000).got.into_iter().map(|(m, _)| m).collect();
        assert!(taken.iter().all(|t| t == &m("free")), "{kind:?}: nothing of the group before its retry: {taken:?}");
        ack(&mut s, &taken);
        assert!(!has_deliverable(&s, 120));
        assert_eq!(next_due_after(&s, 120), Some(150), "{kind:?}: consumers wake at the retry");
        assert_eq!(names(&pop(&mut s, 150, 10, 1000).got), pairs(&[("a", 2)]), "{kind:?}: the retry alone");
        ack(&mut s, &ms(&["a"]));
        let rest = drain(&mut s, 150);
        let want: &[&str] = if kind == Kind::Priority { &["late", "b"] } else { &["b", "late"] };
        assert_eq!(rest, want, "{kind:?}: then the group in the queue's order");
    }
}

#[test]
fn a_pinned_head_stays_first_through_pushes_cancel_and_death() {
    let mut s = MemStore::default();
    grouped(&mut s, 100, PushMode::Delay(0), "g", &["a", "b", "c"]);
    pop(&mut s, 100, 1, 200);
    nack(&mut s, 100, &lim(), &m("a"), Some(30), false);
    assert_eq!(s.best_indexed(b"g").map(|h| (h.m, h.pinned)), Some((m("a"), true)));
    // A push of it into its group keeps the pin (at its new due time); one into another
    // group ends it, and its old group goes on in order.
    grouped(&mut s, 100, PushMode::Delay(40), "g", &["a"]);
    assert!(pop(&mut s, 120, 5, 300).got.is_empty(), "still waited for");
    grouped(&mut s, 100, PushMode::Delay(40), "h", &["a"]);
    assert!(s.meta_consistent());
    assert_eq!(names(&pop(&mut s, 120, 5, 300).got), pairs(&[("b", 1)]));
    ack(&mut s, &ms(&["b"]));
    // Cancelled, its group goes on.
    grouped(&mut s, 120, PushMode::Delay(0), "g", &["d"]);
    assert_eq!(names(&pop(&mut s, 120, 5, 300).got), pairs(&[("c", 1)]));
    assert_eq!(nack(&mut s, 120, &lim(), &m("c"), Some(100), false), Some(Rollback::Requeued));
    assert!(pop(&mut s, 130, 5, 300).got.iter().all(|(m, _)| m.as_slice() != b"d"));
    assert_eq!(cancel(&mut s, &ms(&["c"])), 1);
    assert!(s.meta_consistent());
    assert_eq!(names(&pop(&mut s, 130, 5, 300).got), pairs(&[("d", 1)]));
    // Dead, likewise.
    grouped(&mut s, 130, PushMode::Delay(0), "k", &["x", "y"]);
    pop(&mut s, 130, 1, 300);
    let dead_lim = Limits { retries: 0, ..lim() };
    assert_eq!(nack(&mut s, 130, &dead_lim, &m("x"), None, false), Some(Rollback::Dead));
    assert_eq!(names(&pop(&mut s, 130, 5, 300).got), pairs(&[("y", 1)]));
}

#[test]
fn a_copy_pushed_while_in_flight_is_the_rolled_back_message() {
    // The content re-pushed into its group while in flight waits behind... itself: after
    // the rollback, that copy heads the group, not the group's next message.
    let mut s = MemStore::default();
    grouped(&mut s, 100, PushMode::Delay(0), "g", &["a", "b"]);
    pop(&mut s, 100, 1, 200);
    grouped(&mut s, 100, PushMode::Delay(0), "g", &["a"]);
    nack(&mut s, 100, &lim(), &m("a"), None, false);
    assert!(s.meta_consistent());
    assert_eq!(drain(&mut s, 100), ["a", "b"]);
}

#[test]
fn a_pop_takes_a_pinned_head_in_its_turn_past_a_copy_beside_it() {
    // A copy of the group's found in `Store` before its pinned head (its content was in
    // flight when pushed) is parked, and the head comes out in the queue's order, before
    // a worse message, not after it.
    let mut s = MemStore::default();
    push(&mut s, 100, &lim(), PushMode::Priority(1), None, &ms(&["x"])).unwrap();
    assert_eq!(names(&pop(&mut s, 100, 1, 200).got), pairs(&[("x", 1)]));
    grouped(&mut s, 100, PushMode::Priority(7), "g", &["a"]);
    grouped(&mut s, 100, PushMode::Priority(8), "g", &["x"]);
    assert_eq!(names(&pop(&mut s, 100, 1, 200).got), pairs(&[("a", 1)]));
    ack(&mut s, &ms(&["x"]));
    assert_eq!(nack(&mut s, 100, &lim(), &m("a"), Some(0), false), Some(Rollback::Requeued));
    push(&mut s, 100, &lim(), PushMode::Priority(-5), None, &ms(&["e"])).unwrap();
    assert!(s.meta_consistent());
    assert_eq!(names(&pop(&mut s, 100, 3, 200).got), pairs(&[("a", 2), ("e", 1)]));
    ack(&mut s, &ms(&["a"]));
    assert_eq!(names(&pop(&mut s, 100, 3, 200).got), pairs(&[("x", 1)]));
}
