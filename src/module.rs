//! Module registration: settings, commands, the INFO section.

use std::ffi::{c_int, CStr};
use std::sync::atomic::Ordering;

use redis_module::configuration::{register_i64_configuration, ConfigurationFlags};
use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};
use redis_module::{redis_module, Context, RedisString, Status};

use crate::commands::{self, Call};
use crate::error::Result;
use crate::rstr::rm;
use crate::settings;
use crate::stats;

#[cfg(not(test))]
use redis_module::alloc::RedisAlloc as ModuleAlloc;
// Outside Redis (unit tests) the Redis allocator does not exist.
#[cfg(test)]
use std::alloc::System as ModuleAlloc;

type Body = fn(&Call) -> Result<()>;

/// Defines one `extern "C"` entry point per command, each running its body through
/// `commands::run` (arguments, catch_unwind, error replies).
macro_rules! entries {
    ($($entry:ident => $body:path),* $(,)?) => {
        $(extern "C" fn $entry(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int) -> c_int {
            commands::run(ctx, argv, argc, $body as Body)
        })*
    };
}

entries! {
    cmd_push => commands::push,
    cmd_pop => commands::pop,
    cmd_ack => commands::ack,
    cmd_nack => commands::nack,
    cmd_sweep => commands::sweep,
    cmd_extend => commands::extend,
    cmd_cancel => commands::cancel,
    cmd_replay => commands::replay,
    cmd_info => commands::info,
    cmd_pending => commands::pending,
    cmd_route => commands::route,
}

type Entry = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

/// (name, entry, flags, first key, last key, key step). Every queue command declares its
/// queue as its only key; ROUTE is keyless.
const COMMANDS: [(&CStr, Entry, &CStr, c_int, c_int, c_int); 11] = [
    (c"rmq.push", cmd_push, c"write deny-oom", 1, 1, 1),
    (c"rmq.pop", cmd_pop, c"write blocking", 1, 1, 1),
    (c"rmq.ack", cmd_ack, c"write fast", 1, 1, 1),
    (c"rmq.nack", cmd_nack, c"write fast", 1, 1, 1),
    (c"rmq.sweep", cmd_sweep, c"write", 1, 1, 1),
    (c"rmq.extend", cmd_extend, c"write fast", 1, 1, 1),
    (c"rmq.cancel", cmd_cancel, c"write", 1, 1, 1),
    (c"rmq.replay", cmd_replay, c"write deny-oom", 1, 1, 1),
    (c"rmq.info", cmd_info, c"readonly fast", 1, 1, 1),
    (c"rmq.pending", cmd_pending, c"readonly", 1, 1, 1),
    (c"rmq.route", cmd_route, c"readonly fast", 0, 0, 0),
];

extern "C" fn info_section(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    unsafe {
        rm!(RedisModule_InfoAddSection)(ctx, c"".as_ptr());
        for (name, v) in stats::fields() {
            let name = std::ffi::CString::new(name).unwrap_or_default();
            rm!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), v);
        }
        // 1 when maxmemory-policy may evict queue keys (see the log's warning).
        rm!(RedisModule_InfoAddFieldULongLong)(ctx, c"eviction_risk".as_ptr(), crate::eviction::at_risk() as u64);
    }
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let raw_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let values = match settings::parse_module_args(&raw_args) {
        Ok(v) => v,
        Err(reason) => {
            ctx.log_warning(&format!("refusing to load: {reason}"));
            return Status::Err;
        }
    };
    for s in &settings::SETTINGS {
        register_i64_configuration(ctx, s.name, s.var, s.default, s.min, s.max, ConfigurationFlags::DEFAULT, None);
    }
    // Applies `rmq.*` lines of the config file, then the module arguments win.
    if let Some(load) = unsafe { raw::RedisModule_LoadConfigs } {
        if unsafe { load(ctx.ctx) } != raw::REDISMODULE_OK as c_int {
            ctx.log_warning("refusing to load: invalid rmq.* setting in the config file");
            return Status::Err;
        }
    }
    for (s, v) in values {
        s.var.store(v, Ordering::Relaxed);
    }
    for (name, entry, flags, first, last, step) in COMMANDS {
        let ok = unsafe { rm!(RedisModule_CreateCommand)(ctx.ctx, name.as_ptr(), Some(entry), flags.as_ptr(), first, last, step) };
        if ok != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!("could not register {}", name.to_string_lossy()));
            return Status::Err;
        }
    }
    if !crate::docs::register(ctx.ctx) {
        ctx.log_warning("could not set command metadata (COMMAND DOCS)");
        return Status::Err;
    }
    unsafe { rm!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_section)) };
    if !crate::timers::subscribe(ctx.ctx) {
        ctx.log_warning("could not subscribe to loading and role-change events");
        return Status::Err;
    }
    if !crate::replication::register_filter(ctx.ctx) {
        // Without seeing replicas attach, always send effects.
        crate::replication::replicas_from_now();
    }
    crate::eviction::watch(ctx.ctx);
    // Loaded at runtime (MODULE LOAD) over existing data: find its leases now.
    crate::timers::rescan(ctx.ctx);
    Status::Ok
}

redis_module! {
    name: "rmq",
    version: 1,
    allocator: (ModuleAlloc, ModuleAlloc),
    data_types: [],
    init: init,
}
