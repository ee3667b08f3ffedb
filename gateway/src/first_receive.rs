//! ApproximateFirstReceiveTimestamp: RMQ counts a message's deliveries but keeps no time of
//! the first, so the gateway does, in a hash of the queue's (crate::gateway_keys::first_receives:
//! MessageId, 32 hex digits → Unix ms): the first receive sets it (HSETNX) and every receive reads it in the same
//! round trip. The receipt handle names the message too, so DeleteMessage deletes the
//! record with the delivery; PurgeQueue and DeleteQueue delete them all. A message that
//! dies (moved to its dead-letter queue) leaves its record until then.

pub fn field(message: &uuid::Uuid) -> String {
    message.simple().to_string()
}

/// Adds to `pipe` the commands that record `now_ms` as the message's first receive unless
/// one is recorded, and read the record: one reply, the first receive's time.
pub fn record(pipe: &mut redis::Pipeline, q: &str, message: &uuid::Uuid, now_ms: i64) {
    let (key, field) = (crate::gateway_keys::first_receives(q), field(message));
    pipe.hset_nx(&key, &field, now_ms).ignore().hget(&key, &field);
}

/// The first receive's time from `record`'s reply.
pub fn first(reply: Option<String>, now_ms: i64) -> i64 {
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
}
