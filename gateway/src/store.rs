//! The Redis side: connections (one multiplexed connection for short commands, a bounded
//! pool of dedicated ones for long polls, per Redis user) and the scripts that keep each
//! action atomic on the server. Every key of queue `N` is tagged `{N}`:
//! `rmqgw:q{N}` (attributes, hash), `rmqgw:t{N}` (tags, hash), `rmqgw:s{N}` (sequence),
//! `rmqgw:r{N}` (the delivery a receipt handle may end, per message: count and lease deadline), `rmqgw:d{N}:<id>`
//! (FIFO deduplication, 5 minutes).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Script};
use tokio::sync::Semaphore;

/// Long polls open at once (each holds a Redis connection while it waits).
pub const MAX_LONG_POLLS: usize = 10_000;

pub fn meta_key(q: &str) -> String {
    format!("rmqgw:q{{{q}}}")
}
pub fn tags_key(q: &str) -> String {
    format!("rmqgw:t{{{q}}}")
}
pub fn seq_key(q: &str) -> String {
    format!("rmqgw:s{{{q}}}")
}
pub fn records_key(q: &str) -> String {
    format!("rmqgw:r{{{q}}}")
}
pub fn prepare_key(q: &str) -> String {
    format!("prepare{{{q}}}")
}
pub fn dedup_key(q: &str, id: &str) -> String {
    use sha2::Digest;
    format!("rmqgw:d{{{q}}}:{}", hex::encode(sha2::Sha256::digest(id.as_bytes())))
}
/// The RMQ module's own keys of a queue, which DeleteQueue and PurgeQueue remove.
pub fn rmq_keys(q: &str) -> Vec<String> {
    let mut keys = vec![q.to_string()];
    keys.extend(["prepare", "dead", "meta", "park", "parkidx", "hold"].iter().map(|p| format!("{p}{{{q}}}")));
    keys
}

/// Sends one message per entry (ARGV: delay ms, group or "", dedup flag, JSON; KEYS: the
/// queue, its sequence key, then one deduplication key per entry). A FIFO entry whose
/// deduplication key is set is accepted and not pushed; its reply is the first send's
/// "seq id". Otherwise the reply is the new sequence number.
pub static SEND: &str = r#"
local out = {}
for i = 0, (#ARGV / 4) - 1 do
  local delay, group, dedup, json = ARGV[i*4+1], ARGV[i*4+2], ARGV[i*4+3], ARGV[i*4+4]
  local dkey = KEYS[3 + i]
  local seen = false
  if dedup == '1' then
    local prior = redis.call('GET', dkey)
    if prior then out[#out+1] = prior; seen = true end
  end
  if not seen then
    local seq = redis.call('INCR', KEYS[2])
    local raw = string.format('rmqgw1 %020d ', seq) .. json
    if group ~= '' then
      redis.call('RMQ.PUSH', KEYS[1], 'DELAY', delay, 'GROUP', group, raw)
    else
      redis.call('RMQ.PUSH', KEYS[1], 'DELAY', delay, raw)
    end
    if dedup == '1' then
      redis.call('SET', dkey, seq .. ' ' .. cjson.decode(json).id, 'PX', 300000)
    end
    out[#out+1] = tostring(seq)
  end
end
return out
"#;

// A delivery is recorded as "<delivery count>:<lease deadline>" (the deadline as
// `prepare{N}` holds it). The count tells a delivery from the message's later ones; the
// deadline closes the gap between a blocking POP and its record: until the new delivery is
// recorded, the old record's deadline (long past) no longer matches `prepare{N}`.

/// Takes up to ARGV[1] messages under a lease of ARGV[2] ms and records each delivery as
/// the one its receipt handle may end.
pub static RECEIVE: &str = r#"
local got = redis.call('RMQ.POP', KEYS[1], 'COUNT', ARGV[1], 'LEASE', ARGV[2])
if not got then return {} end
for _, e in ipairs(got) do
  local deadline = redis.call('ZSCORE', KEYS[3], e[1])
  redis.call('HSET', KEYS[2], redis.sha1hex(e[1]), e[2] .. ':' .. deadline)
end
return got
"#;

/// Records deliveries taken by a blocking POP (ARGV: message, count, …), those still in
/// flight.
pub static RECORD: &str = r#"
for i = 1, #ARGV, 2 do
  local deadline = redis.call('ZSCORE', KEYS[3], ARGV[i])
  if deadline then
    redis.call('HSET', KEYS[2], redis.sha1hex(ARGV[i]), ARGV[i+1] .. ':' .. deadline)
  end
end
return #ARGV / 2
"#;

/// Ends the named deliveries (ARGV: message, delivery count, …), each only if it is the
/// message's current one: a stale receipt handle ends nothing. Reply: 1 ended / 0 not, per
/// delivery.
pub static DELETE: &str = r#"
local out = {}
for i = 1, #ARGV, 2 do
  local f = redis.sha1hex(ARGV[i])
  local deadline = redis.call('ZSCORE', KEYS[3], ARGV[i])
  if deadline and redis.call('HGET', KEYS[2], f) == ARGV[i+1] .. ':' .. deadline then
    redis.call('HDEL', KEYS[2], f)
    out[#out+1] = redis.call('RMQ.ACK', KEYS[1], ARGV[i])
  else
    out[#out+1] = 0
  end
end
return out
"#;

/// Sets the named delivery's visibility (ARGV: message, delivery count, ms): ms > 0 extends
/// its lease (and its record), 0 makes it visible now. Reply: 1, or 0 when that delivery is
/// not in flight.
pub static VISIBILITY: &str = r#"
local f = redis.sha1hex(ARGV[1])
local deadline = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not deadline or redis.call('HGET', KEYS[2], f) ~= ARGV[2] .. ':' .. deadline then return 0 end
if ARGV[3] == '0' then
  redis.call('RMQ.NACK', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], f)
  return 1
end
redis.call('RMQ.EXTEND', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], f, ARGV[2] .. ':' .. redis.call('ZSCORE', KEYS[3], ARGV[1]))
return 1
"#;

/// Durable mode (`--durable`): writes wait for this many replicas, at most this long.
#[derive(Clone, Copy, Debug)]
pub struct Durable {
    pub replicas: u32,
    pub timeout_ms: u64,
}

/// The connections of one Redis user (or of the URL's).
pub struct Backend {
    client: Client,
    pub durable: Option<Durable>,
    pub conn: ConnectionManager,
    idle: Mutex<Vec<MultiplexedConnection>>,
    polls: Semaphore,
    pub send: Script,
    pub receive: Script,
    pub record: Script,
    pub delete: Script,
    pub visibility: Script,
}

impl Backend {
    pub async fn connect(url: &str, user: Option<&(String, String)>, durable: Option<Durable>) -> redis::RedisResult<Arc<Backend>> {
        let mut client = Client::open(url)?;
        if let Some((u, p)) = user {
            let info = client.get_connection_info().clone();
            let settings = info.redis_settings().clone().set_username(u).set_password(p);
            client = Client::open(info.set_redis_settings(settings))?;
        }
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(5)));
        let conn = ConnectionManager::new_with_config(client.clone(), config).await?;
        Ok(Arc::new(Backend {
            client,
            durable,
            conn,
            idle: Mutex::new(Vec::new()),
            polls: Semaphore::new(MAX_LONG_POLLS),
            send: Script::new(SEND),
            receive: Script::new(RECEIVE),
            record: Script::new(RECORD),
            delete: Script::new(DELETE),
            visibility: Script::new(VISIBILITY),
        }))
    }

    /// A dedicated connection for one long poll (returned with `give_back`), or `None` when
    /// the gateway already holds as many long polls as it allows.
    pub async fn poll_connection(&self) -> redis::RedisResult<Option<(MultiplexedConnection, tokio::sync::SemaphorePermit<'_>)>> {
        let Ok(permit) = self.polls.try_acquire() else { return Ok(None) };
        let pooled = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match pooled {
            Some(c) => c,
            None => {
                // The wait is bounded by BLOCK itself (at most 20 s); no client-side timeout.
                let config = AsyncConnectionConfig::new().set_response_timeout(None).set_connection_timeout(Some(Duration::from_secs(5)));
                self.client.get_multiplexed_async_connection_with_config(&config).await?
            }
        };
        Ok(Some((conn, permit)))
    }

    pub fn give_back(&self, conn: MultiplexedConnection) {
        if let Ok(mut v) = self.idle.lock() {
            v.push(conn);
        }
    }

    pub fn open_polls(&self) -> usize {
        MAX_LONG_POLLS - self.polls.available_permits()
    }
}
