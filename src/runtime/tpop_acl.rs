//! Key permissions for RMQ.TPOP, which is keyless (Redis checks only declared keys): the
//! caller needs read and write access to every queue key of the topic. A verdict is kept
//! per user, topic and slot count until an ACL command (or an EXEC, which may hold one)
//! runs, so a TPOP loop pays the per-key checks once; and per client, so a client's next
//! TPOP of the topic does not even ask for its user's name. And while every ACL user may
//! read and write every key (the default: no ACL rules), no verdict is needed at all.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use crate::core::acl_list;
use crate::core::error::{Result, RmqError};
use crate::core::fnv::FnvMap;
use crate::core::route::queue_name_into;
use crate::ffi::call::call;
use crate::ffi::user_acl::User;
use crate::ffi::{Ctx, RStr};

/// Bumped whenever ACL rules may have changed.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Bumped whenever ACL rules or the user of a client may have changed.
static CLIENT_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Whether every ACL user may read and write every key (bit 0) as of a generation (the
/// bits above); `UNKNOWN` before the first look.
static ALL_KEYS: AtomicU64 = AtomicU64::new(UNKNOWN);
const UNKNOWN: u64 = u64::MAX;

type Verdicts = HashMap<Asked, (u64, bool)>;
static VERDICTS: LazyLock<Mutex<Verdicts>> = LazyLock::new(Mutex::default);
const MAX_VERDICTS: usize = 10_000;

/// A command that may change ACL rules, or the user of the client that sends it (AUTH,
/// HELLO … AUTH, RESET), is about to run (the command filter's first look at the name lets
/// these through).
pub fn rules_may_change(command: &[u8]) {
    let (rules, user) = match command.len() {
        3 => (command.eq_ignore_ascii_case(b"acl"), false),
        4 => (command.eq_ignore_ascii_case(b"exec"), command.eq_ignore_ascii_case(b"auth")),
        5 => (false, command.eq_ignore_ascii_case(b"hello") || command.eq_ignore_ascii_case(b"reset")),
        _ => (false, false),
    };
    if rules {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
    if rules || user {
        CLIENT_GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// A verdict's key: user name, topic, slot count.
type Asked = (Vec<u8>, Vec<u8>, u32);

/// A client's last verdict: client generation, topic, slot count, verdict.
type ClientVerdict = (u64, Vec<u8>, u32, bool);

/// `-NOPERM` unless the current user may read and write every queue of the topic.
pub fn check_topic(ctx: Ctx, topic: &[u8], slots: u32) -> Result<()> {
    let generation = GENERATION.load(Ordering::Relaxed);
    if all_keys(ctx, generation) {
        return Ok(());
    }
    let client_generation = CLIENT_GENERATION.load(Ordering::Relaxed);
    // A client's id stands for its user while the client generation holds: a connection
    // changes user only by AUTH, HELLO or RESET (which bump it) and its id is never
    // reused. Not so for a script's client (shared by every caller), a module call's
    // (pooled) or a transaction (an AUTH inside runs after the EXEC that bumped it): those
    // ask by name.
    let client = ctx.may_block().then(|| ctx.client_id());
    thread_local!(static CLIENTS: RefCell<FnvMap<u64, ClientVerdict>> = RefCell::default());
    let kept = client.and_then(|id| {
        CLIENTS.with_borrow(|clients| {
            clients.get(&id).filter(|(g, t, s, _)| *g == client_generation && t == topic && *s == slots).map(|v| v.3)
        })
    });
    let allowed = match kept {
        Some(ok) => ok,
        None => {
            let Some(name) = User::current_name(ctx) else { return Ok(()) };
            let ok = verdict(&name, &(name.as_ref().to_vec(), topic.to_vec(), slots), generation);
            if let Some(id) = client {
                CLIENTS.with_borrow_mut(|clients| {
                    if clients.len() >= MAX_VERDICTS {
                        clients.clear();
                    }
                    clients.insert(id, (client_generation, topic.to_vec(), slots, ok));
                });
            }
            ok
        }
    };
    if allowed {
        return Ok(());
    }
    let name = User::current_name(ctx).map_or_else(Vec::new, |n| n.as_ref().to_vec());
    Err(RmqError::NoPerm(String::from_utf8_lossy(&name).into_owned()))
}

/// Whether every ACL user may read and write every key: ACL LIST, read again after the
/// rules may have changed. (A module's own users are not listed; the name check does not
/// find them either, and lets them through.)
fn all_keys(ctx: Ctx, generation: u64) -> bool {
    let known = ALL_KEYS.load(Ordering::Relaxed);
    if known != UNKNOWN && known >> 1 == generation {
        return known & 1 != 0;
    }
    let all = call(ctx, c"ACL", &[&RStr::from_bytes(b"LIST")]).is_some_and(|users| {
        let mut i = 0;
        while let Some(line) = users.element(i) {
            if !acl_list::all_keys(&line) {
                return false;
            }
            i += 1;
        }
        // Not an array of users (an error): no conclusion.
        i > 0
    });
    ALL_KEYS.store(generation << 1 | all as u64, Ordering::Relaxed);
    all
}

/// The kept verdict, else the per-key checks (then kept).
fn verdict(name: &RStr, key: &Asked, generation: u64) -> bool {
    let known = VERDICTS.lock().unwrap_or_else(|e| e.into_inner()).get(key).filter(|(g, _)| *g == generation).map(|(_, ok)| *ok);
    known.unwrap_or_else(|| {
        let (_, topic, slots) = key;
        // A user gone since the name was read (or not found) is no verdict against.
        // One buffer for every queue's name: a topic may have thousands.
        let mut q = Vec::new();
        let ok = User::named(name).is_none_or(|user| {
            (0..*slots).all(|i| {
                queue_name_into(topic, i, &mut q);
                user.may_read_write(&RStr::from_bytes(&q))
            })
        });
        let mut verdicts = VERDICTS.lock().unwrap_or_else(|e| e.into_inner());
        if verdicts.len() >= MAX_VERDICTS {
            verdicts.clear();
        }
        verdicts.insert(key.clone(), (generation, ok));
        ok
    })
}
