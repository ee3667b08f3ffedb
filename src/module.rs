//! Loading the module: settings, the command table, the INFO section, timers and hooks.

use std::sync::atomic::Ordering;

use redis_module::configuration::{register_i64_configuration, ConfigurationFlags};
use redis_module::{redis_module, Context, RedisString, Status};

use crate::cmd::table::{COMMANDS, TEST_COMMANDS};
use crate::ffi::command;
use crate::ffi::server_callbacks::{self, InfoSection};
use crate::ffi::Ctx;
use crate::runtime::{derived, eviction, server_events, settings, stats, timers};

#[cfg(not(any(test, fuzzing)))]
use redis_module::alloc::RedisAlloc as ModuleAlloc;
// Outside Redis (unit tests, fuzz targets) the Redis allocator does not exist.
#[cfg(any(test, fuzzing))]
use std::alloc::System as ModuleAlloc;

fn info_section(s: &InfoSection) {
    for (name, v) in stats::fields() {
        s.field(name, v);
    }
    // 1 when maxmemory-policy may evict queue keys (see the log's warning).
    s.field("eviction_risk", eviction::at_risk() as u64);
}

fn init(context: &Context, args: &[RedisString]) -> Status {
    let ctx = Ctx::of(context);
    let raw_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let values = match settings::parse_module_args(&raw_args) {
        Ok(v) => v,
        Err(reason) => {
            ctx.log_warning(&format!("refusing to load: {reason}"));
            return Status::Err;
        }
    };
    for s in settings::SETTINGS.iter().filter(|s| s.config) {
        register_i64_configuration(context, s.name, s.var, s.default, s.min, s.max, ConfigurationFlags::DEFAULT, None);
    }
    // Applies `rmq.*` lines of the config file, then the module arguments win.
    if server_callbacks::load_configs(ctx) == Some(false) {
        ctx.log_warning("refusing to load: invalid rmq.* setting in the config file");
        return Status::Err;
    }
    for (s, v) in values {
        s.var.store(v, Ordering::Relaxed);
    }
    ctx.no_implicit_signals();
    let test = if settings::test_clock() { TEST_COMMANDS } else { &[] };
    for spec in COMMANDS.iter().chain(test) {
        if !command::create(ctx, spec) {
            ctx.log_warning(&format!("could not register {}", spec.name.to_string_lossy()));
            return Status::Err;
        }
    }
    if !COMMANDS.iter().chain(test).all(|spec| command::set_info(ctx, spec)) {
        ctx.log_warning("could not set command metadata (COMMAND DOCS)");
        return Status::Err;
    }
    // ACL categories where the server has the API (Redis >= 7.2, Valkey), and the
    // module's own @rmq where it can add one (Redis >= 7.4, Valkey). On Redis 7.0 module
    // commands have none: README shows the command rules that do the same.
    let own = if command::add_acl_category(ctx, c"rmq") == Some(true) { "rmq" } else { "" };
    if COMMANDS.iter().chain(test).any(|spec| command::set_acl_categories(ctx, spec, own) == Some(false)) {
        ctx.log_warning("could not set the commands' ACL categories");
        return Status::Err;
    }
    if settings::test_clock() {
        ctx.log_warning("test-clock 1: the module's clock is set by RMQ.TESTCLOCK (for model tests; never in production)");
    }
    server_callbacks::register_info(ctx, info_section);
    timers::init(ctx);
    if !server_events::subscribe(ctx) {
        ctx.log_warning("could not subscribe to server, config and keyspace events");
        return Status::Err;
    }
    // Checked again at every CONFIG SET of the policy (`runtime::server_events`).
    eviction::check(ctx);
    // Loaded at runtime (MODULE LOAD) over existing data: find its queues now.
    derived::rescan(ctx, derived::Rescan::All);
    Status::Ok
}

redis_module! {
    name: "rmq",
    version: 1,
    allocator: (ModuleAlloc, ModuleAlloc),
    data_types: [],
    init: init,
}
