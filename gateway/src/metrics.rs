//! The gateway's own Prometheus metrics: requests by action and outcome, a latency
//! histogram, requests refused before authentication, open long polls.
//!
//! Every label value is one of a fixed set (the SQS actions below or `other`, the error
//! codes of crate::errors), so nothing a client sends grows them. Kept by hand rather than
//! through an exporter crate: a request costs one lock and a few additions on `&'static str`
//! keys, with no registry or allocation on the hot path, and the text format is a few lines.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::sqs_requests::ACTIONS;

const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 25.0];

/// The label of a request's action: the contract's name for it (crate::sqs_requests::ACTIONS,
/// the only label values besides `other`), or `other`.
pub fn action_label(action: &str) -> &'static str {
    ACTIONS.iter().find(|a| **a == action).copied().unwrap_or("other")
}

#[derive(Default)]
struct Latency {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Counts {
    requests: BTreeMap<(&'static str, &'static str), u64>,
    latency: BTreeMap<&'static str, Latency>,
    unauthenticated: BTreeMap<&'static str, u64>,
}

#[derive(Default)]
pub struct Metrics {
    counts: Mutex<Counts>,
}

impl Metrics {
    /// Counts one authenticated request of `action` (an `action_label`) with `outcome`
    /// (`ok` or an error code).
    pub fn observe(&self, action: &'static str, outcome: &'static str, took: Duration) {
        let Ok(mut c) = self.counts.lock() else { return };
        *c.requests.entry((action, outcome)).or_default() += 1;
        let e = c.latency.entry(action).or_default();
        let s = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                e.counts[i] += 1;
            }
        }
        e.sum += s;
        e.count += 1;
    }

    /// Counts one request refused before authentication, by its SQS error code.
    pub fn unauthenticated(&self, code: &'static str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.unauthenticated.entry(code).or_default() += 1;
        }
    }

    /// The exposition, with the gauges of now: long polls waiting and Redis connections
    /// open (every Redis user's).
    pub fn render(&self, open_polls: usize, redis_connections: usize) -> String {
        let mut out = String::new();
        let Ok(c) = self.counts.lock() else { return out };
        out.push_str("# HELP rmq_gateway_requests_total Requests by action and outcome.\n# TYPE rmq_gateway_requests_total counter\n");
        for ((action, outcome), n) in c.requests.iter() {
            let _ = writeln!(out, "rmq_gateway_requests_total{{action=\"{}\",outcome=\"{}\"}} {n}", escape(action), escape(outcome));
        }
        out.push_str("# HELP rmq_gateway_request_seconds Request latency by action.\n# TYPE rmq_gateway_request_seconds histogram\n");
        for (action, h) in c.latency.iter() {
            let action = escape(action);
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(out, "rmq_gateway_request_seconds_bucket{{action=\"{action}\",le=\"{b}\"}} {}", h.counts[i]);
            }
            let _ = writeln!(out, "rmq_gateway_request_seconds_bucket{{action=\"{action}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "rmq_gateway_request_seconds_sum{{action=\"{action}\"}} {}", h.sum);
            let _ = writeln!(out, "rmq_gateway_request_seconds_count{{action=\"{action}\"}} {}", h.count);
        }
        out.push_str(
            "# HELP rmq_gateway_unauthenticated_total Requests refused before authentication, by error code.\n\
             # TYPE rmq_gateway_unauthenticated_total counter\n",
        );
        for (code, n) in c.unauthenticated.iter() {
            let _ = writeln!(out, "rmq_gateway_unauthenticated_total{{code=\"{}\"}} {n}", escape(code));
        }
        let _ = writeln!(out, "# HELP rmq_gateway_long_polls Long polls waiting now.\n# TYPE rmq_gateway_long_polls gauge\nrmq_gateway_long_polls {open_polls}");
        let _ = writeln!(
            out,
            "# HELP rmq_gateway_redis_connections Redis connections open now (shared and dedicated, every Redis user).\n\
             # TYPE rmq_gateway_redis_connections gauge\nrmq_gateway_redis_connections {redis_connections}"
        );
        out
    }
}

/// A label value as the Prometheus text format writes it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_actions_are_other() {
        assert_eq!(action_label("SendMessage"), "SendMessage");
        assert_eq!(action_label("Made\"Up\nAction"), "other");
        assert_eq!(action_label(""), "other");
    }

    #[test]
    fn label_values_escaped() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn rendered_counts() {
        let m = Metrics::default();
        m.observe(action_label("SendMessage"), "ok", Duration::from_millis(2));
        m.observe(action_label("Nope"), "UnsupportedOperation", Duration::from_millis(2));
        m.unauthenticated("SignatureDoesNotMatch");
        m.unauthenticated("SignatureDoesNotMatch");
        let text = m.render(3, 5);
        assert!(text.contains("rmq_gateway_requests_total{action=\"SendMessage\",outcome=\"ok\"} 1\n"));
        assert!(text.contains("rmq_gateway_requests_total{action=\"other\",outcome=\"UnsupportedOperation\"} 1\n"));
        assert!(text.contains("rmq_gateway_request_seconds_bucket{action=\"SendMessage\",le=\"0.0025\"} 1\n"));
        assert!(text.contains("rmq_gateway_request_seconds_bucket{action=\"SendMessage\",le=\"0.001\"} 0\n"));
        assert!(text.contains("rmq_gateway_unauthenticated_total{code=\"SignatureDoesNotMatch\"} 2\n"));
        assert!(text.contains("\nrmq_gateway_long_polls 3\n"));
        assert!(text.ends_with("\nrmq_gateway_redis_connections 5\n"));
    }
}
