//! Replication of effects: every change a command makes is recorded as the plain Redis
//! command that redoes it with explicit scores (ZADD/ZREM/HSET/HDEL/DEL), and sent once,
//! at the end, so replicas and the AOF never read a clock. Consecutive changes of one kind
//! to one key are coalesced into one command (ZADD k s1 m1 s2 m2 ...), which keeps the
//! stream short without reordering changes to the same key.

use std::ffi::CStr;

use crate::rstr::{rm, RStr};
use redis_module::raw;

/// The keys of a queue, in the order `RedisQueue` keeps their names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyId {
    Store = 0,
    Prepare = 1,
    Dead = 2,
    Meta = 3,
}

struct Group {
    cmd: &'static CStr,
    key: KeyId,
    args: Vec<RStr>,
}

#[derive(Default)]
pub struct Effects {
    groups: Vec<Group>,
}

impl Effects {
    /// Records one change. It joins the latest group on the same key when that group is
    /// the same command: no later group touches the key, so order per key is kept.
    pub fn record(&mut self, cmd: &'static CStr, key: KeyId, args: impl IntoIterator<Item = RStr>) {
        if let Some(g) = self.groups.iter_mut().rev().find(|g| g.key == key) {
            if g.cmd == cmd {
                g.args.extend(args);
                return;
            }
        }
        self.groups.push(Group { cmd, key, args: args.into_iter().collect() });
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Sends every recorded change to replicas and the AOF (Redis wraps several in
    /// MULTI/EXEC) and forgets them.
    pub fn flush(&mut self, ctx: *mut raw::RedisModuleCtx, names: &[RStr; 4]) {
        for g in self.groups.drain(..) {
            let mut argv: Vec<*mut raw::RedisModuleString> = Vec::with_capacity(g.args.len() + 1);
            argv.push(names[g.key as usize].ptr());
            argv.extend(g.args.iter().map(RStr::ptr));
            unsafe {
                rm!(RedisModule_Replicate)(ctx, g.cmd.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len());
            }
        }
    }
}
