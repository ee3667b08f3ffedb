//! Walks the command table (`table`) and feeds each command's parser every token the
//! table documents for it, each with good values, wrong types, out-of-range numbers,
//! binary junk, a missing value and a repeat: every parse is a valid result or a clear
//! error (an `ERR` reply naming what was wrong), never a panic, and a repeated option
//! follows the one rule (the last one counts).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::cmd::table::{COMMANDS, TEST_COMMANDS};
use crate::cmd::{args, schedule_args};
use crate::core::error::{Result, RmqError};
use crate::core::num::parse_int;
use crate::core::policy::{Field, Policy};
use crate::ffi::command::{Arg, Ty};

/// A pure parser, its result printed (so that two parses compare).
type Parse = fn(&[&[u8]]) -> Result<String>;

fn shown<T: std::fmt::Debug>(r: Result<T>) -> Result<String> {
    r.map(|v| format!("{v:?}"))
}

/// A command's parser, a valid call, and where its options go: between the arguments
/// `before` and `after`.
struct Grammar {
    parse: Parse,
    call: Vec<&'static str>,
    before: &'static [&'static str],
    after: &'static [&'static str],
}

fn grammar(name: &str) -> Option<Grammar> {
    let g = |parse: Parse, before: &'static [&'static str], after| Some(Grammar { parse, call: [before, after].concat(), before, after });
    match name {
        // Its mode is where the options go.
        "rmq.push" => Some(Grammar { parse: |a| shown(args::push(a)), call: vec!["q", "RANGE", "5", "m"], before: &["q"], after: &["m"] }),
        "rmq.pop" => g(|a| shown(args::pop(a)), &["q"], &[]),
        "rmq.tpop" => g(|a| shown(args::tpop(a)), &["t", "8"], &[]),
        "rmq.ack" => g(|a| shown(args::messages(a, "rmq.ack")), &["q", "m"], &[]),
        "rmq.cancel" => g(|a| shown(args::messages(a, "rmq.cancel")), &["q", "m"], &[]),
        "rmq.nack" => g(|a| shown(args::nack(a)), &["q", "m"], &[]),
        "rmq.sweep" => g(|a| shown(args::sweep(a)), &["q"], &[]),
        "rmq.replay" => g(|a| shown(args::replay(a)), &["q"], &[]),
        "rmq.pending" => g(|a| shown(args::pending(a)), &["q"], &[]),
        "rmq.extend" => g(|a| shown(args::extend(a)), &["q", "m", "10"], &[]),
        "rmq.ackid" => g(|a| shown(args::ackid(a)), &["q", "1"], &[]),
        "rmq.nackid" => g(|a| shown(args::nackid(a)), &["q", "1"], &[]),
        "rmq.extendid" => g(|a| shown(args::extendid(a)), &["q", "1", "10"], &[]),
        "rmq.info" => g(|a| shown(args::info(a)), &["q"], &[]),
        "rmq.purge" => g(|a| shown(args::purge(a)), &["q"], &[]),
        "rmq.drop" => g(|a| shown(args::drop_queue(a)), &["q"], &[]),
        "rmq.route" => g(|a| shown(args::route(a)), &["t", "8", "b"], &[]),
        "rmq.queues" => g(|a| shown(args::queues(a)), &[], &[]),
        "rmq.trace" => g(|a| shown(crate::cmd::trace::parse(a)), &["q", "m"], &[]),
        // CLAIM's options go after CLAIM (after DONE, every argument is a message).
        "rmq.redrive" => g(|a| shown(args::redrive(a)), &["q", "CLAIM"], &[]),
        "rmq.testclock" => g(|a| shown(args::testclock(a, 5)), &["SET", "5"], &[]),
        // The fields as applied (in order), so that a repeated field shows as its last value.
        "rmq.policy" => g(
            |a| {
                args::policy(a).map(|op| match op {
                    args::PolicyOp::Set(pairs) => {
                        let mut p = Policy::default();
                        pairs.into_iter().for_each(|(f, v)| p.set(f, v));
                        format!("SET {p:?}")
                    }
                    op => format!("{op:?}"),
                })
            },
            &["q", "SET", "retries", "3"],
            &[],
        ),
        // All but the schedule's text (the arguments as given, repeats included).
        "rmq.schedule" => g(
            |a| {
                schedule_args::schedule(a).map(|op| match op {
                    schedule_args::ScheduleOp::Set { name, spec } => format!(
                        "SET {name:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                        spec.timing, spec.start, spec.end, spec.times, spec.mode, spec.group, spec.message
                    ),
                    op => format!("{op:?}"),
                })
            },
            &["q", "SET", "n", "EVERY", "5"],
            &["RANGE", "1", "m"],
        ),
        _ => None,
    }
}

/// Every token in `args` (options, alternatives, blocks) with its value's type.
fn tokens(args: &[Arg], out: &mut Vec<(&'static str, Ty)>) {
    for a in args {
        if let Some(t) = a.token {
            out.push((t, a.ty));
        }
        if let Ty::OneOf(inner) | Ty::Block(inner) = a.ty {
            tokens(inner, out);
        }
    }
}

const VALUES: &[&[u8]] = &[
    b"0",
    b"1",
    b"-1",
    b"7",
    b"10000",
    b"10001",
    b"1000000",
    b"946684799999",
    b"946684800000",
    b"2000000000000",
    b"4503599627370496",
    b"4503599627370497",
    b"9007199254740992",
    b"9007199254740993",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"x",
    b"",
    b"1.5",
    b"+1",
    b" 1",
    b"0x10",
    b"\0",
    b"\xff\xfe",
    b"{",
    b"*/5 * * * *",
    b"UTC",
    b"COUNT",
];

fn with(before: &[&'static str], mid: &[&[u8]], after: &[&'static str]) -> Vec<Vec<u8>> {
    let words = |w: &[&str]| w.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    [words(before), mid.iter().map(|m| m.to_vec()).collect(), words(after)].concat()
}

/// The parse of `args`, with a panic a test failure that names the arguments, and any
/// error checked to be a clear one.
fn run(name: &str, parse: Parse, args: &[Vec<u8>]) -> Result<String> {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let out = catch_unwind(AssertUnwindSafe(|| parse(&refs))).unwrap_or_else(|_| panic!("{name} panicked on {args:?}"));
    if let Err(e) = &out {
        let m = e.message();
        assert!(m.starts_with("ERR ") && !matches!(e, RmqError::Internal(_)), "{name} {args:?}: {m}");
    }
    out
}

fn is_int(ty: Ty) -> bool {
    matches!(ty, Ty::Int | Ty::Time)
}

#[test]
fn every_token_of_every_command() {
    for spec in COMMANDS.iter().chain(TEST_COMMANDS) {
        let name = spec.name.to_str().unwrap();
        let g = grammar(name).unwrap_or_else(|| panic!("{name}: a command of the table without a parser in this test"));
        let run = |a: &[Vec<u8>]| run(name, g.parse, a);
        let full = with(&g.call, &[], &[]);
        assert!(run(&full).is_ok(), "{name}: the valid call");
        let mut toks = Vec::new();
        tokens(spec.args, &mut toks);
        if name == "rmq.policy" {
            toks.extend(Field::ALL.map(|f| (f.name(), Ty::Int)));
        }
        // Positional integers: each value in their place.
        for (i, a) in spec.args.iter().enumerate().filter(|(i, a)| a.token.is_none() && is_int(a.ty) && *i < g.before.len()) {
            for v in VALUES {
                let mut args = full.clone();
                args[i] = v.to_vec();
                if run(&args).is_ok() {
                    assert!(parse_int(v).is_some(), "{name}: {} accepted {v:?}", a.name);
                }
            }
        }
        // A syntax of one optional `WORD n` after Q allows no more: a repeat is too many.
        let single = matches!(spec.args, [q, o] if matches!(q.ty, Ty::Key) && o.optional && o.token.is_some());
        for &(tok, ty) in &toks {
            let t = tok.as_bytes();
            for v in VALUES {
                let once = run(&with(g.before, &[t, v], g.after));
                if is_int(ty) && parse_int(v).is_none() {
                    let m = once.as_ref().expect_err(&format!("{name} {tok} accepted {v:?}")).message();
                    let named = m.contains(&format!("invalid {tok}")) || m.contains("syntax error") || m.contains("wrong number");
                    assert!(named, "{name} {tok} {v:?}: {m}");
                }
                // Given twice: the last one counts (PUSH's GROUP has its place fixed by the
                // the contract: after it, another GROUP is a message).
                if name == "rmq.push" || matches!(ty, Ty::Token) {
                    continue;
                }
                for last in [&b"7"[..], b"2000000000000", b"x"] {
                    let twice = run(&with(g.before, &[t, v, t, last], g.after));
                    let alone = run(&with(g.before, &[t, last], g.after));
                    if single {
                        assert_eq!(twice, Err(RmqError::Arity(name_static(name))), "{name} {tok} twice");
                    } else if once.is_ok() && alone.is_ok() {
                        assert_eq!(twice, alone, "{name}: {tok} {v:?} then {last:?}");
                    } else if twice.is_ok() {
                        assert_eq!(twice, alone, "{name}: {tok} {v:?} then {last:?}");
                        assert!(once.is_ok(), "{name}: {tok} {v:?} refused alone, accepted before another");
                    }
                }
            }
            // Without its value: named as missing where nothing follows it (an operation's
            // token is another operation's argument in POLICY and REDRIVE).
            let bare = run(&with(g.before, &[t], g.after));
            let operation = name == "rmq.policy" || (name == "rmq.redrive" && tok == "DONE");
            if g.after.is_empty() && !matches!(ty, Ty::Token | Ty::Block(_)) && !operation {
                assert_eq!(bare, Err(RmqError::Syntax(format!("{tok} needs a value"))), "{name} {tok}");
            }
            // Its value as the last argument of a call that needs more.
            if !g.after.is_empty() {
                let _ = run(&with(g.before, &[t], &[]));
            }
        }
        // Junk where an option would be, and the call cut short at every point.
        for v in VALUES {
            let _ = run(&with(g.before, &[v], g.after));
            let _ = run(&with(g.before, &[v, v], g.after));
        }
        for n in 0..full.len() {
            let _ = run(&full[..n]);
        }
    }
}

/// The `'static` name an arity error carries.
fn name_static(name: &str) -> &'static str {
    COMMANDS.iter().map(|c| c.name.to_str().unwrap()).find(|n| *n == name).unwrap_or("?")
}
