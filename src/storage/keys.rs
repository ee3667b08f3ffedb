//! The names of a queue's keys: `Q` and `prepare{Q}`, `dead{Q}`, `meta{Q}`, `park{Q}`,
//! `parkidx{Q}`, `hold{Q}`, `sched{Q}`, all tagged `{Q}` so a queue lives in one cluster
//! hash slot.

use std::sync::{LazyLock, Mutex};

use crate::core::fnv::FnvMap;
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
    /// Waiting messages held back by their group, scored as in `Q`.
    Park = 4,
    /// The group index (parked messages and groups' heads): score a hash of the group,
    /// member the order key and the message.
    ParkIndex = 5,
    /// Priority messages held back by a retry delay, scored by its end.
    Hold = 6,
}

pub const KEYS: usize = 7;

/// The tagged keys' prefixes, in `KeyId` order from `Prepare` on.
const PREFIXES: [&[u8]; KEYS - 1] = [b"prepare", b"dead", b"meta", b"park", b"parkidx", b"hold"];

impl KeyId {
    pub fn of(set: Set) -> KeyId {
        match set {
            Set::Store => KeyId::Store,
            Set::Prepare => KeyId::Prepare,
            Set::Dead => KeyId::Dead,
            Set::Park => KeyId::Park,
            Set::Hold => KeyId::Hold,
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

/// The queue and the key of it that a key name is, if it is one of a queue's tagged keys
/// (`Q` itself cannot be told from any other key by its name).
pub fn queue_of(key: &[u8]) -> Option<(&[u8], KeyId)> {
    let open = key.iter().position(|&c| c == b'{')?;
    let q = key[open + 1..].strip_suffix(b"}")?;
    let at = PREFIXES.iter().position(|p| *p == &key[..open])?;
    let id = [KeyId::Prepare, KeyId::Dead, KeyId::Meta, KeyId::Park, KeyId::ParkIndex, KeyId::Hold][at];
    Some((q, id))
}

/// Tagged keys of a queue kept beside those `RedisQueue` opens: its schedules.
const OTHER_PREFIXES: [&[u8]; 1] = [b"sched"];

/// Whether `q` can name a queue: non-empty, without braces.
pub fn is_queue_name(q: &[u8]) -> bool {
    !q.is_empty() && !q.iter().any(|&c| c == b'{' || c == b'}')
}

/// The queue whose tagged key `key` is (any of them, its schedules too).
pub fn owner(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&c| c == b'{')?;
    let q = key[open + 1..].strip_suffix(b"}")?;
    let prefix = &key[..open];
    (is_queue_name(q) && PREFIXES.iter().chain(&OTHER_PREFIXES).any(|p| *p == prefix)).then_some(q)
}

/// The names of every tagged key queue `q` may have (not `Q` itself).
pub fn tagged_names(q: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    PREFIXES.iter().chain(&OTHER_PREFIXES).map(move |p| tagged(p, q))
}

/// Most workloads use a few queues over and over: their derived key names are made once,
/// and with them what is known of their lazy keys.
const NAME_CACHE_SIZE: usize = 4096;
type Derived = [Shared; KEYS - 1];

struct Entry {
    names: Derived,
    /// Bit `d`: `park`, `parkidx` and `hold` are known not to exist in database `d` (0-63).
    /// Set by an open that looked them up and found none; cleared when any of them is
    /// created there (the `new` keyspace event, which every creation sends but a load from
    /// disk, after which the whole cache forgets) — so the bit never says absent wrongly.
    lazy_absent: u64,
}

type Cache = FnvMap<Vec<u8>, Entry>;
static NAMES: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

fn db_bit(db: i32) -> u64 {
    u32::try_from(db).ok().filter(|&d| d < 64).map_or(0, |d| 1 << d)
}

/// The names of a queue's keys, in `KeyId` order, and whether its lazy keys (`park`,
/// `parkidx`, `hold`) are known not to exist in database `db`.
pub fn names(q: &RStr, db: i32) -> ([RStr; KEYS], bool) {
    let b = q.as_ref();
    let mut cache = cache();
    let e = match cache.get(b) {
        Some(e) => e,
        None => {
            if cache.len() >= NAME_CACHE_SIZE {
                cache.clear();
            }
            let names = PREFIXES.map(|p| Shared(RStr::from_bytes(&tagged(p, b))));
            cache.entry(b.to_vec()).or_insert(Entry { names, lazy_absent: 0 })
        }
    };
    let names = std::array::from_fn(|i| if i == 0 { q.clone() } else { e.names[i - 1].0.clone() });
    (names, e.lazy_absent & db_bit(db) != 0)
}

/// An open found none of `q`'s lazy keys in `db`.
pub fn note_lazy_absent(q: &[u8], db: i32) {
    if let Some(e) = cache().get_mut(q) {
        e.lazy_absent |= db_bit(db);
    }
}

/// Key `key` was created in `db`: if it is a queue's lazy key, that queue's lazy keys are
/// no longer known absent there.
pub fn key_created(key: &[u8], db: i32) {
    if let Some((q, KeyId::Park | KeyId::ParkIndex | KeyId::Hold)) = queue_of(key) {
        if let Some(e) = cache().get_mut(q) {
            e.lazy_absent &= !db_bit(db);
        }
    }
}

/// Keys arrived without a `new` event (a load from disk, a SWAPDB): nothing is known absent.
pub fn forget_lazy_absent() {
    for e in cache().values_mut() {
        e.lazy_absent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_keys_name_their_queue() {
        assert_eq!(queue_of(b"prepare{q}"), Some((&b"q"[..], KeyId::Prepare)));
        assert_eq!(queue_of(&tagged(b"prepare", b"a\0b")), Some((&b"a\0b"[..], KeyId::Prepare)));
        for other in [&b"prepare"[..], b"prepare{q", b"xprepare{q}", b"other{q}"] {
            assert_eq!(queue_of(other), None);
        }
        assert_eq!(queue_of(b"parkidx{orders_3}"), Some((&b"orders_3"[..], KeyId::ParkIndex)));
        assert_eq!(queue_of(b"meta{q}"), Some((&b"q"[..], KeyId::Meta)));
        assert_eq!(queue_of(b"q"), None);
        assert_eq!(owner(b"sched{q}"), Some(&b"q"[..]));
        assert_eq!(owner(b"dead{q}"), Some(&b"q"[..]));
        assert_eq!(owner(b"sched{}"), None);
        assert_eq!(owner(b"q"), None);
        assert_eq!(tagged_names(b"q").count(), KEYS);
        for (i, p) in PREFIXES.iter().enumerate() {
            assert_eq!(queue_of(&tagged(p, b"x")).map(|(_, id)| id as usize), Some(i + 1));
        }
    }
}
