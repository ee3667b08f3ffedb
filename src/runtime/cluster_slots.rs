//! Redis Cluster: which hash slots this node serves (for the keyless RMQ.TPOP), and slot
//! migration. A command names only `Q`, so while a slot moves Redis sends a command to the
//! importing node (ASK) whenever `Q` is absent on the source, even if the queue's other
//! keys are still there (all its messages in flight, say). On the importing node, a
//! command that would answer from, or create, a queue that has not arrived yet answers
//! TRYAGAIN instead, as Redis does for a multi-key command whose keys are split; cluster
//! clients retry it, and once the slot has moved the queue is whole.

use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::core::error::{Result, RmqError};
use crate::core::route::key_slot;
use crate::ffi::call::call;
use crate::ffi::{Ctx, RStr};
use crate::storage::redis_queue::RedisQueue;

fn cluster(ctx: Ctx, args: &[&[u8]]) -> Option<Vec<u8>> {
    let args: Vec<RStr> = args.iter().map(|a| RStr::from_bytes(a)).collect();
    call(ctx, c"CLUSTER", &args.iter().collect::<Vec<_>>())?.text()
}

/// The line of `CLUSTER NODES` flagged `myself`.
fn myself(nodes: &[u8]) -> Option<&[u8]> {
    nodes
        .split(|&c| c == b'\n')
        .find(|line| line.split(|&c| c == b' ').nth(2).is_some_and(|flags| flags.split(|&c| c == b',').any(|f| f == b"myself")))
}

/// Whether `CLUSTER NODES` shows this node importing `slot`: `[<slot>-<-<node id>]` on the
/// line flagged `myself`.
pub fn importing(nodes: &[u8], slot: &[u8]) -> bool {
    migration(nodes, slot, b"-<-")
}

/// Whether `CLUSTER NODES` shows this node migrating `slot` away: `[<slot>->-<node id>]`.
fn migrating(nodes: &[u8], slot: &[u8]) -> bool {
    migration(nodes, slot, b"->-")
}

fn migration(nodes: &[u8], slot: &[u8], arrow: &[u8]) -> bool {
    let mut marker = b"[".to_vec();
    marker.extend_from_slice(slot);
    marker.extend_from_slice(arrow);
    myself(nodes).is_some_and(|line| line.windows(marker.len()).any(|w| w == marker.as_slice()))
}

/// Whether queue `q`'s slot is migrating away from this node: its keys leave one MIGRATE
/// at a time, each deleted here as it goes, so `Q` gone is no queue deleted by hand.
pub fn migrating_away(ctx: Ctx, q: &[u8]) -> bool {
    if !enabled(ctx) {
        return false;
    }
    match (cluster(ctx, &[b"KEYSLOT", q]), cluster(ctx, &[b"NODES"])) {
        (Some(slot), Some(nodes)) => migrating(&nodes, &slot),
        _ => false,
    }
}

/// A set of hash slots.
type Slots = Box<[u64; 256]>;

fn has(slots: &Slots, slot: u16) -> bool {
    slots[slot as usize / 64] & (1 << (slot % 64)) != 0
}

/// The slots `CLUSTER NODES` shows this node serving (`a-b` and `a` entries of its line;
/// `[...]` entries are migrations, not ownership).
pub fn served_slots(nodes: &[u8]) -> Slots {
    let mut out: Slots = Box::new([0; 256]);
    let Some(line) = myself(nodes) else { return out };
    let num = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|s| s.parse::<u16>().ok()).filter(|&n| n < 16384);
    for token in line.split(|&c| c == b' ').skip(8).filter(|t| !t.starts_with(b"[")) {
        let mut ends = token.splitn(2, |&c| c == b'-');
        let (Some(lo), hi) = (ends.next().and_then(num), ends.next()) else { continue };
        let hi = match hi {
            Some(h) => match num(h) {
                Some(h) => h,
                None => continue,
            },
            None => lo,
        };
        for slot in lo..=hi {
            out[slot as usize / 64] |= 1 << (slot % 64);
        }
    }
    out
}

/// The slots this node serves, as last read, and when (by the real clock: the test clock
/// may stand still). Forgotten whenever a CLUSTER command runs (SETSLOT, ADDSLOTS,
/// FAILOVER...), so a slot this node takes by a command is seen at once.
static SERVED: LazyLock<Mutex<Option<(Instant, Slots)>>> = LazyLock::new(Mutex::default);
/// How long a reading is trusted for a slot it shows served; a slot it does not show is
/// read again after `RECHECK` (it may have come by the cluster bus: a failover elsewhere).
const TRUST: Duration = Duration::from_millis(1000);
const RECHECK: Duration = Duration::from_millis(100);

/// Whether this server runs in cluster mode: read once (`cluster-enabled` cannot change
/// at run time), sparing every command that asks a read of the context flags.
pub fn enabled(ctx: Ctx) -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| ctx.in_cluster())
}

/// Whether this node serves queue `q`'s hash slot (always, outside a cluster). Keys of a
/// slot being imported are here before the slot is: they are not served yet.
pub fn serves(ctx: Ctx, q: &[u8]) -> bool {
    if !enabled(ctx) {
        return true;
    }
    let slot = key_slot(q);
    let now = Instant::now();
    let known = match &*SERVED.lock().unwrap_or_else(|e| e.into_inner()) {
        Some((at, slots)) if now.duration_since(*at) <= if has(slots, slot) { TRUST } else { RECHECK } => Some(has(slots, slot)),
        _ => None,
    };
    known.unwrap_or_else(|| {
        // Read with the lock released: a command the read runs must not find it held.
        let Some(nodes) = cluster(ctx, &[b"NODES"]) else { return false };
        let slots = served_slots(&nodes);
        let serves = has(&slots, slot);
        *SERVED.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, slots));
        serves
    })
}

/// The node's role or slots may have changed: read them again when next needed.
pub fn forget_slots() {
    *SERVED.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// TRYAGAIN when this node is importing the queue's slot and the queue is not here yet.
/// Costs nothing outside a cluster, for a queue that exists here, or in a slot this node
/// serves (then it is not importing it: `serves` reads the slots at most once a second,
/// and again after any CLUSTER command, such as the SETSLOT that starts an import). An
/// empty queue has no keys, so without that a push to one would read CLUSTER NODES.
pub fn check_arrived(ctx: Ctx, q: &RedisQueue) -> Result<()> {
    if !enabled(ctx) || q.exists() || serves(ctx, q.name().as_ref()) {
        return Ok(());
    }
    let slot = cluster(ctx, &[b"KEYSLOT", q.name().as_ref()]);
    let nodes = cluster(ctx, &[b"NODES"]);
    match (slot, nodes) {
        (Some(slot), Some(nodes)) if importing(&nodes, &slot) => Err(RmqError::TryAgain),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &[u8] = b"07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n\
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [93-<-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]\n\
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 myself,master - 0 0 3 connected 77 10923-16383 [5474-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca] [77->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]\n";

    #[test]
    fn served_slots_are_read_from_the_myself_line() {
        let s = served_slots(NODES);
        assert!(has(&s, 10923) && has(&s, 16383) && has(&s, 12000));
        assert!(!has(&s, 10922) && !has(&s, 5474) && !has(&s, 0), "another node's, or being imported");
        // A slot migrating away is still this node's until the move completes: its keys
        // leave one MIGRATE at a time, and the ones still here must be served.
        assert!(has(&s, 77), "migrating away, still served");
        assert!(!has(&s, 76) && !has(&s, 78));
        let marker_only = served_slots(b"id h myself,master - 0 0 1 connected [9->-x] [10-<-y]\n");
        assert!(marker_only.iter().all(|w| *w == 0), "a migration marker is no ownership");
        let single = served_slots(b"id 127.0.0.1:1@2 myself,master - 0 0 1 connected 5 7-8\n");
        assert_eq!((0..10).filter(|&i| has(&single, i)).collect::<Vec<_>>(), vec![5, 7, 8]);
        assert!(served_slots(b"id h myself,slave x 0 0 1 connected\n").iter().all(|w| *w == 0));
    }

    #[test]
    fn importing_is_read_from_the_myself_line() {
        assert!(importing(NODES, b"5474"));
        assert!(!importing(NODES, b"547"), "a prefix of another slot number");
        assert!(!importing(NODES, b"93"), "another node importing");
        assert!(!importing(NODES, b"77"), "migrating away, not importing");
        assert!(!importing(b"", b"1"));
        assert!(migrating(NODES, b"77"));
        assert!(!migrating(NODES, b"7"), "a prefix of another slot number");
        assert!(!migrating(NODES, b"5474"), "importing, not migrating away");
    }
}
