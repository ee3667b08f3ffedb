//! Command argument parsing (src/cmd/args.rs, src/cmd/schedule_args.rs) and strict integers (core::num) on argument
//! vectors of arbitrary bytes: no parser panics; whatever one accepts is within the
//! the contract's bounds, and printed back in canonical form it parses to the same thing; every
//! error has its reply text; `parse_int` agrees with the standard parser.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rmq::args::{self, PolicyOp, MAX_GROUP_BYTES, MAX_POP_COUNT, MAX_QUANTUM, MAX_RELATIVE};
use rmq::core::kind::{PushMode, MAX_EXACT, MIN_AT};
use rmq::core::ledger_records::MAX_TAG;
use rmq::core::num::parse_int;
use rmq::core::policy::Policy;
use rmq::schedule_args::{self, ScheduleOp};

const WORDS: &[&str] = &[
    "RANGE",
    "priority",
    "AT",
    "Delay",
    "GROUP",
    "SEQUENCE",
    "dedup",
    "NOTE",
    "MESSAGES",
    "messages",
    "CLAIM",
    "done",
    "STALE",
    "COUNT",
    "lease",
    "BLOCK",
    "LIMIT",
    "QUANTUM",
    "MATCH",
    "CURSOR",
    "EVERY",
    "CRON",
    "TZ",
    "START",
    "END",
    "TIMES",
    "DEL",
    "LIST",
    "*/5 * * * *",
    "UTC",
    "DEAD",
    "SET",
    "get",
    "RESET",
    "ADVANCE",
    "retries",
    "LEASE-MS",
    "max-queue-length",
    "backoff-ms",
    "BACKOFF-MAX-MS",
    "rate",
    "rate-window-ms",
    "q",
    "q{x}",
    "",
];
const EDGES: &[i64] = &[
    0,
    1,
    -1,
    2,
    3,
    7,
    16,
    1000,
    10_000,
    10_001,
    16_384,
    16_385,
    32_768,
    1_000_000,
    1_000_000_000,
    1 << 31,
    (1 << 31) + 1,
    1 << 52,
    (1 << 52) + 1,
    1 << 53,
    (1 << 53) + 1,
    -(1 << 53),
    -(1 << 53) - 1,
    946_684_799_999,
    946_684_800_000,
    1 << 62,
    (1 << 62) + 1,
    i64::MAX,
    i64::MIN,
];

#[derive(Arbitrary, Debug)]
enum Tok {
    Word(u8),
    Num(i64),
    Edge(u8),
    /// A number in another spelling (leading zeros, '+', spaces, a fraction).
    Odd(u8, i64),
    Raw(Vec<u8>),
}

impl Tok {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Tok::Word(i) => WORDS[*i as usize % WORDS.len()].as_bytes().to_vec(),
            Tok::Num(v) => v.to_string().into_bytes(),
            Tok::Edge(i) => EDGES[*i as usize % EDGES.len()].to_string().into_bytes(),
            Tok::Odd(k, v) => match k % 5 {
                0 => format!("0{v}"),
                1 => format!("+{v}"),
                2 => format!(" {v}"),
                3 => format!("{v}.0"),
                _ => format!("{v}\0"),
            }
            .into_bytes(),
            Tok::Raw(b) => b.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    cmd: u8,
    toks: Vec<Tok>,
    now: i64,
    raw: Vec<u8>,
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

/// `parse_int` by the standard parser: no '+', at most 19 digits.
fn reference_int(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if s.first() == Some(&b'+') || digits.len() > 19 {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn check_int(s: &[u8]) {
    let v = parse_int(s);
    assert_eq!(v, reference_int(s), "{s:?}");
    if let Some(v) = v {
        assert_eq!(parse_int(v.to_string().as_bytes()), Some(v));
    }
}

fn mode_words(m: PushMode) -> (&'static str, i64) {
    match m {
        PushMode::Range(v) => ("RANGE", v),
        PushMode::Priority(v) => ("PRIORITY", v),
        PushMode::At(v) => ("AT", v),
        PushMode::Delay(v) => ("DELAY", v),
    }
}

fn pop_words(p: &args::PopArgs) -> Vec<Vec<u8>> {
    let mut out = vec![b("COUNT"), p.count.to_string().into_bytes()];
    if let Some(l) = p.lease {
        out.extend([b("LEASE"), l.to_string().into_bytes()]);
    }
    if let Some(t) = p.block {
        out.extend([b("BLOCK"), t.to_string().into_bytes()]);
    }
    if p.ids {
        out.push(b("IDS"));
    }
    out
}

fn check_pop(p: &args::PopArgs) {
    assert!((1..=MAX_POP_COUNT as usize).contains(&p.count), "{p:?}");
    assert!(p.lease.is_none_or(|l| (1..=MAX_RELATIVE).contains(&l)), "{p:?}");
    assert!(p.block.is_none_or(|t| (0..=MAX_RELATIVE).contains(&t)), "{p:?}");
}

fn valid_queue(q: &[u8]) -> bool {
    !q.is_empty() && !q.iter().any(|&c| c == b'{' || c == b'}')
}

fuzz_target!(|inp: Input| {
    let owned: Vec<Vec<u8>> = inp.toks.iter().map(Tok::bytes).collect();
    let a = refs(&owned);
    for t in &owned {
        check_int(t);
    }
    check_int(&inp.raw);
    let q = a.first().copied().unwrap_or_default();
    let with_q = |rest: Vec<Vec<u8>>| -> Vec<Vec<u8>> { std::iter::once(q.to_vec()).chain(rest).collect() };
    let errors = match inp.cmd % 17 {
        0 => match args::push(&a) {
            Ok(p) => {
                assert!(valid_queue(q));
                let options = p.sequence.map_or(0, |_| 2) + p.dedup.as_ref().map_or(0, |d| 3 + d.note.map_or(0, |_| 2));
                // MESSAGES, and options given twice (the last counts), may come before the first message.
                assert!(p.first >= if p.group.is_some() { 5 } else { 3 } + options, "{p:?}");
                assert!(p.sequence.is_none_or(|s| s.len() <= MAX_TAG));
                assert!(p.dedup.as_ref().is_none_or(|d| !d.id.is_empty()
                    && d.id.len() <= MAX_TAG
                    && (1..=1 << 41).contains(&d.window)
                    && d.note.is_none_or(|n| n.len() <= MAX_TAG)));
                assert!(p.first < a.len(), "PUSH without a message: {p:?}");
                match p.mode {
                    PushMode::Range(v) => assert!((1..=MAX_RELATIVE).contains(&v)),
                    PushMode::Priority(v) => assert!((-MAX_EXACT..=MAX_EXACT).contains(&v)),
                    PushMode::At(v) => assert!((MIN_AT..=MAX_EXACT).contains(&v)),
                    PushMode::Delay(v) => assert!((0..=MAX_RELATIVE).contains(&v)),
                }
                assert!(p.group.is_none_or(|g| !g.is_empty() && g.len() <= MAX_GROUP_BYTES));
                let (word, v) = mode_words(p.mode);
                let mut again = with_q(vec![b(word), v.to_string().into_bytes()]);
                if let Some(g) = p.group {
                    again.extend([b("GROUP"), g.to_vec()]);
                }
                if let Some(s) = p.sequence {
                    again.extend([b("SEQUENCE"), s.to_vec()]);
                }
                if let Some(d) = &p.dedup {
                    again.extend([b("DEDUP"), d.id.to_vec(), d.window.to_string().into_bytes()]);
                    if let Some(n) = d.note {
                        again.extend([b("NOTE"), n.to_vec()]);
                    }
                }
                again.push(b("MESSAGES"));
                again.extend(a[p.first..].iter().map(|m| m.to_vec()));
                let again = refs(&again);
                let p2 = args::push(&again).expect("canonical PUSH");
                assert_eq!((p2.mode, p2.group, p2.sequence, &p2.dedup), (p.mode, p.group, p.sequence, &p.dedup));
                assert_eq!(&again[p2.first..], &a[p.first..]);
                None
            }
            Err(e) => Some(e),
        },
        1 => match args::pop(&a) {
            Ok(p) => {
                check_pop(&p);
                assert!(valid_queue(q));
                assert_eq!(args::pop(&refs(&with_q(pop_words(&p)))), Ok(p));
                None
            }
            Err(e) => Some(e),
        },
        2 => match args::tpop(&a) {
            Ok(t) => {
                check_pop(&t.pop);
                assert!(t.slots.is_power_of_two() && t.slots <= 16384, "{t:?}");
                assert!((1..=MAX_QUANTUM as usize).contains(&t.quantum), "{t:?}");
                let mut again = vec![q.to_vec(), t.slots.to_string().into_bytes()];
                again.extend(pop_words(&t.pop));
                again.extend([b("QUANTUM"), t.quantum.to_string().into_bytes()]);
                assert_eq!(args::tpop(&refs(&again)), Ok(t));
                None
            }
            Err(e) => Some(e),
        },
        3 => match args::nack(&a) {
            Ok(n) => {
                assert!(valid_queue(q) && a.len() >= 2);
                assert!(n.delay.is_none_or(|d| (0..=MAX_RELATIVE).contains(&d)));
                let mut again = vec![q.to_vec(), a[1].to_vec()];
                if let Some(d) = n.delay {
                    again.extend([b("DELAY"), d.to_string().into_bytes()]);
                }
                if n.dead {
                    again.push(b("DEAD"));
                }
                assert_eq!(args::nack(&refs(&again)), Ok(n));
                None
            }
            Err(e) => Some(e),
        },
        4 => {
            let (r, word): (_, &str) = if inp.now % 2 == 0 { (args::sweep(&a), "LIMIT") } else { (args::replay(&a), "COUNT") };
            match r {
                Ok(n) => {
                    assert!(valid_queue(q) && a.len() <= 3);
                    let again = match n {
                        Some(n) => {
                            assert!(n >= 1);
                            with_q(vec![b(word), n.to_string().into_bytes()])
                        }
                        None => with_q(vec![]),
                    };
                    let r2 = if word == "LIMIT" { args::sweep(&refs(&again)) } else { args::replay(&refs(&again)) };
                    assert_eq!(r2, Ok(n));
                    None
                }
                Err(e) => Some(e),
            }
        }
        5 => match args::pending(&a) {
            Ok(n) => {
                assert!((1..=1_000_000).contains(&n) && valid_queue(q));
                assert_eq!(args::pending(&refs(&with_q(vec![b("COUNT"), n.to_string().into_bytes()]))), Ok(n));
                None
            }
            Err(e) => Some(e),
        },
        6 => match args::extend(&a) {
            Ok(ms) => {
                assert!((1..=MAX_RELATIVE).contains(&ms) && a.len() == 3 && valid_queue(q));
                None
            }
            Err(e) => Some(e),
        },
        7 => match args::policy(&a) {
            Ok(PolicyOp::Set(pairs)) => {
                assert!(!pairs.is_empty() && valid_queue(q));
                let mut p = Policy::default();
                let mut again = with_q(vec![b("SET")]);
                for (f, v) in &pairs {
                    let bounds = f.bounds();
                    assert!((bounds.min..=bounds.max).contains(v), "{f:?} {v}");
                    p.set(*f, *v);
                    again.extend([f.name().as_bytes().to_vec(), v.to_string().into_bytes()]);
                }
                assert_eq!(args::policy(&refs(&again)), Ok(PolicyOp::Set(pairs)));
                assert_eq!(Policy::decode(p.encode().as_bytes()), p, "policy encoding round trip");
                None
            }
            Ok(op) => {
                assert!(a.len() == 2 && valid_queue(q), "{op:?}");
                None
            }
            Err(e) => Some(e),
        },
        8 => match args::testclock(&a, inp.now.rem_euclid(MAX_EXACT + 1)) {
            Ok(Some(t)) => {
                assert!((0..=MAX_EXACT).contains(&t), "{t}");
                None
            }
            Ok(None) => None,
            Err(e) => Some(e),
        },
        9 => match args::route(&a) {
            Ok(slots) => {
                assert!(slots.is_power_of_two() && slots <= 16384 && a.len() == 3);
                None
            }
            Err(e) => Some(e),
        },
        10 => args::messages(&a, "rmq.ack").err(),
        11 => args::info(&a).err(),
        12 => match args::queues(&a) {
            Ok(o) => {
                assert!((1..=args::MAX_QUEUES_COUNT as usize).contains(&o.count), "{o:?}");
                let mut again = vec![b("COUNT"), o.count.to_string().into_bytes()];
                if let Some(p) = o.pattern {
                    again.extend([b("MATCH"), p.to_vec()]);
                }
                if let Some(c) = o.cursor {
                    again.extend([b("CURSOR"), c.to_vec()]);
                }
                assert_eq!(args::queues(&refs(&again)), Ok(o));
                None
            }
            Err(e) => Some(e),
        },
        13 => match schedule_args::schedule(&a) {
            Ok(ScheduleOp::Set { name, spec }) => {
                assert!(valid_queue(q) && !name.is_empty() && name.len() <= schedule_args::MAX_NAME_BYTES);
                assert_eq!(spec.check(), Ok(()), "an accepted schedule is within its bounds");
                let tail = [&b" MESSAGES "[..], &spec.message].concat();
                assert!(spec.text.ends_with(&tail), "LIST shows the push with MESSAGES");
                None
            }
            Ok(_) => None,
            Err(e) => Some(e),
        },
        14 => {
            // A delivery id is an integer from 1 to 2^53, whichever command takes it.
            let ids = args::ackid(&a).map(|ids| (ids, None)).or_else(|_| args::nackid(&a).map(|(id, n)| (vec![id], Some(n))));
            match ids {
                Ok((ids, _)) => {
                    assert!(valid_queue(q) && !ids.is_empty() && ids.iter().all(|&i| (1..=1u64 << 53).contains(&i)));
                    if let Ok((id, ms)) = args::extendid(&a) {
                        assert!(ids == [id] && (1..=MAX_RELATIVE).contains(&ms));
                    }
                    None
                }
                Err(e) => Some(e),
            }
        }
        15 => match args::redrive(&a) {
            Ok(args::RedriveOp::Claim { count, stale }) => {
                assert!(valid_queue(q) && (1..=MAX_POP_COUNT as usize).contains(&count) && (1..=1 << 41).contains(&stale));
                None
            }
            Ok(args::RedriveOp::Done(first)) => {
                assert!(valid_queue(q) && first == 2 && first < a.len());
                None
            }
            Err(e) => Some(e),
        },
        _ => {
            // Policies as stored: decoding anything keeps only valid fields, and is stable.
            let p = Policy::decode(&inp.raw);
            assert_eq!(Policy::decode(p.encode().as_bytes()), p);
            args::queue(&a, "rmq.x").err()
        }
    };
    if let Some(e) = errors {
        let m = e.message();
        assert!(m.starts_with("ERR ") || m.starts_with("WRONGTYPE "), "{m}");
    }
});
