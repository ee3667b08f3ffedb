//! ApproximateFirstReceiveTimestamp: RMQ counts a message's deliveries but keeps no time of
//! the first, so the gateway does, in a hash of the queue's (crate::gateway_keys::first_receives:
//! MessageId, 32 hex digits → Unix ms), set by a receive unless it is set (HSETNX). A receive
//! that asks for the attribute writes the records in one round trip after its RMQ.POP and
//! reads them when they may be older than this receive; one that does not leaves them to
//! `Pending`, written a few ms later with every other receive's. The receipt handle names the
//! message too, so DeleteMessage deletes the record with the delivery; PurgeQueue and
//! DeleteQueue delete them all. A message that dies (moved to its dead-letter queue) leaves
//! its record until then, and so does one deleted through another gateway before the
//! receiving gateway wrote its record.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

use redis::Value;

pub fn field(message: &uuid::Uuid) -> String {
    message.simple().to_string()
}

/// A received message, as its record needs it.
pub struct Receipt {
    pub message: uuid::Uuid,
    /// Its delivery count (RMQ.POP's).
    pub deliveries: i64,
}

/// Adds to `pipe` the commands that record `now_ms` as each message's first receive unless
/// one is recorded, and read the record of each message delivered before (for a first
/// delivery HSETNX's reply says whether `now_ms` is its record). `firsts` reads the replies.
pub fn record(pipe: &mut redis::Pipeline, q: &str, receipts: &[Receipt], now_ms: i64) {
    let key = crate::gateway_keys::first_receives(q);
    for r in receipts {
        let field = field(&r.message);
        if r.deliveries <= 1 {
            pipe.hset_nx(&key, &field, now_ms);
        } else {
            pipe.hset_nx(&key, &field, now_ms).ignore().hget(&key, &field);
        }
    }
}

/// Each message's first receive, in order, from `record`'s replies (with `wanted`); the
/// records that a first delivery found there already (a message moved back from its
/// dead-letter queue, say: rare) read in a second round trip on `conn`.
pub async fn firsts(
    conn: &mut impl redis::aio::ConnectionLike,
    q: &str,
    receipts: &[Receipt],
    replies: Vec<Value>,
    now_ms: i64,
) -> redis::RedisResult<Vec<i64>> {
    let mut firsts = from_replies(receipts, replies, now_ms);
    let older: Vec<usize> = (0..firsts.len()).filter(|i| firsts[*i].is_none()).collect();
    if !older.is_empty() {
        let mut pipe = redis::pipe();
        for i in &older {
            pipe.hget(crate::gateway_keys::first_receives(q), field(&receipts[*i].message));
        }
        let records: Vec<Option<String>> = pipe.query_async(conn).await?;
        for (i, r) in older.into_iter().zip(records) {
            firsts[i] = Some(first(r, now_ms));
        }
    }
    Ok(firsts.into_iter().map(|f| f.unwrap_or(now_ms)).collect())
}

/// `record`'s replies read: a time, or `None` for a first delivery whose record was there.
fn from_replies(receipts: &[Receipt], replies: Vec<Value>, now_ms: i64) -> Vec<Option<i64>> {
    receipts
        .iter()
        .zip(replies)
        .map(|(r, reply)| match (r.deliveries <= 1, reply) {
            (true, Value::Int(0)) => None,
            (true, _) => Some(now_ms),
            (false, record) => Some(first(redis::from_redis_value(record).ok().flatten(), now_ms)),
        })
        .collect()
}

/// The first receive's time from a read record.
fn first(reply: Option<String>, now_ms: i64) -> i64 {
    reply.and_then(|r| r.parse().ok()).unwrap_or(now_ms)
}

/// First receives not yet written. A receive that does not ask for the attribute leaves its
/// records here rather than writing them in a round trip after its RMQ.POP; a writer task
/// writes all of them a few ms later (WINDOW), one pipeline per queue. A delivery deleted
/// before that takes its record out unwritten, so it costs Redis nothing.
#[derive(Default)]
pub struct Pending {
    /// Queue → MessageId field → first receive (Unix ms).
    records: Mutex<HashMap<String, HashMap<String, i64>>>,
    /// Held from taking records until they are written, and by whoever must come after them:
    /// a delete's HDEL must not overtake the HSETNX it undoes.
    order: tokio::sync::Mutex<()>,
    wake: Notify,
}

/// How long a record waits to be written with the others: one round trip for every receive
/// of this long, and a receive's record lost if the gateway is killed (not stopped) in it.
pub const WINDOW: Duration = Duration::from_millis(5);

impl Pending {
    /// Leaves `receipts`' records to be written (each unless one is recorded, as HSETNX).
    pub fn add(&self, q: &str, receipts: &[Receipt], now_ms: i64) {
        if let Ok(mut records) = self.records.lock() {
            let fields = records.entry(q.to_string()).or_default();
            for r in receipts {
                fields.entry(field(&r.message)).or_insert(now_ms);
            }
        }
        self.wake.notify_one();
    }

    /// Until a record is left (or at once if one was left since the last call).
    pub async fn left(&self) {
        self.wake.notified().await
    }

    /// Holds the records' order: while held, nothing taken is still being written, and nothing
    /// is written that the holder takes out (a receive that writes this queue's records
    /// ahead of its own, a delete, a purge).
    pub async fn ordered(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.order.lock().await
    }

    /// Queue `q`'s records, taken out (with `ordered` held).
    pub fn take(&self, q: &str) -> HashMap<String, i64> {
        self.records.lock().ok().and_then(|mut r| r.remove(q)).unwrap_or_default()
    }

    /// Of a delete's record `fields`, those written (to be deleted); the others are taken out
    /// unwritten (with `ordered` held).
    pub fn unwritten_out(&self, q: &str, fields: Vec<String>) -> Vec<String> {
        let Ok(mut records) = self.records.lock() else { return fields };
        let Some(pending) = records.get_mut(q) else { return fields };
        let written = fields.into_iter().filter(|f| pending.remove(f).is_none()).collect();
        if pending.is_empty() {
            records.remove(q);
        }
        written
    }

    /// Writes every record left, one pipeline per queue (its keys are in one slot), at once.
    /// Records Redis did not take are lost: the attribute is approximate, and the message's
    /// next receive records its own time.
    pub async fn write<C: redis::aio::ConnectionLike + Clone>(&self, conn: &C) {
        let _order = self.ordered().await;
        let taken = self.records.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
        let writes = taken.into_iter().map(|(q, fields)| {
            let key = crate::gateway_keys::first_receives(&q);
            let mut pipe = redis::pipe();
            for (f, ms) in fields {
                pipe.hset_nx(&key, f, ms).ignore();
            }
            let mut conn = conn.clone();
            async move { pipe.query_async::<()>(&mut conn).await }
        });
        let _ = futures_util::future::join_all(writes).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_replies() {
        let id = uuid::Uuid::from_bytes([7; 16]);
        assert_eq!(field(&id), "07070707070707070707070707070707");
        assert_eq!(first(None, 5), 5);
        assert_eq!(first(Some("3".into()), 5), 3);
        assert_eq!(first(Some("garbled".into()), 5), 5);
    }

    fn receipt(deliveries: i64) -> Receipt {
        Receipt { message: uuid::Uuid::from_bytes([deliveries as u8; 16]), deliveries }
    }

    fn commands(pipe: &redis::Pipeline) -> Vec<String> {
        pipe.cmd_iter()
            .map(|c| {
                c.args_iter()
                    .map(|a| match a {
                        redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                        _ => "<not simple>".into(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn a_record_is_read_only_when_maybe_older() {
        let receipts = [receipt(1), receipt(2)];
        let (f1, f2) = (field(&receipts[0].message), field(&receipts[1].message));
        let key = crate::gateway_keys::first_receives("q");
        let mut pipe = redis::pipe();
        record(&mut pipe, "q", &receipts, 9);
        let (set1, set2) = (format!("HSETNX {key} {f1} 9"), format!("HSETNX {key} {f2} 9"));
        assert_eq!(commands(&pipe), [set1, set2, format!("HGET {key} {f2}")]);
    }

    #[test]
    fn pending_records_keep_the_first_time_and_leave_unwritten_with_their_delete() {
        let p = Pending::default();
        let (fa, fb) = (field(&receipt(1).message), field(&receipt(2).message));
        p.add("q", &[receipt(1)], 5);
        p.add("q", &[receipt(1), receipt(2)], 7);
        p.add("other", &[receipt(1)], 8);
        assert_eq!(p.unwritten_out("q", vec![fa.clone(), "written".into()]), ["written"]);
        assert_eq!(p.take("q"), HashMap::from([(fb.clone(), 7)]));
        assert_eq!(p.take("q"), HashMap::new());
        assert_eq!(p.unwritten_out("q", vec![fa.clone()]), std::slice::from_ref(&fa));
        p.add("q", &[receipt(2)], 9);
        assert_eq!(p.unwritten_out("q", vec![fb.clone()]), Vec::<String>::new());
        assert!(p.records.lock().is_ok_and(|r| !r.contains_key("q")), "a queue with nothing left is forgotten");
        assert_eq!(p.take("other"), HashMap::from([(fa, 8)]));
    }

    #[test]
    fn times_from_the_replies() {
        let receipts = [receipt(1), receipt(1), receipt(2), receipt(3)];
        let replies = vec![Value::Int(1), Value::Int(0), Value::BulkString(b"4".to_vec()), Value::Nil];
        assert_eq!(from_replies(&receipts, replies, 9), [Some(9), None, Some(4), Some(9)]);
    }
}
