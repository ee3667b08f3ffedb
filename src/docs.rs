//! Command metadata for `COMMAND DOCS` / `COMMAND INFO` (Redis >= 7.0): summary,
//! complexity, arity, key spec and arguments. Skipped where the server lacks the API, so
//! the module still loads there.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw::{self, RedisModuleCommandArg as CArg, RedisModuleCommandKeySpec as CKeySpec, RedisModuleCtx};


#[derive(Clone, Copy)]
enum Ty {
    Key,
    Str,
    Int,
    Time,
    Token,
    OneOf(&'static [Arg]),
}

#[derive(Clone, Copy)]
struct Arg {
    name: &'static str,
    ty: Ty,
    token: Option<&'static str>,
    optional: bool,
    multiple: bool,
}

const fn arg(name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: None, optional: false, multiple: false }
}
const fn opt(token: &'static str, name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: Some(token), optional: true, multiple: false }
}
const fn many(name: &'static str) -> Arg {
    Arg { name, ty: Ty::Str, token: None, optional: false, multiple: true }
}
const fn tok(token: &'static str, name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: Some(token), optional: false, multiple: false }
}

const QUEUE: Arg = arg("queue", Ty::Key);
const MODES: &[Arg] = &[
    tok("RANGE", "ms", Ty::Int),
    tok("PRIORITY", "priority", Ty::Int),
    tok("AT", "unix-ms", Ty::Time),
    tok("DELAY", "ms", Ty::Int),
];

struct Doc {
    name: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    arity: c_int,
    /// Key-spec flags of the queue argument; None for a keyless command.
    key: Option<u32>,
    args: &'static [Arg],
}

// Redis allows one of INSERT/DELETE/UPDATE per key spec: every writer may do all three, so
// UPDATE; ACCESS where message data is returned.
const WRITES: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
const READS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;

const DOCS: &[Doc] = &[
    Doc { name: c"rmq.push", summary: c"Adds messages of one kind (range-merge, priority or fixed-time); duplicates merge by the kind's rule", complexity: c"O(N log(M)) for N messages in a queue of M", arity: -5, key: Some(WRITES),
        args: &[QUEUE, arg("mode", Ty::OneOf(MODES)), many("message")] },
    Doc { name: c"rmq.pop", summary: c"Takes up to COUNT deliverable messages under a lease (two-phase); BLOCK waits for one", complexity: c"O(N log(M)) for N messages taken", arity: -2, key: Some(WRITES | raw::REDISMODULE_CMD_KEY_ACCESS),
        args: &[QUEUE, opt("COUNT", "count", Ty::Int), opt("LEASE", "ms", Ty::Int), opt("BLOCK", "timeout-ms", Ty::Int)] },
    Doc { name: c"rmq.ack", summary: c"Ends in-flight deliveries", complexity: c"O(N log(M))", arity: -3, key: Some(WRITES),
        args: &[QUEUE, many("message")] },
    Doc { name: c"rmq.nack", summary: c"Fails an in-flight delivery: requeued (after DELAY ms) or, when retries are used up or DEAD is given, dead", complexity: c"O(log(M))", arity: -3, key: Some(WRITES),
        args: &[QUEUE, arg("message", Ty::Str), opt("DELAY", "ms", Ty::Int), opt("DEAD", "dead", Ty::Token)] },
    Doc { name: c"rmq.sweep", summary: c"Rolls back expired leases now (the server also does it by itself)", complexity: c"O(N log(M)) for N expired leases", arity: -2, key: Some(WRITES),
        args: &[QUEUE, opt("LIMIT", "count", Ty::Int)] },
    Doc { name: c"rmq.extend", summary: c"Sets an in-flight message's lease deadline to now + ms", complexity: c"O(log(M))", arity: 4, key: Some(WRITES),
        args: &[QUEUE, arg("message", Ty::Str), arg("ms", Ty::Int)] },
    Doc { name: c"rmq.cancel", summary: c"Removes waiting copies of messages", complexity: c"O(N log(M))", arity: -3, key: Some(WRITES),
        args: &[QUEUE, many("message")] },
    Doc { name: c"rmq.replay", summary: c"Moves dead messages back to waiting, oldest death first, delivery count reset", complexity: c"O(N log(M)) for N messages replayed", arity: -2, key: Some(WRITES),
        args: &[QUEUE, opt("COUNT", "count", Ty::Int)] },
    Doc { name: c"rmq.info", summary: c"A queue's kind and counts: waiting, ready, inflight, dead, next_due, next_expiry", complexity: c"O(log(M))", arity: 2, key: Some(READS),
        args: &[QUEUE] },
    Doc { name: c"rmq.pending", summary: c"In-flight deliveries, soonest deadline first, with delivery counts", complexity: c"O(N) for N returned", arity: -2, key: Some(READS),
        args: &[QUEUE, opt("COUNT", "count", Ty::Int)] },
    Doc { name: c"rmq.route", summary: c"The queue of a topic's slot for a basis: <topic>_<crc32(basis) mod slots>", complexity: c"O(length of basis)", arity: 4, key: None,
        args: &[arg("topic", Ty::Str), arg("slots", Ty::Int), arg("basis", Ty::Str)] },
];

/// Keeps the C strings alive until Redis has copied them.
#[derive(Default)]
struct Strings(Vec<CString>);

impl Strings {
    fn add(&mut self, s: &str) -> *const std::ffi::c_char {
        let c = CString::new(s).unwrap_or_default();
        let p = c.as_ptr();
        self.0.push(c);
        p
    }
}

/// The C argument array (zero-terminated) for `args`; `subs` keeps nested arrays alive.
fn c_args(args: &[Arg], strings: &mut Strings, subs: &mut Vec<Vec<CArg>>) -> Vec<CArg> {
    let mut out: Vec<CArg> = args
        .iter()
        .map(|a| {
            let mut c: CArg = unsafe { std::mem::zeroed() };
            c.name = strings.add(a.name);
            c.key_spec_index = -1;
            c.type_ = match a.ty {
                Ty::Key => {
                    c.key_spec_index = 0;
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY
                }
                Ty::Str => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                Ty::Int => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                Ty::Time => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
                Ty::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                Ty::OneOf(inner) => {
                    let mut v = c_args(inner, strings, subs);
                    c.subargs = v.as_mut_ptr();
                    subs.push(v);
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF
                }
            };
            if let Some(t) = a.token {
                c.token = strings.add(t);
            }
            c.flags = (if a.optional { raw::REDISMODULE_CMD_ARG_OPTIONAL } else { 0 }
                | if a.multiple { raw::REDISMODULE_CMD_ARG_MULTIPLE } else { 0 }) as c_int;
            c
        })
        .collect();
    out.push(unsafe { std::mem::zeroed() });
    out
}

/// Sets the metadata of every command. Returns false if the server refused one.
pub fn register(ctx: *mut RedisModuleCtx) -> bool {
    let (Some(get), Some(set)) = (unsafe { raw::RedisModule_GetCommand }, unsafe { raw::RedisModule_SetCommandInfo }) else {
        return true; // before 7.0: no metadata, nothing else changes
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<CKeySpec>(),
        sizeof_arg: std::mem::size_of::<CArg>(),
    };
    DOCS.iter().all(|d| {
        let mut strings = Strings::default();
        let mut subs = Vec::new();
        let mut args = c_args(d.args, &mut strings, &mut subs);
        let mut specs: Vec<CKeySpec> = Vec::new();
        if let Some(flags) = d.key {
            let mut k: CKeySpec = unsafe { std::mem::zeroed() };
            k.flags = flags as u64;
            k.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            k.bs.index.pos = 1;
            k.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            k.fk.range.lastkey = 0;
            k.fk.range.keystep = 1;
            k.fk.range.limit = 0;
            specs.push(k);
            specs.push(unsafe { std::mem::zeroed() });
        }
        let info = raw::RedisModuleCommandInfo {
            version: &version,
            summary: d.summary.as_ptr(),
            complexity: d.complexity.as_ptr(),
            since: c"0.1.0".as_ptr(),
            history: std::ptr::null_mut(),
            tips: std::ptr::null(),
            arity: d.arity,
            key_specs: if specs.is_empty() { std::ptr::null_mut() } else { specs.as_mut_ptr() },
            args: args.as_mut_ptr(),
        };
        unsafe {
            let cmd = get(ctx, d.name.as_ptr());
            !cmd.is_null() && set(cmd, &info) == raw::REDISMODULE_OK as c_int
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_documented_once() {
        let mut names: Vec<&CStr> = DOCS.iter().map(|d| d.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 11);
        assert!(DOCS.iter().all(|d| d.args.first().is_some()));
    }
}
