//! Parsing RMQ.SCHEDULE (pure, like `args`): every rule on bad input is checked here,
//! before anything is read or written.

use crate::cmd::args::{arity, is, options, push_tail, queue, syntax, which, Opt, MESSAGES, MODES, SCHEDULE_OPTIONS};
use crate::core::cron_schedule::{cron, Spec, Timing, END, EVERY, START, TIMES};
use crate::core::error::{Result, RmqError};
use crate::core::kind::PushMode;

const CMD: &str = "rmq.schedule";
/// Longest schedule name.
pub const MAX_NAME_BYTES: usize = 1024;

#[derive(Debug, PartialEq)]
pub enum ScheduleOp<'a> {
    Set {
        name: &'a [u8],
        spec: Spec,
    },
    /// The names start at this argument.
    Del(usize),
    List,
}

/// RMQ.SCHEDULE Q SET name (EVERY ms | CRON expr [TZ zone]) [START unix-ms] [END unix-ms]
/// [TIMES n] (RANGE ms | PRIORITY p | DELAY ms) [GROUP g] [MESSAGES] message | DEL name
/// [name ...] | LIST
pub fn schedule<'a>(args: &[&'a [u8]]) -> Result<ScheduleOp<'a>> {
    queue(args, CMD)?;
    arity(args, 2, CMD)?;
    match which(args[1], &OPS)? {
        2 => {
            return match args.get(2) {
                None => Ok(ScheduleOp::List),
                Some(a) => Err(syntax(a)),
            }
        }
        1 => {
            arity(args, 3, CMD)?;
            return Ok(ScheduleOp::Del(2));
        }
        _ => {}
    }
    arity(args, 3, CMD)?;
    let name = args[2];
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(RmqError::BadValue("schedule name", "a non-empty string of at most 1024 bytes"));
    }
    set(args, name)
}

const OPS: [Opt; 3] = [Opt::Flag("SET"), Opt::Flag("DEL"), Opt::Flag("LIST")];
/// The options before the mode (any order; given twice, the last one counts).
const TIMING: [Opt; 6] = [Opt::Int(&EVERY), Opt::Str("CRON"), Opt::Str("TZ"), Opt::Int(&START), Opt::Int(&END), Opt::Int(&TIMES)];

fn set<'a>(args: &[&'a [u8]], name: &'a [u8]) -> Result<ScheduleOp<'a>> {
    let mut i = 3;
    let [every, expr, zone, start, end, times] = options(args, &mut i, &TIMING, &MODES)?;
    if i == args.len() {
        return Err(RmqError::Syntax("a schedule needs RANGE, PRIORITY or DELAY and a message".into()));
    }
    // The mode (AT too: the check below refuses it, as it refuses a stored one).
    let (push, strict) = push_tail(args, i, &SCHEDULE_OPTIONS)?;
    let (every, expr, zone) = (every.map(|e| e.int), expr.map(|e| e.raw), zone.map(|z| z.raw));
    let (start, end, times) = (start.map(|s| s.int), end.map(|e| e.int), times.map(|t| t.int as u64));
    if !strict && push.group.is_none() && args.len() - i == 4 && is(args[i + 2], "GROUP") {
        // `... RANGE 1 GROUP g`: read as PUSH would, two messages; surely a missing one.
        return Err(RmqError::Syntax("a schedule needs a message after GROUP g".into()));
    }
    match args.len() - push.first {
        0 => return Err(RmqError::Syntax("a schedule needs a message".into())),
        1 => {}
        _ => return Err(syntax(args[push.first + 1])),
    }
    let timing = match (every, expr) {
        (Some(ms), None) if zone.is_none() => Timing::Every(ms),
        (Some(_), None) => return Err(RmqError::Syntax("TZ goes with CRON, not EVERY".into())),
        (None, Some(e)) => {
            let text =
                |b: &[u8], what: &str| String::from_utf8(b.to_vec()).map_err(|_| RmqError::BadSchedule(format!("{what} is not UTF-8")));
            Timing::Cron(Box::new(cron(&text(e, "the cron expression")?, &text(zone.unwrap_or(b"UTC"), "the zone")?)?))
        }
        (Some(_), Some(_)) => return Err(RmqError::Syntax("EVERY and CRON exclude each other".into())),
        (None, None) => return Err(RmqError::Syntax("a schedule needs EVERY ms or CRON expr".into())),
    };
    let spec = Spec {
        timing,
        start,
        end,
        times,
        mode: push.mode,
        group: push.group.map(<[u8]>::to_vec),
        message: args[push.first].to_vec(),
        text: canonical(&args[3..i], push.mode, push.group, args[push.first]),
    };
    spec.check()?;
    Ok(ScheduleOp::Set { name, spec })
}

/// The SET arguments after the name as LIST shows them: the timing as given, then the push
/// in its canonical form, `<MODE> <value> [GROUP g] MESSAGES message`.
fn canonical(timing: &[&[u8]], mode: PushMode, group: Option<&[u8]>, message: &[u8]) -> Vec<u8> {
    let (word, v) = match mode {
        PushMode::Range(v) => ("RANGE", v),
        PushMode::Priority(v) => ("PRIORITY", v),
        PushMode::At(v) => ("AT", v),
        PushMode::Delay(v) => ("DELAY", v),
    };
    let v = v.to_string();
    let mut words: Vec<&[u8]> = timing.to_vec();
    words.extend([word.as_bytes(), v.as_bytes()]);
    if let Some(g) = group {
        words.extend([&b"GROUP"[..], g]);
    }
    words.extend([MESSAGES.as_bytes(), message]);
    words.join(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&'static str]) -> Result<ScheduleOp<'static>> {
        let args: Vec<&'static [u8]> = args.iter().map(|a| a.as_bytes()).collect();
        schedule(Box::leak(args.into_boxed_slice()))
    }

    fn spec_of(args: &[&'static str]) -> Spec {
        match parse(args) {
            Ok(ScheduleOp::Set { spec, .. }) => spec,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    const SET: [&str; 3] = ["q", "SET", "n"];

    fn set(rest: &[&'static str]) -> Result<ScheduleOp<'static>> {
        parse(&[&SET[..], rest].concat())
    }

    #[test]
    fn set_list_and_del() {
        let s = spec_of(&[
            "q",
            "SET",
            "n",
            "EVERY",
            "500",
            "START",
            "1000000000000",
            "END",
            "2000000000000",
            "TIMES",
            "3",
            "RANGE",
            "10",
            "GROUP",
            "g",
            "hello",
        ]);
        assert_eq!(s.timing, Timing::Every(500));
        assert_eq!((s.start, s.end, s.times), (Some(1_000_000_000_000), Some(2_000_000_000_000), Some(3)));
        assert_eq!((s.mode, s.group.as_deref(), &s.message[..]), (PushMode::Range(10), Some(&b"g"[..]), &b"hello"[..]));
        assert_eq!(s.text, b"EVERY 500 START 1000000000000 END 2000000000000 TIMES 3 RANGE 10 GROUP g MESSAGES hello");
        let s = spec_of(&["q", "set", "n", "tz", "Europe/Paris", "cron", "*/5 * * * * *", "delay", "5", "m"]);
        match &s.timing {
            Timing::Cron(c) => assert_eq!((c.expr.as_str(), c.zone.as_str()), ("*/5 * * * * *", "Europe/Paris")),
            t => panic!("{t:?}"),
        }
        assert_eq!(s.mode, PushMode::Delay(5));
        match &spec_of(&["q", "SET", "n", "CRON", "0 9 * * MON-FRI", "PRIORITY", "1", "m"]).timing {
            Timing::Cron(c) => assert_eq!(c.zone, "UTC", "the default zone"),
            t => panic!("{t:?}"),
        }
        assert_eq!(parse(&["q", "LIST"]), Ok(ScheduleOp::List));
        assert_eq!(parse(&["q", "del", "a", "b"]), Ok(ScheduleOp::Del(2)));
        // Given twice, the last one counts (as for every command's options).
        let s = spec_of(&["q", "SET", "n", "EVERY", "5", "TIMES", "9", "every", "6", "TIMES", "2", "RANGE", "1", "m"]);
        assert_eq!((&s.timing, s.times), (&Timing::Every(6), Some(2)));
        // Like PUSH: GROUP followed by one argument is the message.
        assert_eq!(spec_of(&["q", "SET", "n", "EVERY", "5", "PRIORITY", "-3", "GROUP"]).message, b"GROUP");
    }

    #[test]
    fn messages_ends_a_schedules_options() {
        let s = spec_of(&["q", "SET", "n", "every", "5", "range", "01", "group", "g", "messages", "GROUP"]);
        assert_eq!((s.mode, s.group.as_deref(), &s.message[..]), (PushMode::Range(1), Some(&b"g"[..]), &b"GROUP"[..]));
        assert_eq!(s.text, b"every 5 RANGE 1 GROUP g MESSAGES GROUP", "LIST's canonical form");
        assert_eq!(spec_of(&["q", "SET", "n", "EVERY", "5", "DELAY", "0", "m"]).text, b"EVERY 5 DELAY 0 MESSAGES m");
        assert_eq!(spec_of(&["q", "SET", "n", "EVERY", "5", "DELAY", "0", "MESSAGES", "MESSAGES"]).message, b"MESSAGES");
        for (rest, e) in [
            (&["EVERY", "5", "RANGE", "1", "GROUPP", "g", "MESSAGES", "m"][..], "ERR syntax error: unexpected argument 'GROUPP'"),
            (&["EVERY", "5", "RANGE", "1", "SEQUENCE", "s", "MESSAGES", "m"], "ERR syntax error: unexpected argument 'SEQUENCE'"),
            (&["EVERY", "5", "RANGE", "1", "GROUP", "g", "MESSAGES"], "ERR syntax error: MESSAGES needs at least one message"),
            (&["EVERY", "5", "RANGE", "1", "MESSAGES", "m", "n"], "ERR syntax error: unexpected argument 'n'"),
        ] {
            assert_eq!(set(rest).map(|_| ()).unwrap_err().message(), e, "{rest:?}");
        }
    }

    #[test]
    fn bad_input_is_refused() {
        let bad: &[(&[&str], &str)] = &[
            (&["EVERY", "0", "RANGE", "1", "m"], "EVERY"),
            (&["EVERY", "2199023255553", "RANGE", "1", "m"], "EVERY"),
            (&["EVERY", "x", "RANGE", "1", "m"], "EVERY"),
            (&["EVERY", "5", "CRON", "* * * * *", "RANGE", "1", "m"], "exclude"),
            (&["RANGE", "1", "m"], "EVERY ms or CRON"),
            (&["EVERY", "5", "TZ", "UTC", "RANGE", "1", "m"], "TZ goes with CRON"),
            (&["CRON", "* * * *", "RANGE", "1", "m"], "5 fields"),
            (&["CRON", "* * * * * * 2030", "RANGE", "1", "m"], "5 fields"),
            (&["CRON", "99 * * * *", "RANGE", "1", "m"], "cron expression"),
            (&["CRON", "* * * * *", "TZ", "Nowhere/Land", "RANGE", "1", "m"], "time zone"),
            (&["EVERY", "5", "TIMES", "0", "RANGE", "1", "m"], "TIMES"),
            (&["EVERY", "5", "START", "5", "RANGE", "1", "m"], "START"),
            (&["EVERY", "5", "END", "-1", "RANGE", "1", "m"], "END"),
            (&["EVERY", "5", "START", "2000000000000", "END", "1000000000000", "RANGE", "1", "m"], "after END"),
            (&["EVERY", "5", "AT", "1000000000000", "m"], "AT is not"),
            (&["EVERY", "5", "RANGE", "0", "m"], "RANGE"),
            (&["EVERY", "5", "PRIORITY", "x", "m"], "PRIORITY"),
            (&["EVERY", "5", "DELAY", "-1", "m"], "DELAY"),
            (&["EVERY", "5", "RANGE", "1"], "needs a message"),
            (&["EVERY", "5", "RANGE"], "needs a value"),
            (&["EVERY", "5", "RANGE", "1", "GROUP", "g"], "needs a message"),
            (&["EVERY", "5", "RANGE", "1", "m", "extra"], "extra"),
            (&["EVERY", "5", "RANGE", "1", "GROUP", "", "m"], "GROUP"),
            (&["EVERY", "5", "BOGUS", "1", "m"], "BOGUS"),
            (&["EVERY", "5"], "needs RANGE"),
            (&["EVERY"], "needs a value"),
        ];
        for (rest, word) in bad {
            match set(rest) {
                Err(e) => assert!(e.message().contains(word), "{rest:?}: {} lacks {word}", e.message()),
                Ok(op) => panic!("{rest:?} accepted: {op:?}"),
            }
        }
        for (args, word) in [
            (&["q"][..], "wrong number"),
            (&["q", "SET"], "wrong number"),
            (&["q", "SET", ""], "schedule name"),
            (&["q", "DEL"], "wrong number"),
            (&["q", "LIST", "x"], "'x'"),
            (&["q", "GET"], "expected SET, DEL or LIST"),
            (&["a{b", "LIST"], "queue name"),
        ] {
            match parse(args) {
                Err(e) => assert!(e.message().contains(word), "{args:?}: {} lacks {word}", e.message()),
                Ok(op) => panic!("{args:?} accepted: {op:?}"),
            }
        }
    }
}
