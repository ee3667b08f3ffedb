//! The names of a queue's keys: `Q`, `prepare{Q}`, `dead{Q}`, `meta{Q}`, all tagged `{Q}`
//! so a queue lives in one cluster hash slot.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use crate::core::store::Set;
use crate::ffi::rstr::Shared;
use crate::ffi::RStr;

/// A queue's keys, in the order `RedisQueue` keeps them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyId {
    Store = 0,
    Prepare = 1,
    Dead = 2,
    Meta = 3,
}

impl KeyId {
    pub fn of(set: Set) -> KeyId {
        match set {
            Set::Store => KeyId::Store,
            Set::Prepare => KeyId::Prepare,
            Set::Dead => KeyId::Dead,
        }
    }
}

fn tagged(prefix: &[u8], q: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + q.len() + 2);
    v.extend_from_slice(prefix);
    v.push(b'{');
    v.extend_from_slice(q);
    v.push(b'}');
    v
}

const PREPARE: &[u8] = b"prepare";

/// The queue whose leases a key holds, if it is a `prepare{Q}` key.
pub fn lease_queue(key: &[u8]) -> Option<&[u8]> {
    key.strip_prefix(PREPARE).and_then(|r| r.strip_prefix(b"{")).and_then(|r| r.strip_suffix(b"}"))
}

/// Most workloads use a few queues over and over: their derived key names are made once.
const NAME_CACHE_SIZE: usize = 4096;
static NAMES: LazyLock<Mutex<HashMap<Vec<u8>, [Shared; 3]>>> = LazyLock::new(Mutex::default);

/// The names of a queue's keys, in `KeyId` order.
pub fn names(q: &RStr) -> [RStr; 4] {
    let b = q.as_ref();
    let mut cache = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if !cache.contains_key(b) {
        if cache.len() >= NAME_CACHE_SIZE {
            cache.clear();
        }
        let made = [PREPARE, b"dead", b"meta"].map(|p| Shared(RStr::from_bytes(&tagged(p, b))));
        cache.insert(b.to_vec(), made);
    }
    let [p, d, m] = &cache[b];
    [q.clone(), p.0.clone(), d.0.clone(), m.0.clone()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_keys_name_their_queue() {
        assert_eq!(lease_queue(b"prepare{q}"), Some(&b"q"[..]));
        assert_eq!(lease_queue(&tagged(PREPARE, b"a\0b")), Some(&b"a\0b"[..]));
        assert_eq!(lease_queue(b"prepare{}"), Some(&b""[..]));
        for other in [&b"prepare"[..], b"dead{q}", b"prepare{q", b"xprepare{q}"] {
            assert_eq!(lease_queue(other), None);
        }
    }
}
