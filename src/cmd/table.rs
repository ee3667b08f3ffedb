//! Every command in one table: its C entry point, flags, key, arity and `COMMAND DOCS`
//! metadata. Registration (`module`) and the metadata both walk it.

use std::ffi::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::cmd::fifo;
use crate::cmd::handlers;
use crate::cmd::queues;
use crate::cmd::schedule;
use crate::cmd::trace;
use crate::cmd::Call;
use crate::core::error::{Result, RmqError};
use crate::ffi::command::{self, arg, many, opt, tok, tok_many, Arg, KeyUse, Spec, Ty};
use crate::ffi::guard::caught;
use crate::ffi::reply;

/// Runs a command body with panics caught and errors turned into error replies.
fn run(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int, body: fn(&Call) -> Result<()>) -> c_int {
    command::run(ctx, argv, argc, |ctx, argv| {
        let outcome = caught(|| argv.with_bytes(|args| body(&Call { ctx, argv, args })));
        match outcome {
            Some(Ok(())) => {}
            Some(Err(e)) => reply::error(ctx, &e.message()),
            None => reply::error(ctx, &RmqError::Internal("the command panicked; nothing was replied".into()).message()),
        }
    })
}

const QUEUE: Arg = arg("queue", Ty::Key);
const MODES: &[Arg] =
    &[tok("RANGE", "ms", Ty::Int), tok("PRIORITY", "priority", Ty::Int), tok("AT", "unix-ms", Ty::Time), tok("DELAY", "ms", Ty::Int)];
const DEDUP: &[Arg] = &[tok("DEDUP", "id", Ty::Str), arg("window-ms", Ty::Int), opt("NOTE", "note", Ty::Str)];
const REDRIVE_CLAIM: &[Arg] = &[opt("COUNT", "count", Ty::Int), opt("STALE", "ms", Ty::Int)];
const REDRIVE_OPS: &[Arg] = &[tok("CLAIM", "claim", Ty::Block(REDRIVE_CLAIM)), tok_many("DONE", "message", Ty::Str)];
const SCHEDULE_MODES: &[Arg] = &[tok("RANGE", "ms", Ty::Int), tok("PRIORITY", "priority", Ty::Int), tok("DELAY", "ms", Ty::Int)];
const SCHEDULE_CRON: &[Arg] = &[tok("CRON", "expr", Ty::Str), opt("TZ", "zone", Ty::Str)];
const SCHEDULE_TIMING: &[Arg] = &[tok("EVERY", "ms", Ty::Int), arg("cron", Ty::Block(SCHEDULE_CRON))];
const SCHEDULE_SET: &[Arg] = &[
    arg("name", Ty::Str),
    arg("timing", Ty::OneOf(SCHEDULE_TIMING)),
    opt("START", "unix-ms", Ty::Time),
    opt("END", "unix-ms", Ty::Time),
    opt("TIMES", "n", Ty::Int),
    arg("mode", Ty::OneOf(SCHEDULE_MODES)),
    opt("GROUP", "group", Ty::Str),
    opt("MESSAGES", "messages", Ty::Token),
    arg("message", Ty::Str),
];
const SCHEDULE_OPS: &[Arg] =
    &[tok("SET", "set", Ty::Block(SCHEDULE_SET)), tok_many("DEL", "name", Ty::Str), tok("LIST", "list", Ty::Token)];
const POLICY_PAIR: &[Arg] = &[arg("field", Ty::Str), arg("value", Ty::Int)];
const POLICY_OPS: &[Arg] =
    &[tok_many("SET", "field-value", Ty::Block(POLICY_PAIR)), tok("GET", "get", Ty::Token), tok("RESET", "reset", Ty::Token)];

/// Defines one `extern "C"` entry per command (running its body through `run`) and the
/// table of their specs.
macro_rules! commands {
    ($table:ident: $($entry:ident => $body:path { $($field:ident: $value:expr),* $(,)? })*) => {
        $(extern "C" fn $entry(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int) -> c_int {
            run(ctx, argv, argc, $body)
        })*
        pub static $table: &[Spec] = &[$(Spec { entry: $entry, $($field: $value),* }),*];
    };
}

commands! { COMMANDS:
    cmd_push => handlers::push {
        // Arity -2: a push without a mode is told the modes, whatever its length.
        name: c"rmq.push", flags: c"write deny-oom", key: KeyUse::Write, arity: -2, acl: c"write",
        summary: c"Adds messages of one kind (range-merge, priority or fixed-time); duplicates merge by the kind's rule",
        complexity: c"O(N log(M)) for N messages in a queue of M",
        args: &[
            QUEUE,
            arg("mode", Ty::OneOf(MODES)),
            opt("GROUP", "group", Ty::Str),
            opt("SEQUENCE", "prefix", Ty::Str),
            Arg { optional: true, ..arg("dedup", Ty::Block(DEDUP)) },
            opt("MESSAGES", "messages", Ty::Token),
            many("message"),
        ],
    }
    cmd_pop => handlers::pop {
        name: c"rmq.pop", flags: c"write blocking", key: KeyUse::WriteAccess, arity: -2, acl: c"write blocking",
        summary: c"Takes up to COUNT deliverable messages under a lease (two-phase); BLOCK waits for one; IDS names each delivery",
        complexity: c"O(N log(M)) for N messages taken",
        args: &[
            QUEUE,
            opt("COUNT", "count", Ty::Int),
            opt("LEASE", "ms", Ty::Int),
            opt("BLOCK", "timeout-ms", Ty::Int),
            opt("IDS", "ids", Ty::Token),
        ],
    }
    cmd_tpop => handlers::tpop {
        name: c"rmq.tpop", flags: c"write blocking", key: KeyUse::None, arity: -3, acl: c"write blocking slow",
        summary: c"Takes up to COUNT deliverable messages from the queues <topic>_0 .. <topic>_<slots-1> this server holds, up to QUANTUM from each in turn, under a lease; BLOCK waits for one",
        complexity: c"O(N log(M)) for N messages taken, whatever the number of empty queues",
        args: &[
            arg("topic", Ty::Str),
            arg("slots", Ty::Int),
            opt("COUNT", "count", Ty::Int),
            opt("QUANTUM", "quantum", Ty::Int),
            opt("LEASE", "ms", Ty::Int),
            opt("BLOCK", "timeout-ms", Ty::Int),
        ],
    }
    cmd_ack => handlers::ack {
        name: c"rmq.ack", flags: c"write fast", key: KeyUse::Write, arity: -3, acl: c"write fast",
        summary: c"Ends in-flight deliveries",
        complexity: c"O(N log(M))",
        args: &[QUEUE, many("message")],
    }
    cmd_nack => handlers::nack {
        name: c"rmq.nack", flags: c"write fast", key: KeyUse::Write, arity: -3, acl: c"write fast",
        summary: c"Fails an in-flight delivery: requeued (after DELAY ms) or, when retries are used up or DEAD is given, dead",
        complexity: c"O(log(M))",
        args: &[QUEUE, arg("message", Ty::Str), opt("DELAY", "ms", Ty::Int), opt("DEAD", "dead", Ty::Token)],
    }
    cmd_sweep => handlers::sweep {
        name: c"rmq.sweep", flags: c"write", key: KeyUse::Write, arity: -2, acl: c"write slow",
        summary: c"Rolls back expired leases now (the server also does it by itself)",
        complexity: c"O(N log(M)) for N expired leases",
        args: &[QUEUE, opt("LIMIT", "count", Ty::Int)],
    }
    cmd_extend => handlers::extend {
        name: c"rmq.extend", flags: c"write fast", key: KeyUse::Write, arity: 4, acl: c"write fast",
        summary: c"Sets an in-flight message's lease deadline to now + ms",
        complexity: c"O(log(M))",
        args: &[QUEUE, arg("message", Ty::Str), arg("ms", Ty::Int)],
    }
    cmd_ackid => handlers::ackid {
        name: c"rmq.ackid", flags: c"write fast", key: KeyUse::Write, arity: -3, acl: c"write fast",
        summary: c"Ends in-flight deliveries by the ids RMQ.POP ... IDS gave them (an ended delivery's id ends nothing)",
        complexity: c"O(N log(M))",
        args: &[QUEUE, Arg { multiple: true, ..arg("id", Ty::Int) }],
    }
    cmd_nackid => handlers::nackid {
        name: c"rmq.nackid", flags: c"write fast", key: KeyUse::Write, arity: -3, acl: c"write fast",
        summary: c"RMQ.NACK of the in-flight delivery with this id (RMQ.POP ... IDS)",
        complexity: c"O(log(M))",
        args: &[QUEUE, arg("id", Ty::Int), opt("DELAY", "ms", Ty::Int), opt("DEAD", "dead", Ty::Token)],
    }
    cmd_extendid => handlers::extendid {
        name: c"rmq.extendid", flags: c"write fast", key: KeyUse::Write, arity: 4, acl: c"write fast",
        summary: c"RMQ.EXTEND of the in-flight delivery with this id (RMQ.POP ... IDS)",
        complexity: c"O(log(M))",
        args: &[QUEUE, arg("id", Ty::Int), arg("ms", Ty::Int)],
    }
    cmd_cancel => handlers::cancel {
        name: c"rmq.cancel", flags: c"write", key: KeyUse::Write, arity: -3, acl: c"write",
        summary: c"Removes waiting copies of messages",
        complexity: c"O(N log(M))",
        args: &[QUEUE, many("message")],
    }
    cmd_replay => handlers::replay {
        name: c"rmq.replay", flags: c"write deny-oom", key: KeyUse::Write, arity: -2, acl: c"write slow",
        summary: c"Moves dead messages back to waiting, oldest death first, delivery count reset",
        complexity: c"O(N log(M)) for N messages replayed",
        args: &[QUEUE, opt("COUNT", "count", Ty::Int)],
    }
    cmd_purge => handlers::purge {
        name: c"rmq.purge", flags: c"write", key: KeyUse::Write, arity: -2, acl: c"write slow",
        summary: c"Removes every waiting (held back included) and in-flight message, and with DEAD the dead ones; policy, schedules, deduplication, sequence and delivery ids stay",
        complexity: c"O(1) for what it removes (freed lazily), O(D) for D dead messages kept",
        args: &[QUEUE, opt("DEAD", "dead", Ty::Token)],
    }
    cmd_drop => handlers::drop_queue {
        name: c"rmq.drop", flags: c"write", key: KeyUse::Write, arity: 2, acl: c"write slow",
        summary: c"Deletes the queue and every key the module keeps for it: messages in every state, policy, schedules, deduplication, sequence, delivery ids, journal",
        complexity: c"O(1) (its keys are freed lazily), O(S) for S schedules",
        args: &[QUEUE],
    }
    cmd_info => handlers::info {
        name: c"rmq.info", flags: c"readonly fast", key: KeyUse::Read, arity: 2, acl: c"read fast",
        summary: c"A queue's kind and counts: waiting, ready, inflight, dead, next_due, next_expiry",
        complexity: c"O(log(M))",
        args: &[QUEUE],
    }
    cmd_pending => handlers::pending {
        name: c"rmq.pending", flags: c"readonly", key: KeyUse::Read, arity: -2, acl: c"read slow",
        summary: c"In-flight deliveries, soonest deadline first, with delivery counts",
        complexity: c"O(N) for N returned",
        args: &[QUEUE, opt("COUNT", "count", Ty::Int)],
    }
    cmd_policy => handlers::policy {
        name: c"rmq.policy", flags: c"readonly", key: KeyUse::Write, arity: -3, acl: c"write slow",
        summary: c"A queue's own settings (retries, lease-ms, max-queue-length, backoff-ms, backoff-max-ms, rate, rate-window-ms, paused, journal): SET, GET (effective values) or RESET",
        complexity: c"O(1)",
        args: &[QUEUE, arg("operation", Ty::OneOf(POLICY_OPS))],
    }
    cmd_queues => queues::queues {
        name: c"rmq.queues", flags: c"readonly", key: KeyUse::None, arity: -1, acl: c"read slow",
        summary: c"The queues this server holds (in the hash slots it serves), SCAN-like: start with CURSOR 0, stop when the reply's cursor is 0",
        complexity: c"O(COUNT) per call",
        args: &[opt("MATCH", "pattern", Ty::Str), opt("COUNT", "count", Ty::Int), opt("CURSOR", "cursor", Ty::Str)],
    }
    // Read-only as far as Redis knows, so LIST answers on a replica (like POLICY GET):
    // SET and DEL refuse themselves on a replica and, SET, when out of memory.
    cmd_schedule => schedule::schedule {
        name: c"rmq.schedule", flags: c"readonly", key: KeyUse::Write, arity: -3, acl: c"write slow",
        summary: c"A queue's schedules: repeating pushes the server fires by itself (EVERY ms or CRON expr [TZ zone]): SET, DEL or LIST",
        complexity: c"O(log(N)) for SET and DEL of one schedule of N; O(N) for LIST",
        args: &[QUEUE, arg("operation", Ty::OneOf(SCHEDULE_OPS))],
    }
    cmd_redrive => fifo::redrive {
        name: c"rmq.redrive", flags: c"write", key: KeyUse::Write, arity: -3, acl: c"write",
        summary: c"Moves dead messages elsewhere in two steps: CLAIM takes them (oldest death first, and claims older than STALE ms again) into moving{Q}; DONE drops their claims once the caller has pushed them to their target",
        complexity: c"O(C + N log(M)) for C claims outstanding and N messages claimed",
        args: &[QUEUE, arg("operation", Ty::OneOf(REDRIVE_OPS))],
    }
    cmd_trace => trace::trace {
        name: c"rmq.trace", flags: c"readonly", key: KeyUse::Read, arity: -3, acl: c"read slow",
        summary: c"The journal's events of one message (RMQ.POLICY ... journal n), newest first, at most COUNT (default 100)",
        complexity: c"O(N) for a journal of N entries",
        args: &[QUEUE, arg("message", Ty::Str), opt("COUNT", "count", Ty::Int)],
    }
    cmd_route => handlers::route {
        name: c"rmq.route", flags: c"readonly fast", key: KeyUse::None, arity: 4, acl: c"fast",
        summary: c"The queue of a topic's slot for a basis: <topic>_<crc32(basis) mod slots>",
        complexity: c"O(length of basis)",
        args: &[arg("topic", Ty::Str), arg("slots", Ty::Int), arg("basis", Ty::Str)],
    }
}

// Registered only with `test-clock 1` at load (model tests).
commands! { TEST_COMMANDS:
    cmd_testclock => handlers::testclock {
        name: c"rmq.testclock", flags: c"write", key: KeyUse::None, arity: -2, acl: c"dangerous",
        summary: c"Test only (loaded with test-clock 1): GET, SET ms or ADVANCE ms the module's clock",
        complexity: c"O(1)",
        args: &[arg("operation", Ty::Str), arg("ms", Ty::Int)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_once_with_its_queue_first() {
        let mut names: Vec<_> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
        for c in COMMANDS.iter().chain(TEST_COMMANDS) {
            assert!(c.name.to_bytes().starts_with(b"rmq."));
            assert!(!c.args.is_empty());
            let first_is_key = matches!(c.args[0].ty, Ty::Key);
            assert_eq!(first_is_key, c.key != KeyUse::None, "{:?}", c.name);
        }
    }
}
