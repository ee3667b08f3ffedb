//! Argument parsing for every command, over plain byte slices (no FFI), so every rule on
//! bad input is unit-tested. One reader for all of them: a command's options are a table
//! of `Opt` (a keyword and, for an integer, its `Bound`), read by `options`; every error
//! text comes from the table (`Bound::must`), and an option given twice follows one rule
//! everywhere: the last one counts. Messages are not copied: a parse gives the index where
//! they start.

use crate::core::codec;
use crate::core::error::{Bound, Result, RmqError, Unit};
use crate::core::kind::{self, check_group, PushMode, MAX_EXACT};
use crate::core::ledger_records;
use crate::core::ledger_rules::Dedup;
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

// The bounds of the commands' integer arguments (the push modes' are in `kind`, the
// schedules' in `cron_schedule`, the policy fields' in `policy`).
const COUNT: Bound = Bound::new("COUNT", 1, MAX_POP_COUNT, Unit::Count);
const LEASE: Bound = Bound::new("LEASE", 1, MAX_RELATIVE, Unit::Ms);
const BLOCK: Bound = Bound::new("BLOCK", 0, MAX_RELATIVE, Unit::Timeout);
const QUANTUM: Bound = Bound::new("QUANTUM", 1, MAX_QUANTUM, Unit::Count);
const LIMIT: Bound = Bound::new("LIMIT", 1, i64::MAX, Unit::Count);
const REPLAY_COUNT: Bound = Bound::new("COUNT", 1, i64::MAX, Unit::Count);
const PENDING_COUNT: Bound = Bound::new("COUNT", 1, 1_000_000, Unit::Count);
const QUEUES_COUNT: Bound = Bound::new("COUNT", 1, MAX_QUEUES_COUNT, Unit::Count);
const EXTEND_MS: Bound = Bound::new("EXTEND ms", 1, MAX_RELATIVE, Unit::Ms);
const CLOCK_SET: Bound = Bound::new("ms", 0, MAX_EXACT, Unit::Count);
const CLOCK_ADVANCE: Bound = Bound::new("ms", 0, MAX_RELATIVE, Unit::Count);

/// An option a command takes: its keyword (any case) and what follows it.
pub(crate) enum Opt {
    /// An integer within a bound, whose name is the keyword.
    Int(&'static Bound),
    /// Any string.
    Str(&'static str),
    /// The keyword alone.
    Flag(&'static str),
}

impl Opt {
    pub(crate) const fn word(&self) -> &'static str {
        match self {
            Opt::Int(b) => b.name,
            Opt::Str(w) | Opt::Flag(w) => w,
        }
    }
}

/// An option as given: its value (empty for a flag) and, for an integer, the number.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Given<'a> {
    pub raw: &'a [u8],
    pub int: i64,
}

/// The options of `table` in `args[*at..]`, in any order, each where its table has it (None
/// when absent), read until the end or an argument that names one of `stop` (`*at` is
/// left there). An option given twice: the last one counts.
// The reader is inlined into each parser, so that the command's table is a constant there
// and the keyword comparisons compile as hand-written ones would (PUSH's parse costs what
// it did before the reader: bench/profile_commands.py).
#[inline(always)]
pub(crate) fn options<'a, const N: usize>(
    args: &[&'a [u8]],
    at: &mut usize,
    table: &[Opt; N],
    stop: &[Opt],
) -> Result<[Option<Given<'a>>; N]> {
    let mut got = [None; N];
    while let Some(&arg) = args.get(*at) {
        let Some(k) = table.iter().position(|o| is(arg, o.word())) else {
            if stop.iter().any(|o| is(arg, o.word())) {
                break;
            }
            return Err(syntax(arg));
        };
        let (given, used) = read(&table[k], args.get(*at + 1).copied())?;
        got[k] = Some(given);
        *at += used;
    }
    Ok(got)
}

/// All of `args` as options of `table`.
fn all_options<'a, const N: usize>(args: &[&'a [u8]], table: &[Opt; N]) -> Result<[Option<Given<'a>>; N]> {
    options(args, &mut 0, table, &[])
}

/// An option's value (`next`: the argument after its keyword), and how many arguments the
/// option takes.
#[inline(always)]
fn read<'a>(opt: &Opt, next: Option<&'a [u8]>) -> Result<(Given<'a>, usize)> {
    if let Opt::Flag(_) = opt {
        return Ok((Given { raw: b"", int: 0 }, 1));
    }
    let raw = next.ok_or_else(|| RmqError::Syntax(format!("{} needs a value", opt.word())))?;
    let int = match opt {
        Opt::Int(b) => int(b, raw)?,
        _ => 0,
    };
    Ok((Given { raw, int }, 2))
}

/// Which of the alternatives in `table` `arg` names (a push's mode, an operation).
#[inline(always)]
pub(crate) fn which(arg: &[u8], table: &[Opt]) -> Result<usize> {
    table.iter().position(|o| is(arg, o.word())).ok_or_else(|| {
        let words: Vec<&str> = table.iter().map(Opt::word).collect();
        let (last, rest) = words.split_last().unwrap_or((&"", &[]));
        RmqError::Syntax(format!("expected {} or {last}, got '{}'", rest.join(", "), String::from_utf8_lossy(arg)))
    })
}

/// An integer argument within its bound.
#[inline(always)]
pub(crate) fn int(b: &Bound, val: &[u8]) -> Result<i64> {
    parse_int(val).map_or(Err(RmqError::OutOfBounds(*b)), |v| b.check(v))
}

pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

pub(crate) fn syntax(arg: &[u8]) -> RmqError {
    RmqError::Syntax(format!("unexpected argument '{}'", String::from_utf8_lossy(arg)))
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

/// The push modes, each with the bound of its value.
pub(crate) const MODES: [Opt; 4] = [Opt::Int(&kind::RANGE), Opt::Int(&kind::PRIORITY), Opt::Int(&kind::AT), Opt::Int(&kind::DELAY)];

/// RMQ.PUSH: the mode, the group, the index of the first message and the options of FIFO
/// pushes.
#[derive(Debug, PartialEq, Eq)]
pub struct PushArgs<'a> {
    pub mode: PushMode,
    pub group: Option<&'a [u8]>,
    pub first: usize,
    /// SEQUENCE prefix: each message is stored numbered (`core::ledger_records::sequenced`).
    pub sequence: Option<&'a [u8]>,
    pub dedup: Option<Dedup<'a>>,
}

/// RMQ.PUSH Q RANGE ms | PRIORITY p | AT unix-ms | DELAY ms [GROUP g] [SEQUENCE prefix]
/// [DEDUP id ms [NOTE note]] [MESSAGES] message [message ...]
/// With MESSAGES (`messages_keyword`), every argument before it must be an option and every
/// one after it is a message. Without it, as before MESSAGES existed: the argument after the
/// mode's value is the GROUP option when at least two arguments follow it (a group and a
/// message); otherwise it is a message. After that, SEQUENCE (with at least two arguments
/// after it) and DEDUP (at least three; its NOTE, at least two), each at most once and in
/// either order; the first other argument is the first message.
pub fn push<'a>(args: &[&'a [u8]]) -> Result<PushArgs<'a>> {
    queue(args, "rmq.push")?;
    // Not a mode: say so whatever the count (a bare arity error hides the mistake); with
    // arguments enough, `push_tail` says it (one look, not two, on every push).
    if let Some(&m) = args.get(1).filter(|_| args.len() < 4) {
        which(m, &MODES)?;
    }
    arity(args, 4, "rmq.push")?;
    let (mut a, strict) = push_tail(args, 1, &PUSH_OPTIONS)?;
    if strict {
        return Ok(a);
    }
    let left = |i: usize| args.len() - i - 1;
    loop {
        let i = a.first;
        if a.sequence.is_none() && left(i) >= 2 && is(args[i], "SEQUENCE") {
            ledger_records::check_tag("SEQUENCE", args[i + 1], true)?;
            a.sequence = Some(args[i + 1]);
            a.first += 2;
        } else if a.dedup.is_none() && left(i) >= 3 && is(args[i], "DEDUP") {
            let mut d = dedup(args[i + 1], args[i + 2])?;
            a.first += 3;
            if left(a.first) >= 2 && is(args[a.first], "NOTE") {
                d.note = Some(note(args[a.first + 1])?);
                a.first += 2;
            }
            a.dedup = Some(d);
        } else {
            return Ok(a);
        }
    }
}

fn dedup<'a>(id: &'a [u8], window: &[u8]) -> Result<Dedup<'a>> {
    ledger_records::check_tag("DEDUP id", id, false)?;
    Ok(Dedup { id, window: int(&ledger_records::WINDOW, window)?, note: None })
}

fn note(v: &[u8]) -> Result<&[u8]> {
    ledger_records::check_tag("NOTE", v, true)?;
    Ok(v)
}

/// Ends a push's options: every argument after it is a message.
pub const MESSAGES: &str = "MESSAGES";

/// The options a push may give before MESSAGES, each with how many values follow it (NOTE
/// only right after DEDUP's). A schedule's push takes GROUP only.
pub(crate) const PUSH_OPTIONS: [(&str, usize); 4] = [("GROUP", 1), ("SEQUENCE", 1), ("DEDUP", 2), ("NOTE", 1)];
pub(crate) const SCHEDULE_OPTIONS: [(&str, usize); 1] = [("GROUP", 1)];

/// Where MESSAGES ends the options that start at `args[at]`, if it does: it is the keyword
/// wherever an option may stand, i.e. anywhere but as an option's value (an option is
/// skipped with its values, any other argument alone, so that a misspelled option before
/// MESSAGES is found and refused rather than stored as a message).
pub(crate) fn messages_keyword(args: &[&[u8]], at: usize, options: &[(&str, usize)]) -> Option<usize> {
    let mut i = at;
    while let Some(&arg) = args.get(i) {
        i += 1;
        // Longer than any word (as most messages are): no word, passed over at a glance
        // (comparing it with each word cost a single-message PUSH ~1%).
        if arg.len() > LONGEST_WORD {
            continue;
        }
        if is(arg, MESSAGES) {
            return Some(i - 1);
        }
        i += options.iter().find(|(w, _)| is(arg, w)).map_or(0, |&(_, n)| n);
    }
    None
}

/// The longest of MESSAGES and the options' words (`messages_keyword`).
const LONGEST_WORD: usize = 8;

/// The options in `args[at..end]` (`end`: where MESSAGES stands), each an option of
/// `options` with its values, in any order, the last of a repeated one counting; anything
/// else is refused.
fn strict_options<'a>(args: &[&'a [u8]], at: usize, end: usize, options: &[(&str, usize)], mode: PushMode) -> Result<PushArgs<'a>> {
    if end + 1 == args.len() {
        return Err(RmqError::Syntax(format!("{MESSAGES} needs at least one message")));
    }
    let mut a = PushArgs { mode, group: None, first: end + 1, sequence: None, dedup: None };
    let mut i = at;
    // Whether the argument before is DEDUP's (a NOTE may follow it).
    let mut after_dedup = false;
    while i < end {
        let arg = args[i];
        let Some(&(word, n)) = options.iter().find(|(w, _)| is(arg, w)) else {
            return Err(syntax(arg));
        };
        let v = args[i + 1];
        match word {
            "GROUP" => a.group = Some(check_group(v).map(|_| v)?),
            "SEQUENCE" => a.sequence = Some(ledger_records::check_tag("SEQUENCE", v, true).map(|_| v)?),
            "DEDUP" => a.dedup = Some(dedup(v, args[i + 2])?),
            _ if after_dedup => {
                if let Some(d) = a.dedup.as_mut() {
                    d.note = Some(note(v)?);
                }
            }
            _ => return Err(syntax(arg)),
        }
        after_dedup = word == "DEDUP";
        i += 1 + n;
    }
    Ok(a)
}

/// The mode at `args[at]`, its value, and its options up to MESSAGES (`options`, then true),
/// or else the optional GROUP right after the value (then false); with the index of the
/// first message (RMQ.PUSH, and the push a schedule makes).
pub(crate) fn push_tail<'a>(args: &[&'a [u8]], at: usize, options: &[(&str, usize)]) -> Result<(PushArgs<'a>, bool)> {
    let k = which(args[at], &MODES)?;
    let (v, _) = read(&MODES[k], args.get(at + 1).copied())?;
    let mode = match k {
        0 => PushMode::Range(v.int),
        1 => PushMode::Priority(v.int),
        2 => PushMode::At(v.int),
        _ => PushMode::Delay(v.int),
    };
    if let Some(end) = messages_keyword(args, at + 2, options) {
        return Ok((strict_options(args, at + 2, end, options, mode)?, true));
    }
    if args.len() >= at + 5 && is(args[at + 2], "GROUP") {
        let g = args[at + 3];
        check_group(g)?;
        return Ok((PushArgs { mode, group: Some(g), first: at + 4, sequence: None, dedup: None }, false));
    }
    Ok((PushArgs { mode, group: None, first: at + 2, sequence: None, dedup: None }, false))
}

#[derive(Debug, PartialEq, Eq)]
pub struct PopArgs {
    pub count: usize,
    pub lease: Option<i64>,
    /// BLOCK ms (0 = forever).
    pub block: Option<i64>,
    /// IDS: name each delivery (RMQ.POP only).
    pub ids: bool,
}

const POP: [Opt; 4] = [Opt::Int(&COUNT), Opt::Int(&LEASE), Opt::Int(&BLOCK), Opt::Flag("IDS")];
/// POP's options but IDS, and QUANTUM.
const TPOP: [Opt; 4] = [Opt::Int(&COUNT), Opt::Int(&LEASE), Opt::Int(&BLOCK), Opt::Int(&QUANTUM)];

fn pop_args(count: Option<Given>, lease: Option<Given>, block: Option<Given>, ids: Option<Given>) -> PopArgs {
    PopArgs { count: count.map_or(1, |c| c.int as usize), lease: lease.map(|l| l.int), block: block.map(|b| b.int), ids: ids.is_some() }
}

/// RMQ.POP Q [COUNT n] [LEASE ms] [BLOCK ms] [IDS]
pub fn pop(args: &[&[u8]]) -> Result<PopArgs> {
    queue(args, "rmq.pop")?;
    let [count, lease, block, ids] = all_options(&args[1..], &POP)?;
    Ok(pop_args(count, lease, block, ids))
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
    let [count, lease, block, quantum] = all_options(&args[2..], &TPOP)?;
    Ok(TpopArgs { slots, pop: pop_args(count, lease, block, None), quantum: quantum.map_or(1, |q| q.int as usize) })
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

const NACK: [Opt; 2] = [Opt::Int(&kind::DELAY), Opt::Flag("DEAD")];

/// RMQ.NACK Q message [DELAY ms] [DEAD]
pub fn nack(args: &[&[u8]]) -> Result<NackArgs> {
    nack_of(args, "rmq.nack")
}

/// The options after what NACK or NACKID fails (`args[1]`).
fn nack_of(args: &[&[u8]], cmd: &'static str) -> Result<NackArgs> {
    queue(args, cmd)?;
    arity(args, 2, cmd)?;
    let [delay, dead] = all_options(&args[2..], &NACK)?;
    Ok(NackArgs { delay: delay.map(|d| d.int), dead: dead.is_some() })
}

/// A delivery name (`RMQ.POP ... IDS`).
fn delivery_id(v: &[u8]) -> Result<u64> {
    codec::parse_id(v).ok_or(RmqError::BadValue("id", "a delivery id: an integer from 1 to 2^53"))
}

/// RMQ.ACKID Q id [id ...]: the names, each checked.
pub fn ackid(args: &[&[u8]]) -> Result<Vec<u64>> {
    queue(args, "rmq.ackid")?;
    arity(args, 2, "rmq.ackid")?;
    args[1..].iter().map(|v| delivery_id(v)).collect()
}

/// RMQ.NACKID Q id [DELAY ms] [DEAD]
pub fn nackid(args: &[&[u8]]) -> Result<(u64, NackArgs)> {
    let a = nack_of(args, "rmq.nackid")?;
    Ok((delivery_id(args[1])?, a))
}

/// An optional single `WORD n` after Q (SWEEP LIMIT, REPLAY COUNT, PENDING COUNT).
fn optional_count(args: &[&[u8]], cmd: &'static str, bound: &'static Bound) -> Result<Option<usize>> {
    queue(args, cmd)?;
    // The syntax allows no more than `WORD n`: more is the wrong number of arguments.
    if args.len() > 3 {
        return Err(RmqError::Arity(cmd));
    }
    let [n] = all_options(&args[1..], &[Opt::Int(bound)])?;
    Ok(n.map(|n| n.int as usize))
}

/// RMQ.SWEEP Q [LIMIT n]: None = no limit.
pub fn sweep(args: &[&[u8]]) -> Result<Option<usize>> {
    optional_count(args, "rmq.sweep", &LIMIT)
}

/// RMQ.REPLAY Q [COUNT n]: None = all.
pub fn replay(args: &[&[u8]]) -> Result<Option<usize>> {
    optional_count(args, "rmq.replay", &REPLAY_COUNT)
}

/// RMQ.PENDING Q [COUNT n]
pub fn pending(args: &[&[u8]]) -> Result<usize> {
    Ok(optional_count(args, "rmq.pending", &PENDING_COUNT)?.unwrap_or(DEFAULT_PENDING))
}

/// RMQ.EXTEND Q message ms
pub fn extend(args: &[&[u8]]) -> Result<i64> {
    extend_of(args, "rmq.extend")
}

/// The lease of EXTEND or EXTENDID.
fn extend_of(args: &[&[u8]], cmd: &'static str) -> Result<i64> {
    queue(args, cmd)?;
    if args.len() != 3 {
        return Err(RmqError::Arity(cmd));
    }
    int(&EXTEND_MS, args[2])
}

/// RMQ.EXTENDID Q id ms: the name and the lease.
pub fn extendid(args: &[&[u8]]) -> Result<(u64, i64)> {
    let ms = extend_of(args, "rmq.extendid")?;
    Ok((delivery_id(args[1])?, ms))
}

/// RMQ.INFO Q
pub fn info(args: &[&[u8]]) -> Result<()> {
    queue(args, "rmq.info")?;
    if args.len() != 1 {
        return Err(RmqError::Arity("rmq.info"));
    }
    Ok(())
}

/// RMQ.DROP Q
pub fn drop_queue(args: &[&[u8]]) -> Result<()> {
    queue(args, "rmq.drop")?;
    if args.len() != 1 {
        return Err(RmqError::Arity("rmq.drop"));
    }
    Ok(())
}

/// RMQ.PURGE Q [DEAD]: whether DEAD was given.
pub fn purge(args: &[&[u8]]) -> Result<bool> {
    queue(args, "rmq.purge")?;
    match args {
        [_] => Ok(false),
        [_, dead] if dead.eq_ignore_ascii_case(b"DEAD") => Ok(true),
        [_, other] => Err(syntax(other)),
        _ => Err(RmqError::Arity("rmq.purge")),
    }
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

const QUEUES: [Opt; 3] = [Opt::Str("MATCH"), Opt::Int(&QUEUES_COUNT), Opt::Str("CURSOR")];

/// RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c], options in any order.
pub fn queues<'a>(args: &[&'a [u8]]) -> Result<QueuesArgs<'a>> {
    let [pattern, count, cursor] = all_options(args, &QUEUES)?;
    Ok(QueuesArgs {
        pattern: pattern.map(|p| p.raw),
        count: count.map_or(DEFAULT_QUEUES_COUNT, |c| c.int as usize),
        cursor: cursor.map(|c| c.raw).filter(|&c| c != b"0"),
    })
}

/// What RMQ.POLICY does.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyOp {
    Set(Vec<(Field, i64)>),
    Get,
    Reset,
}

const POLICY_OPS: [Opt; 3] = [Opt::Flag("SET"), Opt::Flag("GET"), Opt::Flag("RESET")];

/// RMQ.POLICY Q SET field value [field value ...] | GET | RESET; every pair is validated.
/// A field given twice: the last one counts (the pairs are applied in order).
pub fn policy(args: &[&[u8]]) -> Result<PolicyOp> {
    queue(args, "rmq.policy")?;
    arity(args, 2, "rmq.policy")?;
    let op = which(args[1], &POLICY_OPS)?;
    if op > 0 {
        if args.len() != 2 {
            return Err(syntax(args[2]));
        }
        return Ok(if op == 1 { PolicyOp::Get } else { PolicyOp::Reset });
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
            Ok((f, int(f.bounds(), kv[1])?))
        })
        .collect::<Result<Vec<_>>>()
        .map(PolicyOp::Set)
}

/// RMQ.REDRIVE Q CLAIM [COUNT n] [STALE ms] | DONE message [message ...]
#[derive(Debug, PartialEq, Eq)]
pub enum RedriveOp {
    /// At most `count` claims; claims older than `stale` ms are taken again.
    Claim { count: usize, stale: i64 },
    /// The index of the first message whose move is done.
    Done(usize),
}

const REDRIVE_OPS: [Opt; 2] = [Opt::Flag("CLAIM"), Opt::Flag("DONE")];
const CLAIM_OPTS: [Opt; 2] = [Opt::Int(&COUNT), Opt::Int(&ledger_records::STALE)];
/// Claims RMQ.REDRIVE CLAIM takes without COUNT, and how old one must be without STALE.
const DEFAULT_CLAIM_COUNT: usize = 100;
const DEFAULT_STALE_MS: i64 = 30_000;

pub fn redrive(args: &[&[u8]]) -> Result<RedriveOp> {
    queue(args, "rmq.redrive")?;
    arity(args, 2, "rmq.redrive")?;
    if which(args[1], &REDRIVE_OPS)? == 1 {
        arity(args, 3, "rmq.redrive")?;
        return Ok(RedriveOp::Done(2));
    }
    let [count, stale] = all_options(&args[2..], &CLAIM_OPTS)?;
    Ok(RedriveOp::Claim { count: count.map_or(DEFAULT_CLAIM_COUNT, |c| c.int as usize), stale: stale.map_or(DEFAULT_STALE_MS, |s| s.int) })
}

/// RMQ.TESTCLOCK GET | SET ms | ADVANCE ms at time `now`: the new time (None for GET).
pub fn testclock(args: &[&[u8]], now: i64) -> Result<Option<i64>> {
    match args {
        [op] if is(op, "GET") => Ok(None),
        [op, v] if is(op, "SET") => int(&CLOCK_SET, v).map(Some),
        [op, v] if is(op, "ADVANCE") => {
            let ms = int(&CLOCK_ADVANCE, v)?;
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
        let plain = |mode| Ok(PushArgs { mode, group: None, first: 3, sequence: None, dedup: None });
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
        let grouped =
            |g: &'static str| Ok(PushArgs { mode: PushMode::Delay(0), group: Some(g.as_bytes()), first: 5, sequence: None, dedup: None });
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP", "o1", "m"])), grouped("o1"));
        assert_eq!(push(&a(&["q", "DELAY", "0", "group", "o1", "m", "n"])), grouped("o1"));
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUP", "GROUP", "GROUP"])), grouped("GROUP"));
        // Fewer than two arguments after it: GROUP is a message.
        assert_eq!(
            push(&a(&["q", "DELAY", "0", "GROUP"])),
            Ok(PushArgs { mode: PushMode::Delay(0), group: None, first: 3, sequence: None, dedup: None })
        );
        assert_eq!(
            push(&a(&["q", "DELAY", "0", "GROUP", "m"])),
            Ok(PushArgs { mode: PushMode::Delay(0), group: None, first: 3, sequence: None, dedup: None })
        );
        assert_eq!(push(&a(&["q", "DELAY", "0", "m", "GROUP", "g", "n"])).map(|p| p.first), Ok(3), "only right after the value");
        let long = "g".repeat(MAX_GROUP_BYTES);
        let args = vec![&b"q"[..], b"DELAY", b"0", b"GROUP", long.as_bytes(), b"m"];
        assert_eq!(push(&args).map(|p| p.group.map(<[u8]>::len)), Ok(Some(MAX_GROUP_BYTES)));
        let longer = "g".repeat(MAX_GROUP_BYTES + 1);
        let args = vec![&b"q"[..], b"DELAY", b"0", b"GROUP", longer.as_bytes(), b"m"];
        assert!(push(&args).unwrap_err().message().contains("GROUP"));
    }

    #[test]
    fn push_sequence_and_dedup_options() {
        let p = push(&a(&["q", "DELAY", "0", "GROUP", "g", "SEQUENCE", "gw ", "DEDUP", "id", "300000", "NOTE", "n", "m"])).unwrap();
        assert_eq!((p.group, p.sequence, p.first), (Some(&b"g"[..]), Some(&b"gw "[..]), 12));
        assert_eq!(p.dedup, Some(Dedup { id: b"id", window: 300000, note: Some(b"n") }));
        let p = push(&a(&["q", "DELAY", "0", "dedup", "id", "5", "sequence", "", "m", "n"])).unwrap();
        assert_eq!((p.sequence, p.first, p.dedup.map(|d| d.note)), (Some(&b""[..]), 8, Some(None)));
        // Too few arguments after it, or given already: a message.
        for (args, first) in [
            (vec!["q", "DELAY", "0", "SEQUENCE", "m"], 3),
            (vec!["q", "DELAY", "0", "DEDUP", "id", "5"], 3),
            (vec!["q", "DELAY", "0", "DEDUP", "id", "5", "NOTE", "m"], 6),
            (vec!["q", "DELAY", "0", "SEQUENCE", "p", "SEQUENCE", "p", "m"], 5),
        ] {
            assert_eq!(push(&a(&args)).map(|p| p.first), Ok(first), "{args:?}");
        }
        let long: &'static str = "x".repeat(ledger_records::MAX_TAG + 1).leak();
        for (args, word) in [
            (vec!["q", "DELAY", "0", "DEDUP", "id", "0", "m"], "invalid DEDUP: must be an integer from 1 to 2^41 (ms)"),
            (vec!["q", "DELAY", "0", "DEDUP", "id", "2199023255553", "m"], "invalid DEDUP"),
            (vec!["q", "DELAY", "0", "DEDUP", "id", "x", "m"], "invalid DEDUP"),
            (vec!["q", "DELAY", "0", "DEDUP", "", "5", "m"], "invalid DEDUP id"),
            (vec!["q", "DELAY", "0", "DEDUP", long, "5", "m"], "invalid DEDUP id"),
            (vec!["q", "DELAY", "0", "DEDUP", "i", "5", "NOTE", long, "m"], "invalid NOTE"),
            (vec!["q", "DELAY", "0", "SEQUENCE", long, "m"], "invalid SEQUENCE"),
        ] {
            let e = push(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn no_word_is_longer_than_the_longest() {
        let words = PUSH_OPTIONS.iter().chain(&SCHEDULE_OPTIONS).map(|(w, _)| w.len()).chain([MESSAGES.len()]);
        assert_eq!(words.max(), Some(LONGEST_WORD));
        // A message as long as the longest word is still compared (and one longer is not a word).
        assert_eq!(messages_keyword(&a(&["SEQUENCE", "s", "messages", "m"]), 0, &PUSH_OPTIONS), Some(2));
        assert_eq!(messages_keyword(&a(&["MESSAGES_", "m"]), 0, &PUSH_OPTIONS), None);
    }

    #[test]
    fn push_messages_ends_the_options() {
        let p = push(&a(&["q", "DELAY", "0", "MESSAGES", "GROUP", "g"])).unwrap();
        assert_eq!((p.group, p.first), (None, 4), "after MESSAGES, options are messages");
        let p = push(&a(&["q", "DELAY", "0", "dedup", "i", "5", "note", "n", "group", "g", "SEQUENCE", "s", "messages", "m"])).unwrap();
        assert_eq!((p.group, p.sequence, p.first), (Some(&b"g"[..]), Some(&b"s"[..]), 13));
        assert_eq!(p.dedup, Some(Dedup { id: b"i", window: 5, note: Some(b"n") }));
        // A repeated option: the last value counts (a DEDUP given again drops the first's NOTE).
        let p =
            push(&a(&["q", "RANGE", "1", "GROUP", "a", "GROUP", "b", "DEDUP", "i", "5", "NOTE", "n", "DEDUP", "j", "6", "MESSAGES", "m"]))
                .unwrap();
        assert_eq!((p.group, p.dedup), (Some(&b"b"[..]), Some(Dedup { id: b"j", window: 6, note: None })));
        // An option's value may be the word MESSAGES; a message may be anything.
        let p = push(&a(&["q", "DELAY", "0", "GROUP", "MESSAGES", "MESSAGES", "MESSAGES", "x"])).unwrap();
        assert_eq!((p.group, p.first), (Some(&b"MESSAGES"[..]), 6));
        let unexpected = |w: &str| format!("ERR syntax error: unexpected argument '{w}'");
        let none = "ERR syntax error: MESSAGES needs at least one message".to_string();
        for (args, e) in [
            // The typo: refused, not stored.
            (vec!["q", "DELAY", "0", "GROUPP", "order-1", "MESSAGES", "order-1:paid"], unexpected("GROUPP")),
            (vec!["q", "DELAY", "0", "m", "MESSAGES", "n"], unexpected("m")),
            (vec!["q", "DELAY", "0", "NOTE", "n", "MESSAGES", "m"], unexpected("NOTE")),
            (vec!["q", "DELAY", "0", "GROUP", "g", "NOTE", "n", "MESSAGES", "m"], unexpected("NOTE")),
            (vec!["q", "DELAY", "0", "MESSAGES"], none.clone()),
            (vec!["q", "DELAY", "0", "GROUP", "g", "messages"], none.clone()),
            (
                vec!["q", "DELAY", "0", "GROUP", "", "MESSAGES", "m"],
                "ERR invalid GROUP: must be a non-empty string of at most 1024 bytes".into(),
            ),
            (
                vec!["q", "DELAY", "0", "DEDUP", "i", "0", "MESSAGES", "m"],
                "ERR invalid DEDUP: must be an integer from 1 to 2^41 (ms)".into(),
            ),
        ] {
            assert_eq!(push(&a(&args)).unwrap_err().message(), e, "{args:?}");
        }
        // Without MESSAGES, as before: the misspelled option is a message.
        assert_eq!(push(&a(&["q", "DELAY", "0", "GROUPP", "order-1", "order-1:paid"])).map(|p| p.first), Ok(3));
    }

    #[test]
    fn push_without_a_mode_names_the_modes() {
        let e = "ERR syntax error: expected RANGE, PRIORITY, AT or DELAY, got 'm'";
        for args in [vec!["q", "m"], vec!["q", "m", "n"], vec!["q", "m", "n", "o"]] {
            assert_eq!(push(&a(&args)).unwrap_err().message(), e, "{args:?}");
        }
        assert!(push(&a(&["q"])).unwrap_err().message().contains("wrong number"));
        assert!(push(&a(&["q", "RANGE", "5"])).unwrap_err().message().contains("wrong number"));
    }

    #[test]
    fn redrive_operations() {
        assert_eq!(redrive(&a(&["q", "claim"])), Ok(RedriveOp::Claim { count: 100, stale: 30_000 }));
        assert_eq!(redrive(&a(&["q", "CLAIM", "STALE", "1", "COUNT", "10000"])), Ok(RedriveOp::Claim { count: 10000, stale: 1 }));
        assert_eq!(redrive(&a(&["q", "done", "m", "n"])), Ok(RedriveOp::Done(2)));
        for (args, word) in [
            (vec!["q"], "wrong number"),
            (vec!["q", "DONE"], "wrong number"),
            (vec!["q", "MOVE"], "expected CLAIM or DONE"),
            (vec!["q", "CLAIM", "COUNT", "0"], "invalid COUNT"),
            (vec!["q", "CLAIM", "STALE", "0"], "invalid STALE: must be an integer from 1 to 2^41 (ms)"),
            (vec!["q", "CLAIM", "STALE"], "STALE needs a value"),
            (vec!["q", "CLAIM", "LATER"], "syntax"),
            (vec!["q{x}", "CLAIM"], "queue name"),
        ] {
            let e = redrive(&a(&args)).unwrap_err().message();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn pop_options() {
        assert_eq!(pop(&a(&["q"])), Ok(PopArgs { count: 1, lease: None, block: None, ids: false }));
        assert_eq!(
            pop(&a(&["q", "block", "0", "LEASE", "5", "count", "10000"])),
            Ok(PopArgs { count: 10000, lease: Some(5), block: Some(0), ids: false })
        );
        assert_eq!(pop(&a(&["q", "ids", "COUNT", "2"])), Ok(PopArgs { count: 2, lease: None, block: None, ids: true }));
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
    fn named_delivery_options() {
        assert_eq!(ackid(&a(&["q", "1", "9007199254740992", "1"])), Ok(vec![1, codec::MAX_ID, 1]));
        assert_eq!(nackid(&a(&["q", "7", "DEAD"])), Ok((7, NackArgs { delay: None, dead: true })));
        assert_eq!(extendid(&a(&["q", "7", "50"])), Ok((7, 50)));
        for bad in ["0", "-1", "x", "", "1.0", "9007199254740993"] {
            for e in [ackid(&a(&["q", "1", bad])).map(drop), nackid(&a(&["q", bad])).map(drop), extendid(&a(&["q", bad, "5"])).map(drop)] {
                assert_eq!(e.unwrap_err().message(), "ERR invalid id: must be a delivery id: an integer from 1 to 2^53", "{bad:?}");
            }
        }
        assert!(ackid(&a(&["q"])).unwrap_err().message().contains("'rmq.ackid'"));
        assert!(nackid(&a(&["q"])).unwrap_err().message().contains("'rmq.nackid'"));
        assert!(nackid(&a(&["q", "1", "LATER"])).unwrap_err().message().contains("syntax"));
        assert!(extendid(&a(&["q", "1"])).unwrap_err().message().contains("'rmq.extendid'"));
        assert!(extendid(&a(&["q", "1", "0"])).unwrap_err().message().contains("EXTEND ms"));
        assert!(tpop(&a(&["t", "1", "IDS"])).unwrap_err().message().contains("syntax"), "TPOP names no delivery");
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
        let plain = PopArgs { count: 1, lease: None, block: None, ids: false };
        assert_eq!(tpop(&a(&["t", "16"])), Ok(TpopArgs { slots: 16, pop: plain, quantum: 1 }));
        assert_eq!(
            tpop(&a(&["t", "1", "BLOCK", "0", "count", "100", "quantum", "7", "LEASE", "9"])),
            Ok(TpopArgs { slots: 1, pop: PopArgs { count: 100, lease: Some(9), block: Some(0), ids: false }, quantum: 7 })
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
