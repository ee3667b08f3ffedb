//! The RMQ module's commands as the gateway sends them: the one place that spells them
//! (the layout test, crate::layout_tests, holds it so). Commands of one request are added
//! to its pipeline (`pipe_*`), or built and sent (`cmd_*`, and the async functions), and
//! every write that changes a queue goes through `write`, the durable write path.

use std::collections::HashMap;

use redis::Value;
use sha2::{Digest, Sha256};

use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::message;
use crate::redis_backend::{Backend, Conn};
use crate::rmq_kind::Place;

/// A delivery as `RMQ.POP ... IDS` replies it: the stored message, its delivery count and
/// its id.
pub type Delivery = (Vec<u8>, i64, u64);

/// What RMQ.PUSH with SEQUENCE answers per message: outcome, sequence number, and for a
/// duplicate the first send's NOTE (its MessageId).
pub type Pushed = (String, Option<u64>, Option<String>);

/// A claimed message: its content, group and priority (RMQ.REDRIVE CLAIM's entries).
pub type Claimed = (Vec<u8>, Option<Vec<u8>>, Option<i64>);

/// A gateway send: RMQ.PUSH at `place`, numbered (SEQUENCE, with the stored format's
/// prefix), in `group`, deduplicated within `dedup`'s window (its id, the window in ms, and
/// the MessageId as its NOTE): the messages `json`, each numbered.
pub struct Send<'a> {
    pub place: Place,
    pub group: Option<&'a str>,
    pub dedup: Option<(&'a str, i64, &'a str)>,
    pub json: &'a [String],
}

pub fn pipe_push(pipe: &mut redis::Pipeline, q: &str, s: &Send) {
    let (mode, value) = s.place.mode();
    pipe.cmd("RMQ.PUSH").arg(q).arg(mode).arg(value);
    if let Some(g) = s.group {
        pipe.arg("GROUP").arg(g);
    }
    pipe.arg("SEQUENCE").arg(message::PREFIX);
    if let Some((id, window, note)) = s.dedup {
        pipe.arg("DEDUP").arg(id).arg(window).arg("NOTE").arg(note);
    }
    pipe.arg("MESSAGES").arg(s.json);
}

/// Sends into priority and range queues (crate::rmq_kind), which merge by body as RMQ.PUSH
/// merges by content. A gateway message is stored with its MessageId and attributes, so two
/// sends of one body are two RMQ contents; the gateway keeps an index of the queue's bodies
/// (crate::gateway_keys: the body's SHA-256, hex → the stored message; digest → the push
/// number it was last seen live at) and one script per send decides atomically:
/// - the body's message is waiting (in `N`, `park{N}` or `hold{N}`): nothing is added; a
///   priority queue's send pushes that message again, which sets its priority (latest
///   wins), and the send answers its MessageId;
/// - else a new message (RMQ.PUSH with SEQUENCE, as every gateway send) becomes the body's.
///
/// Every message of a body is in the RMQ group named by the digest, so that RMQ's rule
/// for one content holds for one body: a send while the body's message is in flight adds a
/// new message that waits until that delivery ends. A new message also sweeps the two
/// entries seen live longest ago: one whose message is neither waiting nor in flight goes,
/// so the index holds about the queue's live bodies.
///
/// KEYS: N, park{N}, hold{N}, prepare{N}, the index, its ages. ARGV: the mode, its value, the
/// body's digest, the stored prefix, the message's JSON. Reply as RMQ.PUSH … SEQUENCE's, one
/// entry: `[outcome, sequence number or nil, the merged message's id or nil]`.
const MERGING_PUSH: &str = r#"
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

/// Adds the send of `json` (a stored message, crate::message::encode) with `body` at
/// `place` to `pipe`, merging by body (MERGING_PUSH): one command whose reply reads as
/// RMQ.PUSH … SEQUENCE's entry.
pub fn pipe_merging_push(pipe: &mut redis::Pipeline, q: &str, place: Place, body: &str, json: &str) {
    let (mode, value) = place.mode();
    let digest = hex::encode(Sha256::digest(body.as_bytes()));
    pipe.cmd("EVAL").arg(MERGING_PUSH).arg(6).arg(q);
    for p in ["park", "hold", "prepare"] {
        pipe.arg(format!("{p}{{{q}}}"));
    }
    pipe.arg(keys::body_index(q)).arg(keys::body_ages(q));
    pipe.arg(mode).arg(value).arg(digest).arg(message::PREFIX).arg(json);
}

/// A message moved as it is (a move task's, a redrive's): RMQ.PUSH now, in its group.
/// MESSAGES: a foreign message spelt like an option is still a message.
pub async fn push_moved(conn: &mut Conn, q: &str, group: Option<&[u8]>, raw: &[u8]) -> redis::RedisResult<i64> {
    let mut push = redis::cmd("RMQ.PUSH");
    push.arg(q).arg("DELAY").arg(0);
    if let Some(g) = group {
        push.arg("GROUP").arg(g);
    }
    push.arg("MESSAGES").arg(raw).query_async(conn).await
}

/// RMQ.POP of up to `count` messages under a lease of `lease_ms`, waiting up to `block_ms`
/// for one, naming each delivery (IDS).
pub fn cmd_pop_ids(q: &str, count: i64, lease_ms: i64, block_ms: Option<u64>) -> redis::Cmd {
    let mut pop = redis::cmd("RMQ.POP");
    pop.arg(q).arg("COUNT").arg(count).arg("LEASE").arg(lease_ms);
    if let Some(b) = block_ms {
        pop.arg("BLOCK").arg(b);
    }
    pop.arg("IDS");
    pop
}

/// RMQ.POP of up to `count` messages under a lease of `lease_ms` (a move task's).
pub async fn pop(conn: &mut Conn, q: &str, count: i64, lease_ms: i64) -> redis::RedisResult<Option<Vec<(Vec<u8>, i64)>>> {
    redis::cmd("RMQ.POP").arg(q).arg("COUNT").arg(count).arg("LEASE").arg(lease_ms).query_async(conn).await
}

/// RMQ.ACK of a message taken by `pop`.
pub async fn ack(conn: &mut Conn, q: &str, raw: &[u8]) -> redis::RedisResult<i64> {
    redis::cmd("RMQ.ACK").arg(q).arg(raw).query_async(conn).await
}

/// Ends the deliveries `ids` (RMQ.ACKID): one reply, how many ended.
pub fn pipe_ack_ids(pipe: &mut redis::Pipeline, q: &str, ids: Vec<u64>) {
    pipe.cmd("RMQ.ACKID").arg(q).arg(ids);
}

/// Makes delivery `id`'s message visible again now (RMQ.NACKID), its reply ignored.
pub fn pipe_nack_id(pipe: &mut redis::Pipeline, q: &str, id: u64) {
    pipe.cmd("RMQ.NACKID").arg(q).arg(id).ignore();
}

/// Sets delivery `id`'s visibility: a timeout > 0 extends its lease (RMQ.EXTENDID), 0
/// makes it visible now (RMQ.NACKID). Nil when that delivery has ended.
pub fn cmd_change_visibility(q: &str, id: u64, timeout_s: i64) -> redis::Cmd {
    let mut cmd = redis::cmd(if timeout_s == 0 { "RMQ.NACKID" } else { "RMQ.EXTENDID" });
    cmd.arg(q).arg(id);
    if timeout_s > 0 {
        cmd.arg(timeout_s * 1000);
    }
    cmd
}

/// Every key the module keeps for the queue (messages, policy, schedules, sequence,
/// deduplication, journal) goes (RMQ.DROP), its reply ignored.
pub fn pipe_drop(pipe: &mut redis::Pipeline, q: &str) {
    pipe.cmd("RMQ.DROP").arg(q).ignore();
}

/// Every message goes, in flight and dead (awaiting its redrive) too; the queue's policy,
/// sequence and deduplication windows stay (RMQ.PURGE ... DEAD), its reply ignored.
pub fn pipe_purge(pipe: &mut redis::Pipeline, q: &str) {
    pipe.cmd("RMQ.PURGE").arg(q).arg("DEAD").ignore();
}

/// The queue's module policy: its `retries` (RMQ.POLICY SET), the reply ignored.
pub fn pipe_set_retries(pipe: &mut redis::Pipeline, q: &str, retries: i64) {
    pipe.cmd("RMQ.POLICY").arg(q).arg("SET").arg("retries").arg(retries).ignore();
}

/// The RMQ queues whose names start with `prefix` that the connection's Redis user may
/// read (RMQ.QUEUES, which leaves out the others and keeps its names in memory, so the
/// cost follows the number of queues, not of keys; on a cluster, on every primary).
pub async fn queues(conn: &mut Conn, prefix: &str) -> redis::RedisResult<Vec<String>> {
    let pattern = glob_escape(prefix) + "*";
    let mut names = Vec::new();
    for node in conn.primaries().await? {
        let mut cursor = "0".to_string();
        loop {
            let mut cmd = redis::cmd("RMQ.QUEUES");
            cmd.arg("MATCH").arg(&pattern).arg("COUNT").arg(1000).arg("CURSOR").arg(&cursor);
            let (next, batch): (String, Vec<String>) = redis::from_redis_value(conn.on(&node, cmd).await?)?;
            names.extend(batch);
            if next == "0" {
                break;
            }
            cursor = next;
        }
    }
    Ok(names)
}

/// `s` as a glob (SCAN MATCH rules) that matches only itself.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// RMQ.INFO's integer fields.
pub async fn info(conn: &mut Conn, q: &str) -> redis::RedisResult<HashMap<String, i64>> {
    let info: Vec<Value> = redis::cmd("RMQ.INFO").arg(q).query_async(conn).await?;
    Ok(info
        .chunks(2)
        .filter_map(|p| match (&p[0], p.get(1)) {
            (Value::BulkString(k), Some(Value::Int(v))) => Some((String::from_utf8_lossy(k).into_owned(), *v)),
            _ => None,
        })
        .collect())
}

/// Claims up to `count` of the queue's dead messages, and those claimed longer than
/// `stale_ms` ago (RMQ.REDRIVE CLAIM).
pub async fn redrive_claim(conn: &mut Conn, q: &str, count: usize, stale_ms: i64) -> redis::RedisResult<Vec<Claimed>> {
    redis::cmd("RMQ.REDRIVE").arg(q).arg("CLAIM").arg("COUNT").arg(count).arg("STALE").arg(stale_ms).query_async(conn).await
}

/// Drops the claim of a message moved (RMQ.REDRIVE DONE).
pub async fn redrive_done(conn: &mut Conn, q: &str, raw: &[u8]) -> redis::RedisResult<i64> {
    redis::cmd("RMQ.REDRIVE").arg(q).arg("DONE").arg(raw).query_async(conn).await
}

/// The command whose presence says the server has the RMQ module.
pub const PROBE: &str = "RMQ.PUSH";

/// Whether the server knows RMQ's commands: COMMAND INFO answers nil for one it does not.
pub fn cmd_module_check() -> redis::Cmd {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("INFO").arg(PROBE);
    cmd
}

/// Runs a pipeline of commands that change queue `queue` (one round trip); the commands'
/// replies. In durable mode (`--durable N`) a WAIT follows in the same pipeline, on a
/// dedicated connection to the queue's primary, so it covers the commands' writes; fewer than N
/// replicas confirming in time is a 503 the SDKs retry (`done` says what the primary holds
/// already: a retried SendMessage of a standard queue stores a second copy).
pub async fn write<T: redis::FromRedisValue>(backend: &Backend, queue: &str, mut pipe: redis::Pipeline, done: &str) -> SqsResult<Vec<T>> {
    let Some(d) = backend.durable else {
        // To the queue's primary, the whole pipeline (a send's check must follow its pushes).
        return Ok(backend.conn.clone().query_on_owner(queue, &pipe).await?);
    };
    pipe.cmd("WAIT").arg(d.replicas).arg(d.timeout_ms);
    // On a dedicated connection: a WAIT holds up whatever follows it on its connection.
    let Some(mut conn) = backend.dedicated(std::time::Duration::from_millis(d.timeout_ms)).await? else {
        return Err(SqsError::service_unavailable("too many writes are waiting for replicas; retry"));
    };
    let mut replies: Vec<Value> = conn.conn().query_on_owner(queue, &pipe).await?;
    conn.give_back();
    let confirmed = replies.pop().map(redis::from_redis_value::<u32>).transpose().map_err(redis::RedisError::from)?;
    let confirmed = confirmed.unwrap_or(0);
    if confirmed < d.replicas {
        return Err(SqsError::service_unavailable(format!(
            "{done} on the primary but only {confirmed} of {} replicas confirmed within {} ms; retry",
            d.replicas, d.timeout_ms
        )));
    }
    Ok(replies.into_iter().map(redis::from_redis_value).collect::<Result<_, _>>().map_err(redis::RedisError::from)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_stored_json_starts_with_the_message_id() {
        // The merging script reads a merged message's id from there.
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
    }

    fn args(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<not simple>".into(),
            })
            .collect()
    }

    #[test]
    fn commands_as_rmq_reads_them() {
        assert_eq!(args(&cmd_pop_ids("q", 3, 1000, None)), ["RMQ.POP", "q", "COUNT", "3", "LEASE", "1000", "IDS"]);
        assert_eq!(args(&cmd_pop_ids("q", 1, 1, Some(250))), ["RMQ.POP", "q", "COUNT", "1", "LEASE", "1", "BLOCK", "250", "IDS"]);
        assert_eq!(args(&cmd_change_visibility("q", 7, 0)), ["RMQ.NACKID", "q", "7"]);
        assert_eq!(args(&cmd_change_visibility("q", 7, 30)), ["RMQ.EXTENDID", "q", "7", "30000"]);
    }

    #[test]
    fn a_prefix_globs_only_itself() {
        assert_eq!(glob_escape("a*b?[c]\\d-e_f.fifo"), "a\\*b\\?\\[c\\]\\\\d-e_f.fifo");
    }
}
