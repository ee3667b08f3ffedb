//! A queue must never lose messages silently: warn (log and INFO) when the server's
//! `maxmemory-policy` may evict keys that hold no TTL, which is every RMQ key.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::ffi::call::call;
use crate::ffi::{Ctx, RStr};

static AT_RISK: AtomicBool = AtomicBool::new(false);

/// Policies that may evict a key without a TTL. `volatile-*` only evict keys with a TTL,
/// and RMQ never sets one.
pub fn policy_evicts_queues(policy: &[u8]) -> bool {
    policy.starts_with(b"allkeys-")
}

pub fn at_risk() -> bool {
    AT_RISK.load(Ordering::Relaxed)
}

fn current_policy(ctx: Ctx) -> Option<Vec<u8>> {
    let args = [RStr::from_bytes(b"GET"), RStr::from_bytes(b"maxmemory-policy")];
    call(ctx, c"CONFIG", &[&args[0], &args[1]])?.element(1)
}

/// Re-reads the policy and warns in the log if queues could be evicted.
pub fn check(ctx: Ctx) {
    let Some(policy) = current_policy(ctx) else { return };
    let risk = policy_evicts_queues(&policy);
    AT_RISK.store(risk, Ordering::Relaxed);
    if risk {
        ctx.log_warning(&format!(
            "WARNING maxmemory-policy is {}: Redis may evict queue keys and lose messages silently; use noeviction",
            String::from_utf8_lossy(&policy)
        ));
    }
}

/// CONFIG SET changed `names` (`hooks`): re-checked if the policy is one.
pub fn config_changed(ctx: Ctx, names: &[&[u8]]) {
    if names.contains(&&b"maxmemory-policy"[..]) {
        check(ctx);
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
