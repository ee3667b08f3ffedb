//! The name cache: a queue's key names (`core::names` makes them) as Redis strings, and
//! what is known of its keys in each database (lazy keys absent, keys converted, its
//! header) — one of the memos `runtime::derived` lists.

use std::collections::VecDeque;
use std::ops::Index;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, LazyLock, Mutex};

use crate::core::fnv::FnvMap;
use crate::core::kind::Kind;
use crate::core::names::{queue_of, tagged, KeyId, KEYS, PREFIXES};
use crate::core::policy::Policy;
use crate::core::shrink::shrink;
use crate::ffi::rstr::Shared;
use crate::ffi::RStr;

/// What `meta{Q}` says of a queue as a whole (`headers` keeps it, in this cache).
#[derive(Clone, Default)]
pub struct Header {
    pub kind: Option<Kind>,
    /// The kind is in a `kind` field (a queue without a policy; else it is in the policy's).
    pub kind_field: bool,
    pub policy: Option<Policy>,
    /// `meta{Q}` may hold records of waiting copies (`w` fields: a count, a held priority,
    /// a group). False while it is known to hold none (most queues never have any), so a
    /// pop need not look each message's record up.
    pub waiting_records: bool,
    /// `meta{Q}` has an `ids` field: its deliveries may be named (`RMQ.POP ... IDS`), so
    /// ending one reads its record first, to drop its name with it.
    pub named: bool,
    /// How many pinned heads `parkidx{Q}` holds, when known (None: not known, each group
    /// is looked at). Known from the header's read only when `parkidx{Q}` is absent or
    /// empty, then kept by the module's writes to it (`RedisQueue::count_pins`): nothing is
    /// stored, so data written before, or changed without the module, is never taken for
    /// having none. With 0 a pop looks no group's index up for a pin (issue 42).
    pub pins: Option<u64>,
}

/// Most workloads use a few queues over and over: their derived key names are made once,
/// and with them what is known of their lazy keys.
const NAME_CACHE_SIZE: usize = 4096;

/// A queue's tagged key names, and where it was last found in a table of its own
/// (`stats_hint`).
struct Derived {
    names: [Shared; KEYS - 1],
    hint: AtomicUsize,
}

/// Keys a queue opens only when they exist (or are written), one per class: `dead`,
/// `parkidx` (with `park`: the index holds every parked message and the groups' heads, so
/// `park` exists only while it does) and `hold`. Most queues have none of them.
pub const LAZY: [KeyId; 3] = [KeyId::Dead, KeyId::ParkIndex, KeyId::Hold];

/// The class in `LAZY` of a key, if it is a lazy one.
pub fn lazy_class(id: KeyId) -> Option<usize> {
    match id {
        KeyId::Dead => Some(0),
        KeyId::Park | KeyId::ParkIndex => Some(1),
        KeyId::Hold => Some(2),
        _ => None,
    }
}

/// The names of a queue's keys, indexed in `KeyId` order: `Q`, and its tagged keys shared
/// with the name cache (one reference count for all six, not one string reference each).
pub struct KeyNames {
    q: RStr,
    tagged: Arc<Derived>,
}

impl Index<usize> for KeyNames {
    type Output = RStr;
    fn index(&self, i: usize) -> &RStr {
        match i.checked_sub(1) {
            None => &self.q,
            Some(t) => &self.tagged.names[t].0,
        }
    }
}

impl KeyNames {
    /// Where the queue's counters were last found (`queue_stats`, any database): kept with
    /// the names, so a command finds them without hashing the name again.
    pub fn stats_hint(&self) -> &AtomicUsize {
        &self.tagged.hint
    }
}

struct Entry {
    names: Arc<Derived>,
    /// Per class of `LAZY`, bit `d`: its keys are known not to exist in database `d` (0-63).
    /// Set by an open that found none; cleared when one is made there (`created`: by the
    /// module's write, or any sorted-set or generic keyspace event on it, by which every
    /// command that can make a sorted set makes one; a load from disk or a SWAPDB makes
    /// the whole cache forget) — so a bit never says a sorted set absent wrongly.
    absent: [u64; LAZY.len()],
    /// Per key (`KeyId` order; tagged keys only: `Q` cannot be told by its name when
    /// created), bit `d`: made a skiplist or hashtable in database `d` since it was last
    /// created there (`RedisQueue`'s conversions), so it need not be converted again. Cleared
    /// as `absent` is and after a load; a bit wrongly clear
    /// costs a conversion that changes nothing, and one wrongly set only lets a small set
    /// stay a listpack longer (Redis converts it itself past its listpack bounds).
    big: [u64; KEYS],
    /// The queue's header in the database it was last read or written in (`headers`):
    /// found with the names, not in a map of its own (a lookup of the name less a command).
    header: Option<(i32, Header)>,
}

type Cache = FnvMap<Vec<u8>, Entry>;
static NAMES: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

fn db_bit(db: i32) -> u64 {
    u32::try_from(db).ok().filter(|&d| d < 64).map_or(0, |d| 1 << d)
}

/// What the name cache knows of a queue in a database.
pub struct Known {
    /// Per class of `LAZY`: its keys are known not to exist.
    pub absent: [bool; LAZY.len()],
    /// Bit `KeyId`: the key is known to be a skiplist or hashtable already (`note_big`).
    pub big: u8,
    /// Its header, if known (`headers`).
    pub header: Option<Header>,
}

/// The names of a queue's keys, in `KeyId` order, and what is known of them in database
/// `db`.
pub fn names(q: &RStr, db: i32) -> (KeyNames, Known) {
    let b = q.as_ref();
    let mut cache = cache();
    let e = match cache.get(b) {
        Some(e) => e,
        None => {
            if cache.len() >= NAME_CACHE_SIZE {
                cache.clear();
                shrink(&mut *cache);
            }
            let names = Arc::new(Derived { names: PREFIXES.map(|p| Shared(RStr::from_bytes(&tagged(p, b)))), hint: AtomicUsize::new(0) });
            cache.entry(b.to_vec()).or_insert(Entry { names, absent: [0; LAZY.len()], big: [0; KEYS], header: None })
        }
    };
    let names = KeyNames { q: q.clone(), tagged: Arc::clone(&e.names) };
    let bit = db_bit(db);
    let big = e.big.iter().enumerate().fold(0, |m, (i, b)| m | (((b & bit != 0) as u8) << i));
    let header = e.header.as_ref().filter(|(d, _)| *d == db).map(|(_, h)| h.clone());
    (names, Known { absent: e.absent.map(|a| a & bit != 0), big, header })
}

/// How many queues that emptied keep their entry: a queue that is mostly empty (consumers
/// keeping up) is used again soon and should not make its names anew each time, but names
/// used once and emptied must not hold memory (50,000 of them at most this many entries).
const EMPTIED_KEPT: usize = 64;

/// The queues that emptied last, oldest first (`emptied`); a name may appear twice.
static EMPTIED: Mutex<VecDeque<Vec<u8>>> = Mutex::new(VecDeque::new());

/// Queue `q` has no keys left (in the database it was used in): its entry is kept only
/// while it is among the last `EMPTIED_KEPT` queues to empty, then forgotten (made again
/// at its next use, as for a new name).
pub fn emptied(q: &[u8]) {
    let mut last = EMPTIED.lock().unwrap_or_else(|e| e.into_inner());
    if last.back().is_some_and(|b| b.as_slice() == q) {
        return;
    }
    last.push_back(q.to_vec());
    if last.len() > EMPTIED_KEPT {
        if let Some(old) = last.pop_front() {
            // It may have keys again: then it is only made anew at its next use.
            let mut cache = cache();
            if cache.remove(&old).is_some() {
                shrink(&mut *cache);
            }
        }
    }
}

/// Runs `f` on the header slot of queue `q` (`headers`), if the cache has the queue.
pub fn with_header(q: &[u8], f: impl FnOnce(&mut Option<(i32, Header)>)) {
    if let Some(e) = cache().get_mut(q) {
        f(&mut e.header);
    }
}

/// Forgets every queue's header (`headers::forget_all`).
pub fn forget_headers() {
    for e in cache().values_mut() {
        e.header = None;
    }
}

/// Tagged key `id` of queue `q` was made a skiplist or hashtable in `db`.
pub fn note_big(q: &[u8], db: i32, id: KeyId) {
    if id == KeyId::Store {
        return;
    }
    if let Some(e) = cache().get_mut(q) {
        e.big[id as usize] |= db_bit(db);
    }
}

/// An open found none of `q`'s keys of the lazy classes marked in `absent` in `db`.
pub fn note_absent(q: &[u8], db: i32, absent: [bool; LAZY.len()]) {
    if let Some(e) = cache().get_mut(q) {
        for (a, now) in e.absent.iter_mut().zip(absent) {
            if now {
                *a |= db_bit(db);
            }
        }
    }
}

/// Tagged key `id` of queue `q` was made in `db` (by the module, or by another command
/// that may have made it: `written`): it is a new one (not known converted); if a lazy key,
/// that queue's keys of its class are no longer known absent there; if `meta{Q}`, its
/// header is read anew.
pub fn created(q: &[u8], id: KeyId, db: i32) {
    made(q, id, Some(db));
}

/// A command is about to write tagged key `id` of queue `q` in a database not known (seen
/// by the command filter): `created` in every database.
pub fn made_anywhere(q: &[u8], id: KeyId) {
    made(q, id, None);
    // Written by hand, `parkidx{Q}` may get pinned heads its header's count misses.
    if let Some(e) = cache().get_mut(q).filter(|_| id == KeyId::ParkIndex) {
        e.header = None;
    }
}

/// `created` in database `db`, or in every one (None).
fn made(q: &[u8], id: KeyId, db: Option<i32>) {
    let bits = db.map_or(!0, db_bit);
    if let Some(e) = cache().get_mut(q) {
        e.big[id as usize] &= !bits;
        if let Some(class) = lazy_class(id) {
            e.absent[class] &= !bits;
        }
        if id == KeyId::Meta && e.header.as_ref().is_some_and(|(d, _)| db.is_none_or(|db| *d == db)) {
            e.header = None;
        }
    }
}

/// Another command wrote key `key` in `db` (or it arrived there): if it is a queue's tagged
/// key, it may have been made.
pub fn written(key: &[u8], db: i32) {
    if let Some((q, id)) = queue_of(key) {
        created(q, id, db);
    }
}

/// Keys arrived unseen (a load from disk, a SWAPDB): nothing is known absent or converted.
pub fn forget_arrived() {
    for e in cache().values_mut() {
        e.absent = [0; LAZY.len()];
        e.big = [0; KEYS];
    }
}
