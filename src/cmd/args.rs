//! Argument parsing for every command, over plain byte slices (no FFI), so every rule on
//! bad input is unit-tested. Messages are not copied: a parse gives the index where they
//! start.

use crate::core::error::{Result, RmqError};
use crate::core::kind::{self, check_group, Bound, PushMode, MAX_EXACT};
use crate::core::names::is_queue_name;
// Where the fuzz targets (fuzz/) find the bounds they check replies against.
pub use crate::core::kind::{MAX_GROUP_BYTES, MAX_RELATIVE};
use crate::core::num::parse_int;
use crate::core::policy::Field;
use crate::core::route::MAX_SLOTS;

pub const MAX_POP_COUNT: i64 = 10_000;
/// Most messages RMQ.TPOP takes from one queue per turn.
pub const MAX_QUANTUM: i64 = 10_000;
pub const DEFAULT_PENDING: usize = 100;

pub(crate) fn int_in(opt: &'static str, val: &[u8], min: i64, max: i64, must: &'static str) -> Result<i64> {
    match parse_int(val) {
        Some(v) if v >= min && v <= max => Ok(v),
        _ => Err(RmqError::BadValue(opt, must)),
    }
}

/// An integer argument within its bound.
pub(crate) fn bounded(b: &Bound, val: &[u8]) -> Result<i64> {
    int_in(b.opt, val, b.min, b.max, b.must)
}

pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

pub(crate) fn syntax(arg: &[u8]) -> RmqError {
    RmqError::Syntax(format!("unexpected argument '{}'", String::from_utf8_lossy(arg)))
}

/// The value after an option keyword, or a syntax error if it is missing.
pub(crate) fn value<'a>(args: &[&'a [u8]], i: usize) -> Result<&'a [u8]> {
    args.get(i + 1).copied().ok_or_else(|| RmqError::Syntax(format!("{} needs a value", String::from_utf8_lossy(args[i]).to_uppercase())))
}

pub(crate) fn arity(args: &[&[u8]], min: usize, cmd: &'static str) -> Result<()> {
    if args.len() < min {
        Err(RmqError::Arity(cmd))
    } else {
        Ok(())
    }
}

pub fn queue(args: &[&[u8]], cmd: &'static str) -> Result<()> {
    arity(args, 1, cmd)?;
    if !is_queue_name(args[0]) {
        return Err(RmqError::QueueName);
    }
    Ok(())
}

/// A topic makes valid queue names (RMQ.TPOP, RMQ.ROUTE).
fn topic(name: &[u8]) -> Result<()> {
    if !is_queue_name(name) {
        return Err(RmqError::TopicName);
    }
    Ok(())
}

pub const RELATIVE_MUST: &str = "an integer from 1 to 2^52 (ms)";

/// RMQ.PUSH: the mode, the group and the index of the first message.
#[derive(Debug, PartialEq, Eq)]
pub struct PushArgs<'a> {
    pub mode: PushMode,
    pub group: Option<&'a [u8]>,
    pub first: usize,
}

/// RMQ.PUSH Q RANGE ms | PRIORITY p | AT unix-ms | DELAY ms [GROUP g] message [message ...]
/// The argument after the mode's value is the GROUP option when at least two arguments
/// follow it (a group and a message); otherwise it is a message.
pub fn push<'a>(args: &[&'a [u8]]) -> Result<PushArgs<'a>> {
    queue(args, "rmq.push")?;
    arity(args, 4, "rmq.push")?;
    push_tail(args, 1)
}

/// The mode at `args[at]`, its value, the optional GROUP and the index of the first
/// message (RMQ.PUSH, and the push a schedule makes).
pub(crate) fn push_tail<'a>(args: &[&'a [u8]], at: usize) -> Result<PushArgs<'a>> {
    let (opt, val) = (args[at], value(args, at)?);
    let mode = if is(opt, "RANGE") {
        PushMode::Range(bounded(&kind::RANGE, val)?)
    } else if is(opt, "PRIORITY") {
        PushMode::Priority(bounded(&kind::PRIORITY, val)?)
    } else if is(opt, "AT") {
        PushMode::At(bounded(&kind::AT, val)?)
    } else if is(opt, "DELAY") {
        PushMode::Delay(bounded(&kind::DELAY, val)?)
    } else {
        return Err(RmqError::Syntax(format!("expected RANGE, PRIORITY, AT or DELAY, got '{}'", String::from_utf8_lossy(opt))));
    };
    if args.len() >= at + 5 && is(args[at + 2], "GROUP") {
        let g = args[at + 3];
        check_group(g)?;
        return Ok(PushArgs { mode, group: Some(g), first: at + 4 });
    }
    Ok(PushArgs { mode, group: None, first: at + 2 })
}

#[derive(Debug, PartialEq, Eq)]
pub struct PopArgs {
    pub count: usize,
    pub lease: Option<i64>,
    /// BLOCK ms (0 = forever).
    pub block: Option<i64>,
}

/// The POP options (COUNT, LEASE, BLOCK) in `args`, in any order, and QUANTUM where
/// `quantum` is given (RMQ.TPOP: it gets the value, else keeps its default).
fn pop_options(args: &[&[u8]], mut quantum: Option<&mut usize>) -> Result<PopArgs> {
    let mut out = PopArgs { count: 1, lease: None, block: None };
    let mut i = 0;
    while i < args.len() {
        let v = value(args, i);
        if is(args[i], "COUNT") {
            out.count = int_in("COUNT", v?, 1, MAX_POP_COUNT, "an integer from 1 to 10000")? as usize;
        } else if is(args[i], "LEASE") {
            out.lease = Some(int_in("LEASE", v?, 1, MAX_RELATIVE, RELATIVE_MUST)?);
        } else if is(args[i], "BLOCK") {
            out.block = Some(int_in("BLOCK", v?, 0, MAX_RELATIVE, "an integer from 0 (forever) to 2^52 (ms)")?);
        } else if let (true, Some(q)) = (is(args[i], "QUANTUM"), quantum.as_deref_mut()) {
            *q = int_in("QUANTUM", v?, 1, MAX_QUANTUM, "an integer from 1 to 10000")? as usize;
        } else {
            return Err(syntax(args[i]));
        }
        i += 2;
    }
    Ok(out)
}

/// RMQ.POP Q [COUNT n] [LEASE ms] [BLOCK ms]
pub fn pop(args: &[&[u8]]) -> Result<PopArgs> {
    queue(args, "rmq.pop")?;
    pop_options(&args[1..], None)
}

/// A topic's number of slots: a power of two from 1 to 16384.
fn slots(v: &[u8]) -> Result<u32> {
    match parse_int(v) {
        Some(n) if (1..=MAX_SLOTS as i64).contains(&n) && (n & (n - 1)) == 0 => Ok(n as u32),
        _ => Err(RmqError::BadValue("slots", "a power of two from 1 to 16384")),
    }
}

/// RMQ.TPOP: the slots, the POP options and the quantum.
#[derive(Debug, PartialEq, Eq)]
pub struct TpopArgs {
    pub slots: u32,
    pub pop: PopArgs,
    /// Messages per queue per turn (QUANTUM, default 1).
    pub quantum: usize,
}

/// RMQ.TPOP topic slots [COUNT n] [QUANTUM q] [LEASE ms] [BLOCK ms]
pub fn tpop(args: &[&[u8]]) -> Result<TpopArgs> {
    arity(args, 2, "rmq.tpop")?;
    topic(args[0])?;
    let slots = slots(args[1])?;
    let mut quantum = 1;
    let pop = pop_options(&args[2..], Some(&mut quantum))?;
    Ok(TpopArgs { slots, pop, quantum })
}

/// RMQ.ACK Q message [message ...] and RMQ.CANCEL: index of the first message.
pub fn messages(args: &[&[u8]], cmd: &'static str) -> Result<usize> {
    queue(args, cmd)?;
    arity(args, 2, cmd)?;
    Ok(1)
}

#[derive(Debug, PartialEq, Eq)]
pub struct NackArgs {
    pub delay: Option<i64>,
    pub dead: bool,
}

/// RMQ.NACK Q message [DELAY ms] [DEAD]
pub fn nack(args: &[&[u8]]) -> Result<NackArgs> {
    queue(args, "rmq.nack")?;
    arity(args, 2, "rmq.nack")?;
    let mut out = NackArgs { delay: None, dead: false };
    let mut i = 2;
    while i < args.len() {
        if is(args[i], "DELAY") {
            out.delay = Some(bounded(&kind::DELAY, value(args, i)?)?);
            i += 2;
        } else if is(args[i], "DEAD") {
            out.dead = true;
            i += 1;
        } else {
            return Err(syntax(args[i]));
        }
    }
    Ok(out)
}

/// An optional single `WORD n` after Q (SWEEP LIMIT, REPLAY COUNT, PENDING COUNT).
fn optional_count(args: &[&[u8]], cmd: &'static str, word: &'static str, max: i64, must: &'static str) -> Result<Option<usize>> {
    queue(args, cmd)?;
    match args.len() {
        1 => Ok(None),
        2 => Err(if is(args[1], word) { RmqError::Syntax(format!("{word} needs a value")) } else { syntax(args[1]) }),
        3 if is(args[1], word) => Ok(Some(int_in(word, args[2], 1, max, must)? as usize)),
        3 => Err(syntax(args[1])),
        _ => Err(RmqError::Arity(cmd)),
    }
}

/// RMQ.SWEEP Q [LIMIT n]: None = no limit.
pub fn sweep(args: &[&[u8]]) -> Result<Option<usize>> {
    optional_count(args, "rmq.sweep", "LIMIT", i64::MAX, "an integer >= 1")
}

/// RMQ.REPLAY Q [COUNT n]: None = all.
pub fn replay(args: &[&[u8]]) -> Result<Option<usize>> {
    optional_count(args, "rmq.replay", "COUNT", i64::MAX, "an integer >= 1")
}

/// RMQ.PENDING Q [COUNT n]
pub fn pending(args: &[&[u8]]) -> Result<usize> {
    Ok(optional_count(args, "rmq.pending", "COUNT", 1_000_000, "an integer from 1 to 1000000")?.unwrap_or(DEFAULT_PENDING))
}

/// RMQ.EXTEND Q message ms
pub fn extend(args: &[&[u8]]) -> Result<i64> {
    queue(args, "rmq.extend")?;
    if args.len() != 3 {
        return Err(RmqError::Arity("rmq.extend"));
    }
    int_in("EXTEND ms", args[2], 1, MAX_RELATIVE, RELATIVE_MUST)
}

/// RMQ.INFO Q
pub fn info(args: &[&[u8]]) -> Result<()> {
    queue(args, "rmq.info")?;
    if args.len() != 1 {
        return Err(RmqError::Arity("rmq.info"));
    }
    Ok(())
}

/// RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c]: the parsed options.
#[derive(Debug, PartialEq, Eq)]
pub struct QueuesArgs<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    /// The cursor the previous call handed out (None: `0`, from the start), still sealed
    /// (`runtime::cursors`).
    pub cursor: Option<&'a [u8]>,
}

pub const DEFAULT_QUEUES_COUNT: usize = 100;
pub const MAX_QUEUES_COUNT: i64 = 10_000;

/// RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c], options in any order.
pub fn queues<'a>(args: &[&'a [u8]]) -> Result<QueuesArgs<'a>> {
    let mut out = QueuesArgs { pattern: None, count: DEFAULT_QUEUES_COUNT, cursor: None };
    let mut i = 0;
    while i < args.len() {
        let v = value(args, i)?;
        if is(args[i], "MATCH") {
            out.pattern = Some(v);
        } else if is(args[i], "COUNT") {
            out.count = int_in("COUNT", v, 1, MAX_QUEUES_COUNT, "an integer from 1 to 10000")? as usize;
        } else if is(args[i], "CURSOR") {
            out.cursor = (v != b"0").then_some(v);
        } else {
            return Err(syntax(args[i]));
        }
        i += 2;
    }
    Ok(out)
}

/// What RMQ.POLICY does.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyOp {
    Set(Vec<(Field, i64)>),
    Get,
    Reset,
}

/// RMQ.POLICY Q SET field value [field value ...] | GET | RESET; every pair is validated.
pub fn policy(args: &[&[u8]]) -> Result<PolicyOp> {
    queue(args, "rmq.policy")?;
    arity(args, 2, "rmq.policy")?;
    let op = args[1];
    if is(op, "GET") || is(op, "RESET") {
        if args.len() != 2 {
            return Err(syntax(args[2]));
        }
        return Ok(if is(op, "GET") { PolicyOp::Get } else { PolicyOp::Reset });
    }
    if !is(op, "SET") {
        return Err(RmqError::Syntax(format!("expected SET, GET or RESET, got '{}'", String::from_utf8_lossy(op))));
    }
    let pairs = &args[2..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(RmqError::Syntax("SET needs field value pairs".into()));
    }
    pairs
        .chunks(2)
        .map(|kv| {
            let f = Field::from_name(kv[0]).ok_or_else(|| {
                let known: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
                RmqError::Syntax(format!("unknown policy field '{}' (known: {})", String::from_utf8_lossy(kv[0]), known.join(", ")))
            })?;
            let v = f.parse(kv[1]).ok_or_else(|| {
                let b = f.bounds();
                RmqError::BadPolicyValue(f.name(), b.min, b.max)
            })?;
            Ok((f, v))
        })
        .collect::<Result<Vec<_>>>()
        .map(PolicyOp::Set)
}

/// RMQ.TESTCLOCK GET | SET ms | ADVANCE ms at time `now`: the new time (None for GET).
pub fn testclock(args: &[&[u8]], now: i64) -> Result<Option<i64>> {
    match args {
        [op] if is(op, "GET") => Ok(None),
        [op, v] if is(op, "SET") => int_in("ms", v, 0, MAX_EXACT, "an integer from 0 to 2^53").map(Some),
        [op, v] if is(op, "ADVANCE") => {
            let ms = int_in("ms", v, 0, MAX_RELATIVE, "an integer from 0 to 2^52")?;
            Ok(Some(now.saturating_add(ms).min(MAX_EXACT)))
        }
        _ => Err(RmqError::Syntax("expected GET, SET ms or ADVANCE ms".into())),
    }
}

/// RMQ.ROUTE topic slots basis: the number of slots.
pub fn route(args: &[&[u8]]) -> Result<u32> {
    if args.len() != 3 {
        return Err(RmqError::Arity("rmq.route"));
    }
    topic(args[0])?;
    slots(args[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kind::MIN_AT;

    fn a(v: &[&'static str]) -> Vec<&'static [u8]> {
        v.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn push_modes_and_bounds() {
        let plain = |mode| Ok(PushArgs { mode, group: None, first: 3 });
        assert_eq!(push(&a(&["q", "range", "5", "m"])), plain(PushMode::Range(5)));
        assert_eq!(push(&a(&["q", "PRIORITY", "-9007199254740992", "m"])), plain(PushMode::Priority(-MAX_EXACT)));
        assert_eq!(push(&a(&["q", "AT", "946684800000", "m"])), plain(PushMode::At(MIN_AT)));
        assert_eq!(push(&a(&["q", "DELAY", "0", "m", "n"])), plain(PushMode::Delay(0)));
        let bad = [
            (vec!["q", "RANGE", "0", "m"], "RANGE"),
            (vec!["q", "RANGE", "-1", "m"], "RANGE"),
            (vec!["q", "PRIORITY", "9007199254740993", "m"], "PRIORITY"),
            (vec!["q", "PRIORITY", "1.5", "m"], "PRIORITY"),
            (vec!["q", "AT", "946684799999", "m"], "AT"),
            (vec!["q", "AT", "1700000000", "m"], "AT"),
            (vec!["q", "AT", "9007199254740993", "m"], "AT"),
            (vec!["q", "DELAY", "-1", "m"], "DELAY"),
            (vec!["q", "SOON", "1", "m"], "syntax"),
            (vec!["q", "RANGE", "1"], "wrong number"),
            (vec!["q{x}", "RANGE", "1", "m"], "queue name"),
            (vec!["", "RANGE", "1", "m"], "queue name"),
            (vec!["q", "RANGE", "1", "GROUP", "", "m"], "GROUP"),
        ];
        for (args, word) in bad {
            let e = push(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn push_group_is_an_option_only_before_a_group_and_a_message() {
        let grouped = |g: &'static str| Ok(PushArgs { mode: PushMode::Delay(0), group: Some(g.as_bytes()), first: 5 });
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP", "o1", "m"])), grouped("o1"));
        assert_eq!(push(&a(&["q", "DELAY", "0", "group", "o1", "m", "n"])), grouped("o1"));
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP", "GROUP", "GROUP"])), grouped("GROUP"));
        // Fewer than two arguments after it: GROUP is a message.
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP"])), Ok(PushArgs { mode: PushMode::Delay(0), group: None, first: 3 }));
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP", "m"])), Ok(PushArgs { mode: PushMode::Delay(0), group: None, first: 3 }));
        assert_eq!(push(&a(&["q", "DELAY", "0", "m", "GROUP", "g", "n"])).map(|p| p.first), Ok(3), "only right after the value");
        let long = "g".repeat(MAX_GROUP_BYTES);
        let args = vec![&b"q"[..], b"DELAY", b"0", b"GROUP", long.as_bytes(), b"m"];
        assert_eq!(push(&args).map(|p| p.group.map(<[u8]>::len)), Ok(Some(MAX_GROUP_BYTES)));
        let longer = "g".repeat(MAX_GROUP_BYTES + 1);
        let args = vec![&b"q"[..], b"DELAY", b"0", b"GROUP", longer.as_bytes(), b"m"];
        assert!(push(&args).unwrap_err().message().contains("GROUP"));
    }

    #[test]
    fn pop_options() {
        assert_eq!(pop(&a(&["q"])), Ok(PopArgs { count: 1, lease: None, block: None }));
        assert_eq!(
            pop(&a(&["q", "block", "0", "LEASE", "5", "count", "10000"])),
            Ok(PopArgs { count: 10000, lease: Some(5), block: Some(0) })
        );
        for (args, word) in [
            (vec!["q", "COUNT", "0"], "COUNT"),
            (vec!["q", "COUNT", "10001"], "COUNT"),
            (vec!["q", "LEASE", "0"], "LEASE"),
            (vec!["q", "BLOCK", "-1"], "BLOCK"),
            (vec!["q", "COUNT"], "syntax"),
            (vec!["q", "FOO", "1"], "syntax"),
            (vec!["q", "QUANTUM", "1"], "syntax"),
            (vec![], "wrong number"),
        ] {
            let e = pop(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn nack_options() {
        assert_eq!(nack(&a(&["q", "m"])), Ok(NackArgs { delay: None, dead: false }));
        assert_eq!(nack(&a(&["q", "m", "dead", "DELAY", "7"])), Ok(NackArgs { delay: Some(7), dead: true }));
        assert!(nack(&a(&["q", "m", "DELAY"])).unwrap_err().message().contains("syntax"));
        assert!(nack(&a(&["q", "m", "DELAY", "x"])).unwrap_err().message().contains("DELAY"));
        assert!(nack(&a(&["q", "m", "LATER"])).unwrap_err().message().contains("syntax"));
        assert!(nack(&a(&["q"])).unwrap_err().message().contains("wrong number"));
    }

    #[test]
    fn queues_options() {
        assert_eq!(queues(&a(&[])), Ok(QueuesArgs { pattern: None, count: 100, cursor: None }));
        let got = queues(&a(&["count", "7", "MATCH", "o*", "cursor", "6f31"])).unwrap();
        assert_eq!(got, QueuesArgs { pattern: Some(b"o*"), count: 7, cursor: Some(b"6f31") });
        let got = queues(&a(&["CURSOR", "0", "COUNT", "10000"])).unwrap();
        assert_eq!((got.count, got.cursor), (10_000, None));
        for (args, word) in [
            (vec!["COUNT", "0"], "COUNT"),
            (vec!["COUNT", "10001"], "COUNT"),
            (vec!["COUNT", "x"], "COUNT"),
            (vec!["COUNT"], "syntax"),
            (vec!["CURSOR"], "syntax"),
            (vec!["SPEED", "1"], "syntax"),
        ] {
            let e = queues(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn counts_and_limits() {
        assert_eq!(sweep(&a(&["q"])), Ok(None));
        assert_eq!(sweep(&a(&["q", "limit", "3"])), Ok(Some(3)));
        assert!(sweep(&a(&["q", "LIMIT", "0"])).unwrap_err().message().contains("LIMIT"));
        assert!(sweep(&a(&["q", "LIMIT"])).unwrap_err().message().contains("syntax"));
        assert!(sweep(&a(&["q", "COUNT", "1"])).unwrap_err().message().contains("syntax"));
        assert!(sweep(&a(&["q", "LIMIT", "1", "x"])).unwrap_err().message().contains("wrong number"));
        assert_eq!(replay(&a(&["q", "COUNT", "2"])), Ok(Some(2)));
        assert_eq!(pending(&a(&["q"])), Ok(DEFAULT_PENDING));
        assert_eq!(extend(&a(&["q", "m", "10"])), Ok(10));
        assert!(extend(&a(&["q", "m", "0"])).is_err());
        assert!(extend(&a(&["q", "m"])).unwrap_err().message().contains("wrong number"));
        assert_eq!(messages(&a(&["q", "m"]), "rmq.ack"), Ok(1));
        assert!(messages(&a(&["q"]), "rmq.ack").is_err());
        assert!(info(&a(&["q", "x"])).is_err());
    }

    #[test]
    fn policy_pairs_validated_whole() {
        assert_eq!(policy(&a(&["q", "get"])), Ok(PolicyOp::Get));
        assert_eq!(policy(&a(&["q", "RESET"])), Ok(PolicyOp::Reset));
        assert_eq!(
            policy(&a(&["q", "SET", "rate", "10", "BACKOFF-MS", "0"])),
            Ok(PolicyOp::Set(vec![(Field::Rate, 10), (Field::BackoffMs, 0)]))
        );
        for (args, word) in [
            (vec!["q"], "wrong number"),
            (vec!["q", "SET"], "pairs"),
            (vec!["q", "SET", "rate"], "pairs"),
            (vec!["q", "SET", "rate", "1", "retries"], "pairs"),
            (vec!["q", "SET", "speed", "1"], "unknown policy field"),
            (vec!["q", "SET", "rate", "1", "retries", "1001"], "retries"),
            (vec!["q", "SET", "rate-window-ms", "0"], "rate-window-ms"),
            (vec!["q", "SET", "lease-ms", "x"], "lease-ms"),
            (vec!["q", "GET", "x"], "syntax"),
            (vec!["q", "DROP"], "SET, GET or RESET"),
            (vec!["q{", "GET"], "queue name"),
        ] {
            let e = policy(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn tpop_options() {
        let plain = PopArgs { count: 1, lease: None, block: None };
        assert_eq!(tpop(&a(&["t", "16"])), Ok(TpopArgs { slots: 16, pop: plain, quantum: 1 }));
        assert_eq!(
            tpop(&a(&["t", "1", "BLOCK", "0", "count", "100", "quantum", "7", "LEASE", "9"])),
            Ok(TpopArgs { slots: 1, pop: PopArgs { count: 100, lease: Some(9), block: Some(0) }, quantum: 7 })
        );
        assert_eq!(tpop(&a(&["t", "4", "COUNT", "2", "QUANTUM", "10000"])).map(|t| t.quantum), Ok(10000), "above COUNT is fine");
        for (args, word) in [
            (vec!["t"], "wrong number"),
            (vec!["t", "3"], "slots"),
            (vec!["t", "32768"], "slots"),
            (vec!["t", "8", "COUNT", "0"], "COUNT"),
            (vec!["t", "8", "COUNT"], "syntax"),
            (vec!["t", "8", "FOO", "1"], "syntax"),
            (vec!["t{x}", "8"], "queue name"),
            (vec!["t}", "8"], "queue name"),
            (vec!["t", "8", "QUANTUM", "0"], "QUANTUM"),
            (vec!["t", "8", "QUANTUM", "-1"], "QUANTUM"),
            (vec!["t", "8", "QUANTUM", "10001"], "QUANTUM"),
            (vec!["t", "8", "QUANTUM", "x"], "QUANTUM"),
            (vec!["t", "8", "QUANTUM", "1.5"], "QUANTUM"),
            (vec!["t", "8", "QUANTUM"], "syntax"),
            (vec!["", "8"], "queue name"),
        ] {
            let e = tpop(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn testclock_operations() {
        assert_eq!(testclock(&a(&["get"]), 5), Ok(None));
        assert_eq!(testclock(&a(&["SET", "100"]), 5), Ok(Some(100)));
        assert_eq!(testclock(&a(&["advance", "10"]), 5), Ok(Some(15)));
        for bad in [vec!["SET"], vec!["SET", "-1"], vec!["ADVANCE", "x"], vec!["NOW"], vec![]] {
            assert!(testclock(&a(&bad), 5).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn route_slots() {
        assert_eq!(route(&a(&["t", "16384", "b"])), Ok(16384));
        assert_eq!(route(&a(&["t", "1", "b"])), Ok(1));
        for bad in ["0", "3", "32768", "-2", "x", ""] {
            assert!(route(&a(&["t", bad, "b"])).unwrap_err().message().contains("slots"), "{bad}");
        }
        assert!(route(&a(&["t", "8"])).is_err());
        for bad in ["t{", "}", "a{b}c", ""] {
            assert_eq!(route(&a(&[bad, "4", "x"])), Err(RmqError::TopicName), "{bad}");
        }
    }
}
