//! A queue must never lose messages silently: warn (log and INFO) when the server's
//! `maxmemory-policy` may evict keys that hold no TTL, which is every RMQ key.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::raw::{self, RedisModuleCtx};

use crate::rstr::rm;

static AT_RISK: AtomicBool = AtomicBool::new(false);

/// Policies that may evict a key without a TTL. `volatile-*` only evict keys with a TTL,
/// and RMQ never sets one.
pub fn policy_evicts_queues(policy: &[u8]) -> bool {
    policy.starts_with(b"allkeys-")
}

pub fn at_risk() -> bool {
    AT_RISK.load(Ordering::Relaxed)
}

fn current_policy(ctx: *mut RedisModuleCtx) -> Option<Vec<u8>> {
    unsafe {
        let reply = rm!(RedisModule_Call)(ctx, c"CONFIG".as_ptr(), c"cc".as_ptr(), c"GET".as_ptr(), c"maxmemory-policy".as_ptr());
        if reply.is_null() {
            return None;
        }
        let value = rm!(RedisModule_CallReplyArrayElement)(reply, 1);
        let out = (!value.is_null()).then(|| {
            let mut len = 0usize;
            let p = rm!(RedisModule_CallReplyStringPtr)(value, &mut len);
            if p.is_null() { Vec::new() } else { std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec() }
        });
        rm!(RedisModule_FreeCallReply)(reply);
        out
    }
}

/// Re-reads the policy and warns in the log if queues could be evicted.
pub fn check(ctx: *mut RedisModuleCtx) {
    let Some(policy) = current_policy(ctx) else { return };
    let risk = policy_evicts_queues(&policy);
    AT_RISK.store(risk, Ordering::Relaxed);
    if risk {
        let msg = format!(
            "WARNING maxmemory-policy is {}: Redis may evict queue keys and lose messages silently; use noeviction",
            String::from_utf8_lossy(&policy)
        );
        let c = std::ffi::CString::new(msg).unwrap_or_default();
        unsafe { rm!(RedisModule_Log)(ctx, c"warning".as_ptr(), c"%s".as_ptr(), c.as_ptr()) };
    }
}

extern "C" fn on_config_change(ctx: *mut RedisModuleCtx, _e: raw::RedisModuleEvent, _sub: u64, data: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        let change = unsafe { &*(data as *const raw::RedisModuleConfigChangeV1) };
        let names = unsafe { std::slice::from_raw_parts(change.config_names, change.num_changes as usize) };
        let relevant = names.iter().any(|n| unsafe { std::ffi::CStr::from_ptr(*n) }.to_bytes() == b"maxmemory-policy");
        if relevant {
            check(ctx);
        }
    });
}

/// Checks now and after every CONFIG SET of the policy.
pub fn watch(ctx: *mut RedisModuleCtx) {
    check(ctx);
    unsafe {
        rm!(RedisModule_SubscribeToServerEvent)(
            ctx,
            raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_CONFIG, dataver: 1 },
            Some(on_config_change),
        );
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_policies_risk_queues() {
        for p in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(policy_evicts_queues(p.as_bytes()), "{p}");
        }
        for p in ["noeviction", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"] {
            assert!(!policy_evicts_queues(p.as_bytes()), "{p}");
        }
    }
}
