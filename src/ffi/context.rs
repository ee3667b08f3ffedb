//! The context Redis passes to every command and callback, and what can be asked of it:
//! the clock, the selected database, the context flags, logging, key signals and
//! keyspace notifications.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::raw::{self, RedisModuleCtx};

use super::RStr;

/// A Redis module context (see the module doc of `ffi` for why its use is sound).
#[derive(Clone, Copy, Debug)]
pub struct Ctx(*mut RedisModuleCtx);

/// The test clock's time, when it is set (model tests only: see `runtime::settings`).
static TEST_NOW: AtomicI64 = AtomicI64::new(i64::MIN);

/// The module's clock in Unix ms: the server clock, or the test clock once set.
pub fn now_ms() -> i64 {
    match TEST_NOW.load(Ordering::Relaxed) {
        i64::MIN => {
            // SAFETY: a plain clock read.
            unsafe { rm!(RedisModule_Milliseconds)() }
        }
        t => t,
    }
}

/// Sets the test clock (it then stands still until set again).
pub fn set_test_now(ms: i64) {
    TEST_NOW.store(ms, Ordering::Relaxed);
}

/// While clients are paused (CLIENT PAUSE WRITE, FAILOVER) the dataset must not change:
/// Redis asserts it when it propagates.
pub fn writes_paused() -> bool {
    // SAFETY: reads a server flag.
    unsafe { rm!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

impl Ctx {
    /// # Safety
    /// `p` is the context Redis passed to the running callback (or a detached one), valid
    /// while the callback runs.
    pub(super) unsafe fn new(p: *mut RedisModuleCtx) -> Ctx {
        Ctx(p)
    }

    /// The context of the module's load (`redis_module!`'s init).
    pub fn of(context: &redis_module::Context) -> Ctx {
        Ctx(context.ctx)
    }

    pub(super) fn ptr(self) -> *mut RedisModuleCtx {
        self.0
    }

    fn flags(self) -> u32 {
        // SAFETY: a valid context (module doc).
        unsafe { rm!(RedisModule_GetContextFlags)(self.0) as u32 }
    }

    pub fn is_primary(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
    }

    /// Used memory is over `maxmemory` (what makes Redis refuse deny-oom commands).
    pub fn out_of_memory(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_OOM != 0
    }

    pub fn in_cluster(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
    }

    /// The server is loading its RDB or AOF (or a replica its primary's snapshot).
    pub fn loading(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_LOADING != 0
    }

    pub fn aof_on(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_AOF != 0
    }

    /// Whether this call may block (not inside MULTI, a script or a module's RM_Call).
    pub fn may_block(self) -> bool {
        let deny = raw::REDISMODULE_CTX_FLAGS_MULTI | raw::REDISMODULE_CTX_FLAGS_LUA | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
        self.flags() & deny == 0
    }

    /// The id of the client running the command (unique for the server's lifetime, except
    /// for the clients of scripts and module calls, which are shared or pooled).
    pub fn client_id(self) -> u64 {
        // SAFETY: a valid context.
        unsafe { rm!(RedisModule_GetClientId)(self.0) }
    }

    pub fn db(self) -> i32 {
        // SAFETY: a valid context.
        unsafe { rm!(RedisModule_GetSelectedDb)(self.0) }
    }

    /// Selects database `db`; false if it does not exist.
    pub fn select_db(self, db: i32) -> bool {
        // SAFETY: a valid context; an invalid index is refused by Redis.
        unsafe { rm!(RedisModule_SelectDb)(self.0, db) == super::OK }
    }

    pub fn log_warning(self, msg: &str) {
        let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a valid context and NUL-terminated strings.
        unsafe { rm!(RedisModule_Log)(self.0, c"warning".as_ptr(), c"%s".as_ptr(), c.as_ptr()) };
    }

    /// Tells WATCH and client-side caching that `key` changed (implicit signals are off:
    /// see `no_implicit_signals`).
    pub fn signal_modified(self, key: &RStr) {
        // SAFETY: a valid context and a live key name.
        unsafe { rm!(RedisModule_SignalModifiedKey)(self.0, key.ptr()) };
    }

    /// Stops Redis from marking every key opened for writing as modified when it is
    /// closed: the module signals only the keys it changed (a command that changes
    /// nothing leaves WATCH alone).
    pub fn no_implicit_signals(self) {
        // SAFETY: a valid context at load.
        unsafe { rm!(RedisModule_SetModuleOptions)(self.0, raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as i32) };
    }

    /// Wakes the clients blocked on `key`.
    pub fn signal_ready(self, key: &RStr) {
        // SAFETY: a valid context and a live key name.
        unsafe { rm!(RedisModule_SignalKeyAsReady)(self.0, key.ptr()) };
    }

    /// Publishes a keyspace notification of the module class on `key`.
    pub fn notify(self, event: &CStr, key: &RStr) {
        // SAFETY: a valid context, NUL-terminated event name, live key name.
        unsafe { rm!(RedisModule_NotifyKeyspaceEvent)(self.0, raw::REDISMODULE_NOTIFY_MODULE, event.as_ptr(), key.ptr()) };
    }

    /// Propagates `cmd key args...` to replicas and the AOF.
    pub fn replicate<'a>(self, cmd: &CStr, key: &RStr, args: impl ExactSizeIterator<Item = &'a RStr>) {
        let mut argv = Vec::with_capacity(args.len() + 1);
        argv.push(key.ptr());
        argv.extend(args.map(RStr::ptr));
        // SAFETY: a valid context; argv holds live strings for the duration of the call
        // (`fmt` "v": the arguments in an array).
        unsafe { rm!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len()) };
    }

    /// Counts a change of the dataset (for the save points) when nothing is propagated: no
    /// AOF, no replica and no replication backlog (`effects::needed`), so Redis drops what
    /// RM_ReplicateVerbatim would propagate before looking at it, and only counts the
    /// change. (RM_Replicate of a command sent nowhere counts it too, but looks the command
    /// up by name first: a tenth of an unbatched ACK.)
    pub fn count_change(self) {
        // SAFETY: a valid context.
        unsafe { rm!(RedisModule_ReplicateVerbatim)(self.0) };
    }
}
