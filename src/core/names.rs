//! The names of a queue's keys and the rule for a queue's own name, in one place: `Q` and
//! `prepare{Q}`, `dead{Q}`, `meta{Q}`, `park{Q}`, `parkidx{Q}`, `hold{Q}`, `sched{Q}`,
//! `seq{Q}`, `dedup{Q}`, `dedupexp{Q}`, `moving{Q}`, `journal{Q}`, all tagged `{Q}` so a queue lives in one cluster hash slot. Pure: the argument parsers,
//! the storage and the event handlers all ask here.

use crate::core::queue_store::Set;

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

/// Every key, in `KeyId` order.
pub const ALL: [KeyId; KEYS] = [KeyId::Store, KeyId::Prepare, KeyId::Dead, KeyId::Meta, KeyId::Park, KeyId::ParkIndex, KeyId::Hold];

/// The keys RMQ.PURGE empties (with DEAD, `Dead` too): every waiting and in-flight
/// message's.
pub const PURGED: [KeyId; 5] = [KeyId::Store, KeyId::Prepare, KeyId::Park, KeyId::ParkIndex, KeyId::Hold];

/// The tagged keys' prefixes, in `KeyId` order from `Prepare` on.
pub const PREFIXES: [&[u8]; KEYS - 1] = [b"prepare", b"dead", b"meta", b"park", b"parkidx", b"hold"];

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

/// `prefix{q}`.
pub fn tagged(prefix: &[u8], q: &[u8]) -> Vec<u8> {
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
    let (at, q) = tagged_by(key, &PREFIXES)?;
    Some((q, ALL[at + 1]))
}

/// The index in `prefixes` of the one `key` starts with, followed by `{`, and what it
/// tags; None unless `key` ends with `}`. Every keyspace event and hash command asks
/// (`hooks`), mostly about keys of no queue: the first bytes settle those.
fn tagged_by<'k>(key: &'k [u8], prefixes: &[&[u8]]) -> Option<(usize, &'k [u8])> {
    let inner = key.strip_suffix(b"}")?;
    prefixes.iter().enumerate().find_map(|(i, p)| Some((i, inner.strip_prefix(*p)?.strip_prefix(b"{")?)))
}

/// Tagged keys of a queue kept beside those `RedisQueue` opens: its schedules, its push
/// sequence (a string), its deduplication records (a hash, and their ends in a sorted
/// set), its dead messages claimed for a move (a hash) and its journal (a Stream).
const OTHER_PREFIXES: [&[u8]; 6] = [b"sched", b"seq", b"dedup", b"dedupexp", b"moving", b"journal"];

/// What `OTHER_PREFIXES` keeps, by index.
#[derive(Clone, Copy)]
pub enum Other {
    Sequence = 1,
    Dedup = 2,
    DedupEnds = 3,
    Moving = 4,
    Journal = 5,
}

/// The name of one of queue `q`'s keys of `OTHER_PREFIXES` but schedules.
pub fn other_key(q: &[u8], which: Other) -> Vec<u8> {
    tagged(OTHER_PREFIXES[which as usize], q)
}

/// Whether `q` can name a queue (and a topic, whose slots' names must be queue names):
/// non-empty, without braces. Its keys' hash tag is `{Q}`; an empty tag `{}` would scatter
/// its keys over the cluster's slots.
pub fn is_queue_name(q: &[u8]) -> bool {
    !q.is_empty() && !q.iter().any(|&c| c == b'{' || c == b'}')
}

/// The name of queue `q`'s schedule key, `sched{Q}`.
pub fn schedule_key(q: &[u8]) -> Vec<u8> {
    tagged(OTHER_PREFIXES[0], q)
}

/// The queue whose schedule key `key` is, if it is one.
pub fn scheduled_queue(key: &[u8]) -> Option<&[u8]> {
    let q = tagged_by(key, &OTHER_PREFIXES[..1])?.1;
    is_queue_name(q).then_some(q)
}

/// The queue whose tagged key `key` is (any of them, its schedules too).
pub fn owner(key: &[u8]) -> Option<&[u8]> {
    let q = tagged_by(key, &PREFIXES).or_else(|| tagged_by(key, &OTHER_PREFIXES))?.1;
    is_queue_name(q).then_some(q)
}

/// The names of every tagged key queue `q` may have (not `Q` itself).
pub fn tagged_names(q: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    PREFIXES.iter().chain(&OTHER_PREFIXES).map(move |p| tagged(p, q))
}

/// The names of every key the module may keep for queue `q`: `Q` and its tagged keys
/// (what RMQ.DROP deletes). Every name above is one of these (`every_key_is_listed`).
pub fn queue_keys(q: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    std::iter::once(q.to_vec()).chain(tagged_names(q))
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
        assert_eq!(tagged_names(b"q").count(), KEYS + 5);
        assert_eq!(other_key(b"q", Other::Journal), b"journal{q}");
        assert_eq!(other_key(b"q", Other::DedupEnds), b"dedupexp{q}");
        for k in [&b"seq{q}"[..], b"dedup{q}", b"dedupexp{q}", b"moving{q}", b"journal{q}"] {
            assert_eq!((owner(k), queue_of(k)), (Some(&b"q"[..]), None));
        }
        assert_eq!(scheduled_queue(b"dedup{q}"), None);
        for (i, p) in PREFIXES.iter().enumerate() {
            assert_eq!(queue_of(&tagged(p, b"x")).map(|(_, id)| id as usize), Some(i + 1));
        }
    }

    /// What RMQ.DROP deletes (`queue_keys`) is every key a name of this file makes.
    #[test]
    fn every_key_is_listed() {
        let all: Vec<Vec<u8>> = queue_keys(b"q").collect();
        let mut made: Vec<Vec<u8>> = vec![b"q".to_vec(), schedule_key(b"q")];
        made.extend(PREFIXES.iter().map(|p| tagged(p, b"q")));
        made.extend([Other::Sequence, Other::Dedup, Other::DedupEnds, Other::Moving, Other::Journal].map(|o| other_key(b"q", o)));
        for k in &made {
            assert!(all.contains(k), "{} is not in queue_keys", String::from_utf8_lossy(k));
        }
        let mut distinct = all.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len());
        assert_eq!(all.len(), 1 + PREFIXES.len() + OTHER_PREFIXES.len());
        assert!(all.iter().skip(1).all(|k| owner(k) == Some(&b"q"[..])));
    }

    /// No key name is made but by this file's functions: outside tests, no source file
    /// spells a tagged name (a literal `word{`), and `tagged` is only ever given one of the
    /// prefixes `queue_keys` lists (`PREFIXES`, `OTHER_PREFIXES`). A key added later
    /// either goes through them, and so is listed (DROP deletes it), or fails here.
    #[test]
    fn no_key_name_is_made_elsewhere() {
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("a readable directory") {
                let path = e.expect("a directory entry").path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|x| x == "rs") && !path.to_string_lossy().ends_with("_tests.rs") {
                    out.push(path);
                }
            }
        }
        let mut all = Vec::new();
        files(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut all);
        assert!(all.len() > 50, "only {} files", all.len());
        for path in all {
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            // The code, not its unit tests (which spell names to check them).
            let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
            let code: String = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            let b = code.as_bytes();
            for (at, _) in code.match_indices('{') {
                // A literal `"word{`: a key name spelled by hand.
                let word = b[..at].iter().rev().take_while(|c| c.is_ascii_lowercase()).count();
                let quote = at.checked_sub(word + 1).map(|i| b[i]);
                assert!(!(word > 0 && quote == Some(b'"')), "{} spells a key name: {}", path.display(), &code[at - word - 1..at + 1]);
            }
            for (at, _) in code.match_indices("tagged(") {
                let before = b[..at].last().copied();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    continue;
                }
                let arg = &code[at + "tagged(".len()..];
                let ok = ["p, ", "prefix: ", "OTHER_PREFIXES["].iter().any(|a| arg.starts_with(a));
                assert!(ok, "{}: tagged({} is given a prefix queue_keys may not list", path.display(), &arg[..arg.len().min(20)]);
            }
        }
    }

    #[test]
    fn schedule_keys_name_their_queue() {
        assert_eq!(schedule_key(b"q"), b"sched{q}");
        assert_eq!(scheduled_queue(b"sched{orders}"), Some(&b"orders"[..]));
        assert_eq!(scheduled_queue(&schedule_key(b"a\0b")), Some(&b"a\0b"[..]));
        for other in [&b"sched{}"[..], b"sched{q", b"xsched{q}", b"meta{q}", b"sched{a{b}", b"q"] {
            assert_eq!(scheduled_queue(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
