//! The metadata codec (core::codec): decoding arbitrary bytes never panics and is stable
//! (decode, encode, decode gives the same record); records as the rules make them
//! round-trip; park index keys sort like the queue; group scores are exact in a double.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rmq::core::codec::*;
use rmq::core::kind::{Kind, MAX_EXACT};
use rmq::core::queue_store::{Dead, Flight, Waiting};

#[derive(Arbitrary, Debug)]
struct Input {
    raw: Vec<u8>,
    deliveries: u32,
    priority: Option<i64>,
    group: Option<Vec<u8>>,
    a: i64,
    b: i64,
    m: Vec<u8>,
}

/// A priority as the rules keep it: an integer with |p| <= 2^53 (or past it by a retry
/// delay, for hold release times).
fn exact(p: i64) -> f64 {
    p.clamp(-MAX_EXACT, MAX_EXACT) as f64
}

/// What an encoder writes (they write into a buffer the caller reuses).
fn encoded<T>(encode: fn(&T, &mut Vec<u8>), v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, &mut out);
    out
}

fuzz_target!(|inp: Input| {
    let w = decode_waiting(&inp.raw);
    assert_eq!(decode_waiting(&encoded(encode_waiting, &w)), w, "waiting {:?}", inp.raw);
    let f = decode_flight(&inp.raw);
    assert!(f.deliveries >= 1);
    assert_eq!(decode_flight(&encoded(encode_flight, &f)), f, "flight {:?}", inp.raw);
    let d = decode_dead(&inp.raw);
    assert_eq!(decode_dead(&encoded(encode_dead, &d)), d, "dead {:?}", inp.raw);

    let priority = inp.priority.map(exact);
    let w = Waiting { deliveries: inp.deliveries, held_priority: priority, group: inp.group.clone() };
    assert_eq!(decode_waiting(&encoded(encode_waiting, &w)), w);
    let f = Flight { deliveries: inp.deliveries.max(1), priority, group: inp.group.clone(), id: (inp.deliveries % 2 == 1).then_some(inp.deliveries as u64) };
    assert_eq!(decode_flight(&encoded(encode_flight, &f)), f);
    let d = Dead { priority, group: inp.group.clone() };
    assert_eq!(decode_dead(&encoded(encode_dead, &d)), d);

    let mut buf = Vec::new();
    field(WAITING, &inp.m, &mut buf);
    assert_eq!((buf[0], &buf[1..]), (WAITING, &inp.m[..]));

    let (a, b) = (exact(inp.a), exact(inp.b));
    for kind in [Kind::Range, Kind::Priority, Kind::Fixed] {
        let (ka, kb) = (order_key(kind, a), order_key(kind, b));
        if a == b {
            assert_eq!(ka, kb);
        } else if (a < b) == kind.is_timed() {
            assert!(ka < kb, "{kind:?}: {a} before {b}");
        } else {
            assert!(ka > kb, "{kind:?}: {b} before {a}");
        }
        let mut member = Vec::new();
        index_member(kind, a, &inp.m, &mut member);
        assert_eq!(index_message(&member), &inp.m[..]);
        assert_eq!(&member[..8], &ka);
    }
    let _ = index_message(&inp.raw);
    let g = group_score(&inp.m);
    assert!((0.0..(1u64 << 53) as f64).contains(&g) && g.fract() == 0.0);
});
