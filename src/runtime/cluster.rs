//! Redis Cluster slot migration. A command names only `Q`, so while a slot moves Redis
//! sends a command to the importing node (ASK) whenever `Q` is absent on the source, even if
//! the queue's other keys are still there (all its messages in flight, say). On the
//! importing node, a command that would answer from, or create, a queue that has not
//! arrived yet answers TRYAGAIN instead, as Redis does for a multi-key command whose keys
//! are split; cluster clients retry it, and once the slot has moved the queue is whole.

use crate::core::error::{Result, RmqError};
use crate::ffi::call::call;
use crate::ffi::{Ctx, RStr};
use crate::storage::redis_queue::RedisQueue;

fn cluster(ctx: Ctx, args: &[&[u8]]) -> Option<Vec<u8>> {
    let args: Vec<RStr> = args.iter().map(|a| RStr::from_bytes(a)).collect();
    call(ctx, c"CLUSTER", &args.iter().collect::<Vec<_>>())?.text()
}

/// Whether `CLUSTER NODES` shows this node importing `slot`: `[<slot>-<-<node id>]` on the
/// line flagged `myself`.
pub fn importing(nodes: &[u8], slot: &[u8]) -> bool {
    let mut marker = b"[".to_vec();
    marker.extend_from_slice(slot);
    marker.extend_from_slice(b"-<-");
    nodes
        .split(|&c| c == b'\n')
        .filter(|line| line.split(|&c| c == b' ').nth(2).is_some_and(|flags| flags.split(|&c| c == b',').any(|f| f == b"myself")))
        .any(|line| line.windows(marker.len()).any(|w| w == marker.as_slice()))
}

/// TRYAGAIN when this node is importing the queue's slot and the queue is not here yet.
/// Costs nothing outside a cluster or for a queue that exists here.
pub fn check_arrived(ctx: Ctx, q: &RedisQueue) -> Result<()> {
    if !ctx.in_cluster() || q.exists() {
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
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 myself,master - 0 0 3 connected 10923-16383 [5474-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca] [77->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]\n";

    #[test]
    fn importing_is_read_from_the_myself_line() {
        assert!(importing(NODES, b"5474"));
        assert!(!importing(NODES, b"547"), "a prefix of another slot number");
        assert!(!importing(NODES, b"93"), "another node importing");
        assert!(!importing(NODES, b"77"), "migrating away, not importing");
        assert!(!importing(b"", b"1"));
    }
}
