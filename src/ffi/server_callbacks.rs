//! Where Redis calls in besides commands and timers: server events, keyspace events, the
//! command filter, the INFO section; and the reads that go with them (a keyspace scan,
//! INFO fields, config). Each C callback is a trampoline into a plain Rust `fn`, run
//! through the panic guard.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::guard::guard;
use super::key::{type_of, KeyType};
use super::rstr::bytes;
use super::{Ctx, OK};

/// A server event handler: the context and the sub-event.
pub type EventFn = fn(Ctx, u64);

/// Server events the module follows.
#[derive(Clone, Copy, Debug)]
pub enum ServerEvent {
    Loading,
    RoleChanged,
    SwapDb,
    /// FLUSHDB / FLUSHALL (after it).
    Flushed,
}

/// Sub-events handlers look at.
pub const LOADING_ENDED: u64 = raw::REDISMODULE_SUBEVENT_LOADING_ENDED;
pub const NOW_PRIMARY: u64 = raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER;
pub const FLUSH_ENDED: u64 = raw::REDISMODULE_SUBEVENT_FLUSHDB_END;

macro_rules! event_slots {
    ($($slot:ident, $tramp:ident;)*) => {
        $(
            static $slot: OnceLock<EventFn> = OnceLock::new();
            extern "C" fn $tramp(ctx: *mut RedisModuleCtx, _e: raw::RedisModuleEvent, sub: u64, _d: *mut c_void) {
                if let Some(f) = $slot.get() {
                    // SAFETY: the context Redis passed to this event callback.
                    guard((), || f(unsafe { Ctx::new(ctx) }, sub));
                }
            }
        )*
    };
}

event_slots! {
    LOADING, on_loading;
    ROLE, on_role;
    SWAPDB, on_swapdb;
    FLUSHED, on_flushed;
}

/// Calls `f` on every `event`; false if Redis refused the subscription.
pub fn subscribe(ctx: Ctx, event: ServerEvent, f: EventFn) -> bool {
    type Tramp = extern "C" fn(*mut RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);
    let (id, slot, tramp): (u64, &OnceLock<EventFn>, Tramp) = match event {
        ServerEvent::Loading => (raw::REDISMODULE_EVENT_LOADING, &LOADING, on_loading),
        ServerEvent::RoleChanged => (raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED, &ROLE, on_role),
        ServerEvent::SwapDb => (raw::REDISMODULE_EVENT_SWAPDB, &SWAPDB, on_swapdb),
        ServerEvent::Flushed => (raw::REDISMODULE_EVENT_FLUSHDB, &FLUSHED, on_flushed),
    };
    let _ = slot.set(f);
    // SAFETY: a valid context at load; the trampoline ignores the event data.
    unsafe { rm!(RedisModule_SubscribeToServerEvent)(ctx.ptr(), raw::RedisModuleEvent { id, dataver: 1 }, Some(tramp)) == OK }
}

/// A config change handler: the names of the changed settings.
pub type ConfigFn = fn(Ctx, &[&[u8]]);
static CONFIG: OnceLock<ConfigFn> = OnceLock::new();

extern "C" fn on_config(ctx: *mut RedisModuleCtx, _e: raw::RedisModuleEvent, _sub: u64, data: *mut c_void) {
    let Some(f) = CONFIG.get() else { return };
    guard((), || {
        // SAFETY: for the config event the data is a RedisModuleConfigChangeV1 whose
        // `num_changes` names are NUL-terminated strings, live during the callback.
        let names: Vec<&[u8]> = unsafe {
            let change = &*(data as *const raw::RedisModuleConfigChangeV1);
            std::slice::from_raw_parts(change.config_names, change.num_changes as usize)
                .iter()
                .map(|n| CStr::from_ptr(*n).to_bytes())
                .collect()
        };
        // SAFETY: the context Redis passed to this event callback.
        f(unsafe { Ctx::new(ctx) }, &names)
    });
}

/// Calls `f` after every CONFIG SET.
pub fn subscribe_config(ctx: Ctx, f: ConfigFn) -> bool {
    let _ = CONFIG.set(f);
    let e = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_CONFIG, dataver: 1 };
    // SAFETY: a valid context at load.
    unsafe { rm!(RedisModule_SubscribeToServerEvent)(ctx.ptr(), e, Some(on_config)) == OK }
}

/// A keyspace event's name (`del`, `zadd`, `rename_to` ...), read only as far as asked:
/// measuring it costs a sorted-set write on the server ~40 instructions.
pub struct EventName(*const c_char);

impl EventName {
    /// Whether it is a sorted-set event (their names start with `z`).
    pub fn is_zset(&self) -> bool {
        // SAFETY: a NUL-terminated name (checked non-null), live during the callback: its
        // first byte is readable.
        unsafe { *self.0 == b'z' as c_char }
    }

    /// Whether it is MOVE's (`move_from`, `move_to`: the only names starting with `m`).
    pub fn is_move(&self) -> bool {
        // SAFETY: as in `is_zset`.
        unsafe { *self.0 == b'm' as c_char }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(self.0) }.to_bytes()
    }
}

/// A keyspace event handler: the event and the key's name (bytes only: most events are on
/// keys that are no queue's, and the name settles that before anything is made).
pub type KeyEventFn = fn(Ctx, &EventName, &[u8]);
static KEY_EVENTS: OnceLock<KeyEventFn> = OnceLock::new();

/// The database MOVE's `move_from` came from, for its `move_to` (-1: none pending).
static MOVE_SOURCE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_key_event(ctx: *mut RedisModuleCtx, _type: c_int, event: *const c_char, key: *mut RedisModuleString) -> c_int {
    if event.is_null() || key.is_null() {
        return 0;
    }
    if let Some(f) = KEY_EVENTS.get() {
        // SAFETY: Redis passes a key name live during the call.
        let key = unsafe { bytes(key) };
        // SAFETY: the context Redis passed to this notification callback.
        let (ctx, event) = (unsafe { Ctx::new(ctx) }, EventName(event));
        let moving = event.is_move();
        if moving && event.bytes() == b"move_from" {
            MOVE_SOURCE.store(ctx.db(), Ordering::Relaxed);
        }
        guard((), || f(ctx, &event, key));
        // Valkey 8.1 (valkey#1819, until valkey#4024) calls this on the client running the
        // command, having selected the event's database on it, and never selects back:
        // after MOVE the user's connection would be left on the destination database.
        // MOVE's `move_from` (on the source database) comes first, so go back there.
        // Elsewhere the context's client is a temporary one (or the server restores it).
        if moving && event.bytes() == b"move_to" {
            let source = MOVE_SOURCE.swap(-1, Ordering::Relaxed);
            if source >= 0 {
                ctx.select_db(source);
            }
        }
    }
    0
}

/// Calls `f` on every generic keyspace event (RENAME, MOVE, COPY, RESTORE, DEL ...), every
/// sorted-set event (ZADD, ZREM, ZUNIONSTORE ...: their names start with `z`), and every
/// key's expiry and eviction. Not key creations (`new`), nor string, list, hash or set
/// writes: Redis dispatches each subscribed event to the module, so those would tax every
/// write on the server (`docs/EVENTS.md`).
pub fn subscribe_key_events(ctx: Ctx, f: KeyEventFn) -> bool {
    let _ = KEY_EVENTS.set(f);
    // SAFETY: a valid context at load.
    unsafe {
        rm!(RedisModule_SubscribeToKeyspaceEvents)(
            ctx.ptr(),
            raw::REDISMODULE_NOTIFY_GENERIC
                | raw::REDISMODULE_NOTIFY_ZSET
                | raw::REDISMODULE_NOTIFY_EXPIRED
                | raw::REDISMODULE_NOTIFY_EVICTED,
            Some(on_key_event),
        ) == OK
    }
}

/// A command as the command filter sees it, before it runs.
pub struct Filtered(*mut raw::RedisModuleCommandFilterCtx);

impl Filtered {
    /// Argument `i` (0: the command's name), if it has one (Redis checks the position).
    pub fn arg(&self, i: c_int) -> Option<&[u8]> {
        // SAFETY: a valid filter context during the call; an argument's string lives as
        // long as it.
        unsafe {
            let s = rm!(RedisModule_CommandFilterArgGet)(self.0, i);
            (!s.is_null()).then(|| bytes(s))
        }
    }
}

/// A command filter: sees each command before it runs (not the module's own RM_Calls: the
/// filter may take locks held around them).
pub type FilterFn = fn(&Filtered);
static FILTER: OnceLock<FilterFn> = OnceLock::new();

extern "C" fn on_filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    let Some(f) = FILTER.get() else { return };
    guard((), || f(&Filtered(fctx)));
}

pub fn register_filter(ctx: Ctx, f: FilterFn) -> bool {
    let _ = FILTER.set(f);
    // SAFETY: a valid context at load.
    let flags = raw::REDISMODULE_CMDFILTER_NOSELF as i32;
    !unsafe { rm!(RedisModule_RegisterCommandFilter)(ctx.ptr(), Some(on_filter), flags) }.is_null()
}

/// The INFO section's writer.
pub struct InfoSection(*mut raw::RedisModuleInfoCtx);

impl InfoSection {
    pub fn field(&self, name: &str, v: u64) {
        let name = CString::new(name).unwrap_or_default();
        // SAFETY: a valid info context inside the callback.
        unsafe { rm!(RedisModule_InfoAddFieldULongLong)(self.0, name.as_ptr(), v) };
    }
}

pub type InfoFn = fn(&InfoSection);
static INFO: OnceLock<InfoFn> = OnceLock::new();

extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let Some(f) = INFO.get() else { return };
    guard((), || {
        // SAFETY: a valid info context; "" names the module's own section.
        unsafe { rm!(RedisModule_InfoAddSection)(ctx, c"".as_ptr()) };
        f(&InfoSection(ctx))
    });
}

pub fn register_info(ctx: Ctx, f: InfoFn) -> bool {
    let _ = INFO.set(f);
    // SAFETY: a valid context at load.
    unsafe { rm!(RedisModule_RegisterInfoFunc)(ctx.ptr(), Some(on_info)) == OK }
}

type KeyVisitor<'a> = &'a mut dyn FnMut(&[u8], KeyType);

extern "C" fn visit_key(_ctx: *mut RedisModuleCtx, name: *mut RedisModuleString, key: *mut raw::RedisModuleKey, visit: *mut c_void) {
    // SAFETY: `visit` points to the visitor passed by `scan_keys`, alive during the scan;
    // the key name and handle are live during the call.
    let (visit, name) = unsafe { (&mut *(visit as *mut KeyVisitor), bytes(name)) };
    guard((), || visit(name, type_of(key)));
}

/// Calls `visit` with the name and type of every key of the selected database.
pub fn scan_keys(ctx: Ctx, mut visit: KeyVisitor) {
    let visit: *mut KeyVisitor = &mut visit;
    // SAFETY: a valid context; the cursor is destroyed here.
    unsafe {
        let cursor = rm!(RedisModule_ScanCursorCreate)();
        while rm!(RedisModule_Scan)(ctx.ptr(), cursor, Some(visit_key), visit.cast()) != 0 {}
        rm!(RedisModule_ScanCursorDestroy)(cursor);
    }
}

/// An `INFO <section>` read, freed on drop.
pub struct ServerInfo(Ctx, *mut raw::RedisModuleServerInfoData);

impl ServerInfo {
    pub fn get(ctx: Ctx, section: &CStr) -> Option<ServerInfo> {
        // SAFETY: a valid context.
        let p = unsafe { rm!(RedisModule_GetServerInfo)(ctx.ptr(), section.as_ptr()) };
        (!p.is_null()).then_some(ServerInfo(ctx, p))
    }

    pub fn text(&self, field: &CStr) -> Option<Vec<u8>> {
        // SAFETY: a live info object; the returned C string lives as long as it.
        unsafe {
            let v = rm!(RedisModule_ServerInfoGetFieldC)(self.1, field.as_ptr());
            (!v.is_null()).then(|| CStr::from_ptr(v).to_bytes().to_vec())
        }
    }

    pub fn int(&self, field: &CStr) -> Option<i64> {
        let mut err = 0;
        // SAFETY: a live info object.
        let v = unsafe { rm!(RedisModule_ServerInfoGetFieldSigned)(self.1, field.as_ptr(), &mut err) };
        (err == 0).then_some(v)
    }
}

impl Drop for ServerInfo {
    fn drop(&mut self) {
        // SAFETY: obtained by `get`, freed once.
        unsafe { rm!(RedisModule_FreeServerInfo)(self.0.ptr(), self.1) };
    }
}

/// Applies the `rmq.*` lines of the config file; None where the server lacks the API.
pub fn load_configs(ctx: Ctx) -> Option<bool> {
    // SAFETY: reading an optional API pointer; a valid context at load.
    unsafe { raw::RedisModule_LoadConfigs }.map(|load| unsafe { load(ctx.ptr()) } == OK)
}
