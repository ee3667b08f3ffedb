//! Registering commands (RedisModule_CreateCommand) and their metadata for `COMMAND DOCS`
//! / `COMMAND INFO` (Redis >= 7.0: summary, complexity, arity, key spec, arguments). The
//! metadata is skipped where the server lacks the API, so the module still loads there.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw::{self, RedisModuleCommandArg as CArg, RedisModuleCommandKeySpec as CKeySpec, RedisModuleCtx, RedisModuleString};

use super::rstr::Argv;
use super::{Ctx, OK};

/// A command's C entry point.
pub type Entry = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

/// The type of a documented argument.
#[derive(Clone, Copy)]
pub enum Ty {
    Key,
    Str,
    Int,
    Time,
    Token,
    OneOf(&'static [Arg]),
    /// Arguments that come together (a field and its value, say).
    Block(&'static [Arg]),
}

/// A documented argument.
#[derive(Clone, Copy)]
pub struct Arg {
    pub name: &'static str,
    pub ty: Ty,
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
}

pub const fn arg(name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: None, optional: false, multiple: false }
}
pub const fn opt(token: &'static str, name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: Some(token), optional: true, multiple: false }
}
/// A token followed by one or more blocks of arguments (`SET field value [field value …]`).
pub const fn tok_many(token: &'static str, name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: Some(token), optional: false, multiple: true }
}
pub const fn many(name: &'static str) -> Arg {
    Arg { name, ty: Ty::Str, token: None, optional: false, multiple: true }
}
pub const fn tok(token: &'static str, name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty, token: Some(token), optional: false, multiple: false }
}

/// How a command uses its one declared key (the queue, argument 1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyUse {
    /// Keyless (no declared key).
    None,
    /// Reads and writes (insert, delete, update: Redis allows one of them per key spec,
    /// so UPDATE).
    Write,
    /// Writes and returns message data.
    WriteAccess,
    /// Reads and returns data.
    Read,
}

impl KeyUse {
    fn spec_flags(self) -> Option<u64> {
        let write = (raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE) as u64;
        match self {
            KeyUse::None => None,
            KeyUse::Write => Some(write),
            KeyUse::WriteAccess => Some(write | raw::REDISMODULE_CMD_KEY_ACCESS as u64),
            KeyUse::Read => Some((raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS) as u64),
        }
    }

    /// (first key, last key, step) for RedisModule_CreateCommand.
    pub fn range(self) -> (c_int, c_int, c_int) {
        if self == KeyUse::None {
            (0, 0, 0)
        } else {
            (1, 1, 1)
        }
    }
}

/// One command: everything registration and `COMMAND DOCS` need.
pub struct Spec {
    pub name: &'static CStr,
    pub entry: Entry,
    pub flags: &'static CStr,
    pub key: KeyUse,
    /// Redis's arity (negative: at least that many).
    pub arity: c_int,
    /// ACL categories (space-separated) where the server can set them.
    pub acl: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub args: &'static [Arg],
}

/// A command's entry: the context and its arguments after the command name, valid for
/// the call (`Argv` cannot outlive `body`).
pub fn run(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int, body: impl FnOnce(Ctx, Argv<'_>)) -> c_int {
    // SAFETY: Redis passes `argc` live arguments that outlive the command call, which
    // outlives `body`.
    let args = unsafe { Argv::new(argv, argc) }.tail();
    // SAFETY: the context Redis passed to this command.
    body(unsafe { Ctx::new(ctx) }, args);
    OK
}

/// Registers a command; false if Redis refused it.
pub fn create(ctx: Ctx, s: &Spec) -> bool {
    let (first, last, step) = s.key.range();
    // SAFETY: a valid context at load; NUL-terminated static strings.
    unsafe { rm!(RedisModule_CreateCommand)(ctx.ptr(), s.name.as_ptr(), Some(s.entry), s.flags.as_ptr(), first, last, step) == OK }
}

/// Adds an ACL category of the module's (`+@<name>`). None where the server lacks the
/// API (Redis before 7.4), else whether it accepted it.
pub fn add_acl_category(ctx: Ctx, name: &CStr) -> Option<bool> {
    // SAFETY: an optional API pointer; a valid context at load; a NUL-terminated name.
    unsafe { raw::RedisModule_AddACLCategory }.map(|add| unsafe { add(ctx.ptr(), name.as_ptr()) } == OK)
}

/// Sets a registered command's ACL categories (`extra` is appended, e.g. the module's own
/// category). None where the server lacks the API (Redis before 7.2), else whether it
/// accepted them.
pub fn set_acl_categories(ctx: Ctx, s: &Spec, extra: &str) -> Option<bool> {
    // SAFETY: optional API pointers; the command was registered by this module.
    let (get, set) = (unsafe { raw::RedisModule_GetCommand }?, unsafe { raw::RedisModule_SetCommandACLCategories }?);
    let categories = CString::new(format!("{} {extra}", s.acl.to_string_lossy()).trim()).unwrap_or_default();
    // SAFETY: as above; the string lives across the call (Redis parses it there).
    unsafe {
        let cmd = get(ctx.ptr(), s.name.as_ptr());
        Some(!cmd.is_null() && set(cmd, categories.as_ptr()) == OK)
    }
}

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
            // SAFETY: a plain C struct for which all-zero is the documented "unset".
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
                Ty::OneOf(inner) | Ty::Block(inner) => {
                    let mut v = c_args(inner, strings, subs);
                    c.subargs = v.as_mut_ptr();
                    subs.push(v);
                    if matches!(a.ty, Ty::Block(_)) {
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK
                    } else {
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF
                    }
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
    // SAFETY: the all-zero terminator the API expects.
    out.push(unsafe { std::mem::zeroed() });
    out
}

/// Sets a registered command's metadata. True where the server has no metadata API
/// (before 7.0); false if it refused.
pub fn set_info(ctx: Ctx, s: &Spec) -> bool {
    // SAFETY: reading optional API pointers.
    let (Some(get), Some(set)) = (unsafe { raw::RedisModule_GetCommand }, unsafe { raw::RedisModule_SetCommandInfo }) else {
        return true;
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<CKeySpec>(),
        sizeof_arg: std::mem::size_of::<CArg>(),
    };
    let mut strings = Strings::default();
    let mut subs = Vec::new();
    let mut args = c_args(s.args, &mut strings, &mut subs);
    let mut specs: Vec<CKeySpec> = Vec::new();
    if let Some(flags) = s.key.spec_flags() {
        // SAFETY: all-zero is "unset" for this C struct.
        let mut k: CKeySpec = unsafe { std::mem::zeroed() };
        k.flags = flags;
        k.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        k.bs.index.pos = 1;
        k.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        k.fk.range.lastkey = 0;
        k.fk.range.keystep = 1;
        k.fk.range.limit = 0;
        specs.push(k);
        // SAFETY: the all-zero terminator.
        specs.push(unsafe { std::mem::zeroed() });
    }
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: s.summary.as_ptr(),
        complexity: s.complexity.as_ptr(),
        since: c"0.1.0".as_ptr(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: s.arity,
        key_specs: if specs.is_empty() { std::ptr::null_mut() } else { specs.as_mut_ptr() },
        args: args.as_mut_ptr(),
    };
    // SAFETY: the command was registered by this module; every pointer in `info` lives
    // until this returns (Redis copies what it keeps).
    unsafe {
        let cmd = get(ctx.ptr(), s.name.as_ptr());
        !cmd.is_null() && set(cmd, &info) == OK
    }
}
