//! Key permissions for RMQ.TPOP, which is keyless (Redis checks only declared keys): the
//! caller needs read and write access to every queue key of the topic. A verdict is kept
//! per user, topic and slot count until an ACL command (or an EXEC, which may hold one)
//! runs, so a TPOP loop pays the per-key checks once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use crate::core::error::{Result, RmqError};
use crate::core::route::queue_name;
use crate::ffi::acl::User;
use crate::ffi::{Ctx, RStr};

/// Bumped whenever ACL rules may have changed.
static GENERATION: AtomicU64 = AtomicU64::new(0);

type Verdicts = HashMap<Asked, (u64, bool)>;
static VERDICTS: LazyLock<Mutex<Verdicts>> = LazyLock::new(Mutex::default);
const MAX_VERDICTS: usize = 10_000;

/// A command that may change ACL rules is about to run.
pub fn rules_may_change(command: &[u8]) {
    if command.eq_ignore_ascii_case(b"acl") || command.eq_ignore_ascii_case(b"exec") {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// A verdict's key: user name, topic, slot count.
type Asked = (Vec<u8>, Vec<u8>, u32);

/// `-NOPERM` unless the current user may read and write every queue of the topic.
pub fn check_topic(ctx: Ctx, topic: &[u8], slots: u32) -> Result<()> {
    let Some(name) = User::current_name(ctx) else { return Ok(()) };
    let generation = GENERATION.load(Ordering::Relaxed);
    // A TPOP loop asks the same question over and over: the last answer is at hand
    // without building a key for the map.
    thread_local!(static LAST: RefCell<Option<(u64, Asked, bool)>> = const { RefCell::new(None) });
    let same = |(g, (n, t, s), _): &(u64, Asked, bool)| *g == generation && n == name.as_ref() && t == topic && *s == slots;
    let allowed = match LAST.with_borrow(|last| last.as_ref().filter(|l| same(l)).map(|l| l.2)) {
        Some(ok) => ok,
        None => {
            let key = (name.as_ref().to_vec(), topic.to_vec(), slots);
            let ok = verdict(&name, &key, generation);
            LAST.set(Some((generation, key, ok)));
            ok
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(RmqError::NoPerm(String::from_utf8_lossy(name.as_ref()).into_owned()))
    }
}

/// The kept verdict, else the per-key checks (then kept).
fn verdict(name: &RStr, key: &Asked, generation: u64) -> bool {
    let known = VERDICTS.lock().unwrap_or_else(|e| e.into_inner()).get(key).filter(|(g, _)| *g == generation).map(|(_, ok)| *ok);
    known.unwrap_or_else(|| {
        let (_, topic, slots) = key;
        // A user gone since the name was read (or not found) is no verdict against.
        let ok = User::named(name).is_none_or(|user| (0..*slots).all(|i| user.may_read_write(&RStr::from_bytes(&queue_name(topic, i)))));
        let mut verdicts = VERDICTS.lock().unwrap_or_else(|e| e.into_inner());
        if verdicts.len() >= MAX_VERDICTS {
            verdicts.clear();
        }
        verdicts.insert(key.clone(), (generation, ok));
        ok
    })
}
