//! The queue rules (core::rules) over the in-memory store, driven by arbitrary sequences
//! of every operation (push in each mode with or without a group, pop, ack, nack with a
//! delay or to dead, extend, cancel, sweep, replay, purge, drop, pushes with SEQUENCE and
//! DEDUP, redrive claims and their end, the timer releasing holds, settings changing, the
//! clock moving or set back) with numbers up to the contract's bounds (2^53 ms,
//! |priority| <= 2^53, counts up to usize::MAX), each step checked by the shared model
//! (`core::model`, also behind the unit test `model_random_operations_keep_invariants`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rmq::core::kind::{Kind, PushMode, MAX_EXACT, MIN_AT};
use rmq::core::model::{Model, Op};
use rmq::core::policy::Limits;
use rmq::core::queue_store::Store;

const MAX_RELATIVE: i64 = 1 << 52;
const CONTENTS: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e", b"f", b"x:1", b"\0", b"", b"longer than 8"];
const GROUPS: &[&[u8]] = &[b"g1", b"g2", b"g:3", b"\0"];
const PREFIXES: &[&[u8]] = &[b"", b"p ", b"gw1 "];
const DEDUP_IDS: &[&[u8]] = &[b"d1", b"d2", b"d\0 3"];

/// A number, mapped into an operation's range: small, at an edge, or anywhere.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Num {
    Small(u8),
    Edge(u8),
    Any(u64),
}

impl Num {
    fn within(self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        match self {
            Num::Small(v) => lo.saturating_add(v as i64).min(hi),
            Num::Edge(i) => {
                let edges = [lo, lo + 1, hi - 1, hi, 0, 1, 1 << 31, MIN_AT, MAX_RELATIVE, MAX_EXACT - 1, MAX_EXACT, -MAX_EXACT];
                edges[i as usize % edges.len()].clamp(lo, hi)
            }
            Num::Any(v) => (lo as i128 + (v as u128 % span) as i128) as i64,
        }
    }
    fn count(self, hi: i64) -> usize {
        match self {
            Num::Edge(i) if i % 5 == 0 => usize::MAX,
            n => n.within(1, hi) as usize,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct LimitsIn {
    retries: Num,
    max_message_bytes: Num,
    max_queue_length: Num,
    backoff_ms: Num,
    backoff_max_ms: Num,
    journal: Num,
}

impl LimitsIn {
    fn limits(&self) -> Limits {
        Limits {
            retries: self.retries.within(0, 1000) as u32,
            lease_ms: 30_000,
            max_message_bytes: self.max_message_bytes.within(1, 536_870_912),
            max_queue_length: match self.max_queue_length {
                Num::Small(v) => (v % 12) as i64,
                n => n.within(0, 1 << 62),
            },
            backoff_ms: self.backoff_ms.within(0, 1 << 31),
            backoff_max_ms: self.backoff_max_ms.within(0, 1 << 31),
            rate: 0,
            rate_window_ms: 1000,
            paused: false,
            // Off or a few events: the rules' journal notes run beside every operation.
            journal: self.journal.within(0, 8),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum FuzzOp {
    Push { mode: u8, value: Num, group: u8, msgs: Vec<u8> },
    Pop { count: Num, lease: Num, named: bool },
    Ack(Vec<u8>),
    AckId(Vec<u8>),
    Nack { m: u8, delay: Option<Num>, dead: bool },
    Sweep(Num),
    Extend { m: u8, ms: Num },
    Cancel(Vec<u8>),
    Replay(Num),
    Purge(bool),
    Drop,
    LedgerPush { mode: u8, value: Num, group: u8, msgs: Vec<u8>, prefix: Option<u8>, dedup: Option<(u8, Num, Option<u8>)> },
    Claim { count: Num, stale: Num },
    Done(Vec<u8>),
    Release(Num),
    Limits(LimitsIn),
    Advance(Num),
    SetClock(Num),
}

#[derive(Arbitrary, Debug)]
struct Input {
    start: Num,
    limits: LimitsIn,
    ops: Vec<FuzzOp>,
}

fn content(i: u8) -> Vec<u8> {
    CONTENTS[i as usize % CONTENTS.len()].to_vec()
}

fn contents(v: &[u8]) -> Vec<Vec<u8>> {
    v.iter().take(4).map(|&i| content(i)).collect()
}

fn op(model: &Model, f: &FuzzOp) -> Op {
    match f {
        FuzzOp::LedgerPush { mode, value, group, msgs, prefix, dedup } => {
            let Op::Push { mode, group, msgs } = op(model, &FuzzOp::Push { mode: *mode, value: *value, group: *group, msgs: msgs.clone() }) else {
                unreachable!("a push")
            };
            let prefix = prefix.map(|p| PREFIXES[p as usize % PREFIXES.len()].to_vec());
            // Windows from 1 ms to 2^41 (the contract's bounds); without SEQUENCE, always DEDUP.
            let dedup = dedup.or(prefix.is_none().then_some((0, Num::Small(0), None))).map(|(id, window, note)| {
                (DEDUP_IDS[id as usize % DEDUP_IDS.len()].to_vec(), window.within(1, 1 << 41), note.map(|n| vec![n]))
            });
            Op::LedgerPush { mode, group, msgs, prefix, dedup }
        }
        FuzzOp::Claim { count, stale } => Op::Claim { count: count.within(1, 10_000) as usize, stale: stale.within(1, 1 << 41) },
        // Mostly messages claimed (numbered contents too), else any content.
        FuzzOp::Done(v) => {
            let claimed: Vec<&Vec<u8>> = model.l.claims.keys().collect();
            Op::Done(v.iter().take(4).map(|&i| claimed.get(i as usize % 8).map_or_else(|| content(i), |m| (*m).clone())).collect())
        }
        FuzzOp::Push { mode, value, group, msgs } => {
            // Mostly the queue's own kind, so that most pushes are accepted.
            let pick = match (model.s.kind(), mode % 8) {
                (Some(Kind::Range), 0..=5) => 0,
                (Some(Kind::Priority), 0..=5) => 1,
                (Some(Kind::Fixed), 0..=5) => 2 + mode / 8 % 2,
                (_, m) => m % 4,
            };
            let mode = match pick {
                0 => PushMode::Range(value.within(1, MAX_RELATIVE)),
                1 => PushMode::Priority(value.within(-MAX_EXACT, MAX_EXACT)),
                2 => PushMode::At(value.within(MIN_AT, MAX_EXACT)),
                _ => PushMode::Delay(value.within(0, MAX_RELATIVE)),
            };
            let group = GROUPS.get(*group as usize % (GROUPS.len() + 2)).map(|g| g.to_vec());
            let mut msgs = contents(msgs);
            if msgs.is_empty() {
                msgs.push(content(0));
            }
            Op::Push { mode, group, msgs }
        }
        FuzzOp::Pop { count, lease, named } => {
            Op::Pop { count: count.within(1, 10_000) as usize, lease: lease.within(1, MAX_RELATIVE), named: *named }
        }
        FuzzOp::Ack(v) => Op::Ack(contents(v)),
        FuzzOp::AckId(v) => Op::AckId(v.iter().map(|&i| i as usize).collect()),
        FuzzOp::Nack { m, delay, dead } => Op::Nack { m: content(*m), delay: delay.map(|d| d.within(0, MAX_RELATIVE)), dead: *dead },
        FuzzOp::Sweep(n) => Op::Sweep(n.count(16)),
        FuzzOp::Extend { m, ms } => Op::Extend { m: content(*m), ms: ms.within(1, MAX_RELATIVE) },
        FuzzOp::Cancel(v) => Op::Cancel(contents(v)),
        FuzzOp::Replay(n) => Op::Replay(n.count(16)),
        FuzzOp::Purge(dead) => Op::Purge { dead: *dead },
        FuzzOp::Drop => Op::Drop,
        FuzzOp::Release(n) => Op::Release(n.count(1024)),
        FuzzOp::Limits(l) => Op::Limits(l.limits()),
        // The clock as RMQ.TESTCLOCK moves it: ADVANCE up to 2^52, capped at 2^53; SET.
        FuzzOp::Advance(ms) => Op::Clock(model.now.saturating_add(ms.within(0, MAX_RELATIVE)).min(MAX_EXACT)),
        FuzzOp::SetClock(t) => Op::Clock(t.within(0, MAX_EXACT)),
    }
}

fuzz_target!(|inp: Input| {
    let mut model = Model::new(inp.start.within(0, MAX_EXACT), inp.limits.limits());
    for (i, f) in inp.ops.iter().take(256).enumerate() {
        let op = op(&model, f);
        if let Err(e) = model.step(&op) {
            panic!("step {i}: {op:?}: {e}");
        }
    }
});
