//! Counters since start and gauges, shown by `INFO rmq`.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// Raises a gauge that tracks a maximum.
    pub fn max(&self, v: u64) {
        self.0.fetch_max(v, Ordering::Relaxed);
    }
    pub fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }
}

pub static PUSHED: Counter = Counter::new();
pub static MERGED: Counter = Counter::new();
pub static POPPED: Counter = Counter::new();
pub static ACKED: Counter = Counter::new();
pub static NACKED: Counter = Counter::new();
pub static EXPIRED: Counter = Counter::new();
pub static DEAD: Counter = Counter::new();
pub static REPLAYED: Counter = Counter::new();
pub static CANCELLED: Counter = Counter::new();
pub static GROUP_WAITS: Counter = Counter::new();
pub static RATE_LIMITED: Counter = Counter::new();
pub static BLOCKED_CLIENTS: Counter = Counter::new();
pub static SWEEP_RUNS: Counter = Counter::new();
pub static SWEEP_MAX_US: Counter = Counter::new();
pub static SCHEDULE_FIRED: Counter = Counter::new();
pub static SCHEDULE_SKIPPED: Counter = Counter::new();

/// Every field of the `INFO rmq` section, in order.
pub fn fields() -> [(&'static str, u64); 17] {
    [
        ("pushed", PUSHED.get()),
        ("merged", MERGED.get()),
        ("popped", POPPED.get()),
        ("acked", ACKED.get()),
        ("nacked", NACKED.get()),
        ("expired", EXPIRED.get()),
        ("dead", DEAD.get()),
        ("replayed", REPLAYED.get()),
        ("cancelled", CANCELLED.get()),
        ("group_waits", GROUP_WAITS.get()),
        ("rate_limited", RATE_LIMITED.get()),
        ("blocked_clients", BLOCKED_CLIENTS.get()),
        ("sweep_runs", SWEEP_RUNS.get()),
        ("sweep_max_us", SWEEP_MAX_US.get()),
        ("schedule_fired", SCHEDULE_FIRED.get()),
        ("schedule_skipped", SCHEDULE_SKIPPED.get()),
        // Gauge: the schedules this server fires (a replica fires none).
        ("schedules", crate::runtime::alarm::firings() as u64),
    ]
}
