//! Sends into priority and range queues (crate::rmq_kind), which merge by body as RMQ.PUSH
//! merges by content. A gateway message is stored with its MessageId and attributes, so two
//! sends of one body are two RMQ contents; the gateway keeps an index of the queue's bodies
//! — `rmqgw:body{N}` (hash: SHA-256 of the body, hex → the stored message) and
//! `rmqgw:bodyage{N}` (sorted set: digest → the push number it was last seen live at) —
//! and one script per send decides atomically:
//! - the body's message is waiting (in `N`, `park{N}` or `hold{N}`): nothing is added; a
//!   priority queue's send pushes that message again, which sets its priority (latest
//!   wins), and the send answers its MessageId;
//! - else a new message (RMQ.PUSH with SEQUENCE, as every gateway send) becomes the body's.
//!
//! Every message of a body is in the RMQ group named by the digest, so that RMQ's rule
//! for one content holds for one body: a send while the body's message is in flight adds a
//! new message that waits until that delivery ends. A new message also sweeps the two
//! entries seen live longest ago: one whose message is neither waiting nor in flight goes,
//! so the index holds about the queue's live bodies.

use sha2::{Digest, Sha256};

use crate::message;
use crate::rmq_kind::Place;

/// KEYS: N, park{N}, hold{N}, prepare{N}, the index, its ages. ARGV: the mode, its value, the
/// body's digest, the stored prefix, the message's JSON. Reply as RMQ.PUSH … SEQUENCE's, one
/// entry: `[outcome, sequence number or nil, the merged message's id or nil]`.
const SCRIPT: &str = r#"
local function waiting(c)
  return redis.call('ZSCORE', KEYS[1], c) or redis.call('ZSCORE', KEYS[2], c) or redis.call('ZSCORE', KEYS[3], c)
end
local digest = ARGV[3]
local old = redis.call('HGET', KEYS[5], digest)
if old and waiting(old) then
  if ARGV[1] == 'PRIORITY' then
    redis.call('RMQ.PUSH', KEYS[1], 'PRIORITY', ARGV[2], 'GROUP', digest, 'MESSAGES', old)
  end
  -- The stored JSON starts with the MessageId (crate::message::encode).
  return {{'merged', false, string.match(old, '^{"id":"([^"]*)"', #ARGV[4] + 22) or false}}
end
local r = redis.call('RMQ.PUSH', KEYS[1], ARGV[1], ARGV[2], 'GROUP', digest, 'SEQUENCE', ARGV[4], 'MESSAGES', ARGV[5])
local seq = r[1][2]
redis.call('HSET', KEYS[5], digest, ARGV[4] .. string.format('%020d', seq) .. ' ' .. ARGV[5])
redis.call('ZADD', KEYS[6], seq, digest)
for _, d in ipairs(redis.call('ZRANGE', KEYS[6], 0, 1)) do
  if d ~= digest then
    local c = redis.call('HGET', KEYS[5], d)
    if c and (waiting(c) or redis.call('ZSCORE', KEYS[4], c)) then
      redis.call('ZADD', KEYS[6], seq, d)
    else
      redis.call('HDEL', KEYS[5], d)
      redis.call('ZREM', KEYS[6], d)
    end
  end
end
return {{'added', seq, false}}
"#;

pub fn index_key(q: &str) -> String {
    format!("rmqgw:body{{{q}}}")
}
pub fn ages_key(q: &str) -> String {
    format!("rmqgw:bodyage{{{q}}}")
}

/// The gateway's keys of a queue's body index (which DeleteQueue removes).
pub fn keys(q: &str) -> [String; 2] {
    [index_key(q), ages_key(q)]
}

/// Adds the send of `json` (a stored message, crate::message::encode) with `body` at
/// `place` to `pipe`: one command whose reply reads as RMQ.PUSH … SEQUENCE's entry.
pub fn push(pipe: &mut redis::Pipeline, q: &str, place: Place, body: &str, json: &str) {
    let (mode, value) = place.mode();
    let digest = hex::encode(Sha256::digest(body.as_bytes()));
    pipe.cmd("EVAL").arg(SCRIPT).arg(6).arg(q);
    for p in ["park", "hold", "prepare"] {
        pipe.arg(format!("{p}{{{q}}}"));
    }
    pipe.arg(index_key(q)).arg(ages_key(q));
    pipe.arg(mode).arg(value).arg(digest).arg(message::PREFIX).arg(json);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_stored_json_starts_with_the_message_id() {
        // The script reads a merged message's id from there.
        let s = message::Stored {
            id: "4c1e".into(),
            body: "b".into(),
            attrs: BTreeMap::new(),
            sent: 1,
            sender: "k".into(),
            group: None,
            dedup: None,
            trace: None,
        };
        assert!(message::encode(&s).starts_with(r#"{"id":"4c1e","#));
        assert_eq!(keys("q"), ["rmqgw:body{q}".to_string(), "rmqgw:bodyage{q}".to_string()]);
    }
}
