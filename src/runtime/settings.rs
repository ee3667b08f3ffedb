//! The module's settings: load-time arguments and `CONFIG GET/SET rmq.<name>`.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::core::error::Bound;
use crate::core::policy::{self, Limits};
use crate::core::queue_store::Store;

const RETRIES_DEFAULT: i64 = 16;
const LEASE_MS_DEFAULT: i64 = 30_000;
const MAX_MESSAGE_BYTES_DEFAULT: i64 = 1_048_576;
const MAX_QUEUE_LENGTH_DEFAULT: i64 = 0;
const STATS_QUEUES_DEFAULT: i64 = 100_000;

pub static RETRIES: AtomicI64 = AtomicI64::new(RETRIES_DEFAULT);
pub static LEASE_MS: AtomicI64 = AtomicI64::new(LEASE_MS_DEFAULT);
pub static MAX_MESSAGE_BYTES: AtomicI64 = AtomicI64::new(MAX_MESSAGE_BYTES_DEFAULT);
pub static MAX_QUEUE_LENGTH: AtomicI64 = AtomicI64::new(MAX_QUEUE_LENGTH_DEFAULT);
/// How many queues' counters RMQ.INFO keeps (`queue_stats`).
pub static STATS_QUEUES: AtomicI64 = AtomicI64::new(STATS_QUEUES_DEFAULT);
/// 1: the module's clock is set by RMQ.TESTCLOCK (model tests only; load argument only).
pub static TEST_CLOCK: AtomicI64 = AtomicI64::new(0);

/// One setting: its name and bounds (shared with RMQ.POLICY), variable, default, and
/// whether CONFIG GET/SET reach it (else it is a load argument only).
pub struct Setting {
    pub name: &'static str,
    pub var: &'static AtomicI64,
    pub default: i64,
    pub min: i64,
    pub max: i64,
    pub config: bool,
}

const fn setting(b: Bound, var: &'static AtomicI64, default: i64) -> Setting {
    Setting { name: b.name, var, default, min: b.min, max: b.max, config: true }
}

pub static SETTINGS: [Setting; 6] = [
    setting(policy::RETRIES, &RETRIES, RETRIES_DEFAULT),
    setting(policy::LEASE_MS, &LEASE_MS, LEASE_MS_DEFAULT),
    setting(policy::MAX_MESSAGE_BYTES, &MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES_DEFAULT),
    setting(policy::MAX_QUEUE_LENGTH, &MAX_QUEUE_LENGTH, MAX_QUEUE_LENGTH_DEFAULT),
    Setting { name: "stats-queues", var: &STATS_QUEUES, default: STATS_QUEUES_DEFAULT, min: 0, max: 10_000_000, config: true },
    Setting { name: "test-clock", var: &TEST_CLOCK, default: 0, min: 0, max: 1, config: false },
];

/// Whether the module runs on the test clock (`test-clock 1` at load).
pub fn test_clock() -> bool {
    TEST_CLOCK.load(Ordering::Relaxed) == 1
}

/// Validates module arguments (`name value` pairs) and returns the values to apply, or
/// the reason the module must refuse to load. Nothing is applied on error.
pub fn parse_module_args(args: &[&[u8]]) -> Result<Vec<(&'static Setting, i64)>, String> {
    if !args.len().is_multiple_of(2) {
        return Err(format!("module arguments must be name/value pairs; got {} arguments", args.len()));
    }
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let name = String::from_utf8_lossy(pair[0]);
        let s = SETTINGS.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(pair[0])).ok_or_else(|| {
            let names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
            format!("unknown setting '{name}' (known: {})", names.join(", "))
        })?;
        match crate::core::num::parse_int(pair[1]) {
            Some(v) if v >= s.min && v <= s.max => out.push((s, v)),
            _ => {
                return Err(format!(
                    "invalid value '{}' for {}: must be an integer from {} to {}",
                    String::from_utf8_lossy(pair[1]),
                    s.name,
                    s.min,
                    s.max
                ))
            }
        }
    }
    Ok(out)
}

/// The server-wide settings.
pub fn server_limits() -> Limits {
    let get = |v: &AtomicI64| v.load(Ordering::Relaxed);
    Limits::server(get(&RETRIES), get(&LEASE_MS), get(&MAX_MESSAGE_BYTES), get(&MAX_QUEUE_LENGTH))
}

/// A queue's effective settings: the server's, overridden by its policy.
pub fn limits<S: Store>(q: &S) -> Limits {
    server_limits().with(&q.policy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_args_validated_whole() {
        let ok = parse_module_args(&[b"retries", b"3", b"LEASE-MS", b"100"]).unwrap();
        assert_eq!(ok.iter().map(|(s, v)| (s.name, *v)).collect::<Vec<_>>(), vec![("retries", 3), ("lease-ms", 100)]);
        assert!(parse_module_args(&[]).unwrap().is_empty());
        for (args, word) in [
            (vec![&b"retries"[..]], "pairs"),
            (vec![b"retries", b"1001"], "retries"),
            (vec![b"retries", b"-1"], "retries"),
            (vec![b"lease-ms", b"0"], "lease-ms"),
            (vec![b"lease-ms", b"2147483649"], "lease-ms"),
            (vec![b"max-message-bytes", b"0"], "max-message-bytes"),
            (vec![b"max-queue-length", b"x"], "max-queue-length"),
            (vec![b"stats-queues", b"10000001"], "stats-queues"),
            (vec![b"stats-queues", b"-1"], "stats-queues"),
            (vec![b"speed", b"1"], "unknown"),
        ] {
            let e = parse_module_args(&args).err().unwrap_or_default();
            assert!(e.contains(word), "{e}");
        }
    }

    #[test]
    fn defaults_within_bounds() {
        for s in &SETTINGS {
            assert!(s.min <= s.default && s.default <= s.max, "{}", s.name);
        }
    }
}
