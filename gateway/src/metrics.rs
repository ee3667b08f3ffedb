//! The gateway's own Prometheus metrics: requests by action and outcome, a latency
//! histogram, open long polls.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 25.0];

#[derive(Default)]
struct Latency {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, &'static str), u64>>,
    latency: Mutex<BTreeMap<String, Latency>>,
}

impl Metrics {
    /// Counts one request of `action` with `outcome` (`ok` or an error code).
    pub fn observe(&self, action: &str, outcome: &'static str, took: Duration) {
        if let Ok(mut r) = self.requests.lock() {
            *r.entry((action.to_string(), outcome)).or_default() += 1;
        }
        if let Ok(mut l) = self.latency.lock() {
            let e = l.entry(action.to_string()).or_default();
            let s = took.as_secs_f64();
            for (i, b) in BUCKETS.iter().enumerate() {
                if s <= *b {
                    e.counts[i] += 1;
                }
            }
            e.sum += s;
            e.count += 1;
        }
    }

    pub fn render(&self, open_polls: usize) -> String {
        let mut out = String::new();
        out.push_str("# HELP rmq_gateway_requests_total Requests by action and outcome.\n# TYPE rmq_gateway_requests_total counter\n");
        if let Ok(r) = self.requests.lock() {
            for ((action, outcome), n) in r.iter() {
                let _ = writeln!(out, "rmq_gateway_requests_total{{action=\"{action}\",outcome=\"{outcome}\"}} {n}");
            }
        }
        out.push_str("# HELP rmq_gateway_request_seconds Request latency by action.\n# TYPE rmq_gateway_request_seconds histogram\n");
        if let Ok(l) = self.latency.lock() {
            for (action, h) in l.iter() {
                for (i, b) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(out, "rmq_gateway_request_seconds_bucket{{action=\"{action}\",le=\"{b}\"}} {}", h.counts[i]);
                }
                let _ = writeln!(out, "rmq_gateway_request_seconds_bucket{{action=\"{action}\",le=\"+Inf\"}} {}", h.count);
                let _ = writeln!(out, "rmq_gateway_request_seconds_sum{{action=\"{action}\"}} {}", h.sum);
                let _ = writeln!(out, "rmq_gateway_request_seconds_count{{action=\"{action}\"}} {}", h.count);
            }
        }
        let _ = writeln!(out, "# HELP rmq_gateway_long_polls Long polls waiting now.\n# TYPE rmq_gateway_long_polls gauge\nrmq_gateway_long_polls {open_polls}");
        out
    }
}
