//! Redis Cluster slot migration. A command names only `Q`, so while a slot moves Redis
//! sends a command to the importing node (ASK) whenever `Q` is absent on the source, even if
//! the queue's other keys are still there (all its messages in flight, say). On the
//! importing node, a command that would answer from, or create, a queue that has not
//! arrived yet answers TRYAGAIN instead, as Redis does for a multi-key command whose keys
//! are split; cluster clients retry it, and once the slot has moved the queue is whole.

use redis_module::raw::{self, RedisModuleCtx};

use crate::error::{Result, RmqError};
use crate::redis_store::RedisQueue;
use crate::rstr::{rm, RStr};

fn call_reply(ctx: *mut RedisModuleCtx, args: &[&RStr]) -> Option<Vec<u8>> {
    let (sub, rest) = args.split_first()?;
    unsafe {
        let reply = match rest {
            [] => rm!(RedisModule_Call)(ctx, c"CLUSTER".as_ptr(), c"s".as_ptr(), sub.ptr()),
            [a] => rm!(RedisModule_Call)(ctx, c"CLUSTER".as_ptr(), c"ss".as_ptr(), sub.ptr(), a.ptr()),
            _ => return None,
        };
        if reply.is_null() {
            return None;
        }
        let out = if rm!(RedisModule_CallReplyType)(reply) == raw::REDISMODULE_REPLY_INTEGER as i32 {
            Some(rm!(RedisModule_CallReplyInteger)(reply).to_string().into_bytes())
        } else {
            let s = rm!(RedisModule_CreateStringFromCallReply)(reply);
            (!s.is_null()).then(|| RStr::adopt(s).as_ref().to_vec())
        };
        rm!(RedisModule_FreeCallReply)(reply);
        out
    }
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
pub fn check_arrived(ctx: *mut RedisModuleCtx, q: &RedisQueue) -> Result<()> {
    let flags = unsafe { rm!(RedisModule_GetContextFlags)(ctx) } as u32;
    if flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER == 0 || q.exists() {
        return Ok(());
    }
    let slot = call_reply(ctx, &[&RStr::from_bytes(b"KEYSLOT"), q.name()]);
    let nodes = call_reply(ctx, &[&RStr::from_bytes(b"NODES")]);
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
