//! A queue's attributes as the gateway reads them (crate::gateway_keys::meta), and the short-lived cache
//! of them that spares the actions run per message (send, receive, delete, visibility) the
//! Redis round trip that would read them first.
//!
//! Why a cached queue is safe to act on for a second (`FRESH_MS`, `--queue-cache-ms`):
//! - a send checks after its pushes, on the same connection, that the queue still exists,
//!   and a deleted queue's pushes are removed again (`actions::send_actions::push`), so no keys are left
//!   behind;
//! - DeleteQueue leaves a tombstone that refuses a new queue of the name for `TOMBSTONE_MS`
//!   (SQS's QueueDeletedRecently), longer than any entry of the old queue is trusted, so a
//!   cached entry never stands for a queue created after it (its receipt-handle key);
//! - receive, delete and visibility changes on a queue deleted meanwhile find nothing of it
//!   (SQS: requests in the moments after a DeleteQueue may still succeed), and delivery ids
//!   follow the clock after a queue's keys are gone, so an old handle never names a new
//!   delivery;
//! - an attribute change reaches this gateway at once (it forgets its entry) and the others
//!   within the freshness (SQS allows up to 60 s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hmac::Hmac;
use sha2::Sha256;

/// A queue's stored attributes (crate::gateway_keys::meta): the settable ones as SQS strings, plus
/// `CreatedTimestamp`, `LastModifiedTimestamp` (seconds) and `hkey` (receipt handles' MAC key).
pub struct Queue {
    pub name: String,
    pub attrs: HashMap<String, String>,
    /// The receipt handles' MAC with its key set up, made once per cached queue: the key
    /// setup hashes two blocks, as much as a short message, for every handle otherwise.
    pub mac: OnceLock<Hmac<Sha256>>,
}

impl Queue {
    pub fn new(name: String, attrs: HashMap<String, String>) -> Queue {
        Queue { name, attrs, mac: OnceLock::new() }
    }
    pub fn fifo(&self) -> bool {
        self.name.ends_with(".fifo")
    }
    pub fn num(&self, name: &str) -> i64 {
        self.attrs.get(name).and_then(|v| v.parse().ok()).unwrap_or_else(|| default_of(name).and_then(|d| d.parse().ok()).unwrap_or(0))
    }
    pub fn flag(&self, name: &str) -> bool {
        self.attrs.get(name).is_some_and(|v| v == "true")
    }
    pub fn handle_key(&self) -> Vec<u8> {
        hex::decode(self.attrs.get("hkey").map(String::as_str).unwrap_or("")).unwrap_or_default()
    }
}

pub fn default_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "VisibilityTimeout" => "30",
        "DelaySeconds" => "0",
        "ReceiveMessageWaitTimeSeconds" => "0",
        "MaximumMessageSize" => "1048576",
        "MessageRetentionPeriod" => "345600",
        crate::rmq_kind::KIND_ATTRIBUTE => "fixed",
        _ => return None,
    })
}

/// How long a cached queue is acted on before it is read again (`--queue-cache-ms`), by
/// default and at most; 0 reads it for every action.
pub const FRESH_MS: u64 = 1_000;
pub const MAX_FRESH_MS: u64 = 2_000;
/// How long DeleteQueue's tombstone (crate::gateway_keys::gone) refuses a new queue of the name: well
/// past the longest freshness, so that a gateway stalled between a send that found the
/// queue gone and its clean-up still cleans up before a new queue of the name can exist.
pub const TOMBSTONE_MS: u64 = 5_000;
const _: () = assert!(TOMBSTONE_MS > 2 * MAX_FRESH_MS, "the tombstone outlasts every entry");
/// Entries kept at most (a gateway serving more queues reads the rest each time).
const MAX_ENTRIES: usize = 10_000;

/// The queues one Redis user read recently (per user: another user's read must not let a
/// user past an ACL that refuses it the attributes).
pub struct Cache {
    fresh: Duration,
    entries: Mutex<HashMap<String, (Instant, Arc<Queue>)>>,
}

impl Cache {
    /// Entries serve for `fresh_ms` (at most MAX_FRESH_MS).
    pub fn new(fresh_ms: u64) -> Cache {
        Cache { fresh: Duration::from_millis(fresh_ms.min(MAX_FRESH_MS)), entries: Mutex::default() }
    }

    /// The queue, if read within the freshness.
    pub fn get(&self, name: &str) -> Option<Arc<Queue>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(name).filter(|(at, _)| at.elapsed() < self.fresh).map(|(_, q)| q.clone())
    }

    pub fn put(&self, q: Arc<Queue>) {
        if self.fresh.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            let fresh = self.fresh;
            entries.retain(|_, (at, _)| at.elapsed() < fresh);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(q.name.clone(), (Instant::now(), q));
    }

    /// After this gateway changed the queue's attributes, created or deleted it.
    pub fn forget(&self, name: &str) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str) -> Arc<Queue> {
        Arc::new(Queue::new(name.into(), HashMap::from([("VisibilityTimeout".to_string(), "7".to_string())])))
    }

    #[test]
    fn entries_serve_while_fresh_and_until_forgotten() {
        let c = Cache::new(FRESH_MS);
        assert!(c.get("a").is_none());
        c.put(queue("a"));
        assert_eq!(c.get("a").unwrap().num("VisibilityTimeout"), 7);
        assert_eq!(c.get("a").unwrap().num("DelaySeconds"), 0, "a default");
        c.forget("a");
        assert!(c.get("a").is_none());
        // A stale entry is not served.
        c.entries.lock().unwrap().insert("b".into(), (Instant::now() - c.fresh, queue("b")));
        assert!(c.get("b").is_none());
    }

    #[test]
    fn freshness_0_keeps_nothing_and_is_bounded() {
        let c = Cache::new(0);
        c.put(queue("a"));
        assert!(c.get("a").is_none());
        assert_eq!(Cache::new(60_000).fresh, Duration::from_millis(MAX_FRESH_MS));
    }

    #[test]
    fn a_full_cache_drops_stale_entries_first() {
        let c = Cache::new(FRESH_MS);
        {
            let mut e = c.entries.lock().unwrap();
            for i in 0..MAX_ENTRIES {
                e.insert(format!("old{i}"), (Instant::now() - c.fresh, queue(&format!("old{i}"))));
            }
        }
        c.put(queue("new"));
        assert_eq!(c.entries.lock().unwrap().len(), 1);
        assert!(c.get("new").is_some());
    }
}
