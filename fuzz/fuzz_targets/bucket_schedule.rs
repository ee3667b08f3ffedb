//! The rate limiter's token bucket (core::bucket) and the timer's schedule
//! (core::due_index) on extreme inputs: no panic or overflow. The bucket never holds more
//! than its rate, fills without decreasing as time passes, and has a token at the time
//! `next_token_at` names; the schedule agrees with a plain map of queue to earliest time.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rmq::core::bucket::Bucket;
use rmq::core::kind::MAX_EXACT;
use rmq::core::due_index::Schedule;

#[derive(Arbitrary, Debug)]
enum BucketOp {
    /// Time passes by this many ms (or goes back, for a negative step).
    Pass(i32),
    /// Time jumps to a point in [0, 2^53].
    Jump(u64),
    /// Takes up to what is available (a pop takes no more).
    Take(u32),
    /// Waits until the next token is due.
    WaitForToken,
}

#[derive(Arbitrary, Debug)]
enum SchedOp {
    Note(u8, u8, i64),
    PopDue(i64),
    Clear,
}

#[derive(Arbitrary, Debug)]
struct Input {
    rate: u32,
    window: u32,
    start: u64,
    bucket: Vec<BucketOp>,
    sched: Vec<SchedOp>,
}

fuzz_target!(|inp: Input| {
    // The bounds of the policy fields: rate 1..=10^9 (0 = no bucket), window 1..=2^31.
    let rate = 1 + (inp.rate % 1_000_000_000) as i64;
    let window = 1 + (inp.window as i64 % (1 << 31));
    let clamp = |t: i64| t.clamp(0, MAX_EXACT);
    let mut now = clamp((inp.start % (MAX_EXACT as u64 + 1)) as i64);
    let mut b = Bucket::new(now, rate, window);
    let mut last = b.available(now, rate, window);
    assert!(last <= 1);
    for op in &inp.bucket {
        match op {
            BucketOp::Pass(ms) => now = clamp(now + *ms as i64),
            BucketOp::Jump(t) => now = (t % (MAX_EXACT as u64 + 1)) as i64,
            BucketOp::Take(n) => {
                let n = (*n as u64).min(b.available(now, rate, window));
                b.take(n);
                last = b.available(now, rate, window);
                continue;
            }
            BucketOp::WaitForToken => {
                if b.available(now, rate, window) == 0 {
                    let t = b.next_token_at(rate, window);
                    assert!(t > now, "no token now, yet the next one is due at {t}, now {now}");
                    now = now.max(t);
                    assert!(b.available(now, rate, window) >= 1, "no token at {t} (rate {rate}/{window} ms): {b:?}");
                }
            }
        }
        let a = b.available(now, rate, window);
        assert!(a <= rate as u64, "{a} tokens, rate {rate}");
        // Without a take, tokens never go (time running back adds none and takes none).
        assert!(a >= last, "tokens went from {last} to {a}");
        let full = b.is_full(now, rate, window);
        assert!(!full || a >= 1, "full with {a} tokens");
        last = a;
    }

    let mut s = Schedule::default();
    let mut model: BTreeMap<(i32, Vec<u8>), i64> = BTreeMap::new();
    for op in &inp.sched {
        match op {
            SchedOp::Note(db, q, t) => {
                let key = ((db % 4) as i32, vec![b'q', q % 8]);
                let changed = model.get(&key).is_none_or(|old| *t < *old);
                if changed {
                    model.insert(key.clone(), *t);
                }
                let first = model.values().min().copied();
                assert_eq!(s.note(key.0, &key.1, *t), changed && first == Some(*t), "{op:?}");
            }
            SchedOp::PopDue(now) => {
                let due = model.iter().map(|(k, t)| (*t, k.clone())).min().filter(|(t, _)| t <= now);
                if let Some((_, k)) = &due {
                    model.remove(k);
                }
                assert_eq!(s.pop_due(*now), due.map(|(_, k)| k));
            }
            SchedOp::Clear => {
                s.clear();
                model.clear();
            }
        }
        assert_eq!(s.next(), model.values().min().copied());
    }
});
