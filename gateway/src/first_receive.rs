//! ApproximateFirstReceiveTimestamp: RMQ counts a message's deliveries but keeps no time of
//! the first, so the gateway does, in a hash of the queue's (crate::gateway_keys::first_receives:
//! MessageId, 32 hex digits → Unix ms): every receive sets it unless it is set (HSETNX) in
//! one round trip after the RMQ.POP, and reads it only when the receive asked for the
//! attribute and the record may be older than this receive. The receipt handle names the
//! message too, so DeleteMessage deletes the record with the delivery; PurgeQueue and
//! DeleteQueue delete them all. A message that dies (moved to its dead-letter queue) leaves
//! its record until then.

use redis::Value;

use crate::redis_backend::Conn;

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
/// one is recorded; with `wanted`, also the read of the record of each message delivered
/// before (for a first delivery HSETNX's reply says whether `now_ms` is its record).
/// `firsts` reads the replies.
pub fn record(pipe: &mut redis::Pipeline, q: &str, receipts: &[Receipt], now_ms: i64, wanted: bool) {
    let key = crate::gateway_keys::first_receives(q);
    for r in receipts {
        let field = field(&r.message);
        if !wanted {
            pipe.hset_nx(&key, &field, now_ms).ignore();
        } else if r.deliveries <= 1 {
            pipe.hset_nx(&key, &field, now_ms);
        } else {
            pipe.hset_nx(&key, &field, now_ms).ignore().hget(&key, &field);
        }
    }
}

/// Each message's first receive, in order, from `record`'s replies (with `wanted`); the
/// records that a first delivery found there already (a message moved back from its
/// dead-letter queue, say: rare) read in a second round trip on `conn`.
pub async fn firsts(conn: &mut Conn, q: &str, receipts: &[Receipt], replies: Vec<Value>, now_ms: i64) -> redis::RedisResult<Vec<i64>> {
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
    fn a_record_is_read_only_when_wanted_and_maybe_older() {
        let receipts = [receipt(1), receipt(2)];
        let (f1, f2) = (field(&receipts[0].message), field(&receipts[1].message));
        let key = crate::gateway_keys::first_receives("q");
        let mut unwanted = redis::pipe();
        record(&mut unwanted, "q", &receipts, 9, false);
        assert_eq!(commands(&unwanted), [format!("HSETNX {key} {f1} 9"), format!("HSETNX {key} {f2} 9")]);
        let mut wanted = redis::pipe();
        record(&mut wanted, "q", &receipts, 9, true);
        let (set1, set2) = (format!("HSETNX {key} {f1} 9"), format!("HSETNX {key} {f2} 9"));
        assert_eq!(commands(&wanted), [set1, set2, format!("HGET {key} {f2}")]);
    }

    #[test]
    fn times_from_the_replies() {
        let receipts = [receipt(1), receipt(1), receipt(2), receipt(3)];
        let replies = vec![Value::Int(1), Value::Int(0), Value::BulkString(b"4".to_vec()), Value::Nil];
        assert_eq!(from_replies(&receipts, replies, 9), [Some(9), None, Some(4), Some(9)]);
    }
}
