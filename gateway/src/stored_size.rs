//! Room in the module for every message SQS would take. MaximumMessageSize counts what SQS
//! counts (body and message attributes), but the module's `max-message-bytes` applies to
//! the stored form (crate::message), which adds JSON escaping, base64, the MessageId, times
//! and sender: with the module's default of 1 MiB a message of SQS's largest size could not
//! be stored. A stored message is never longer than the request that sent it (its strings
//! escaped at most as JSON requests escape them, its binary values base64 as they arrive)
//! plus its own fields, so at start the gateway raises `max-message-bytes` on every primary
//! to the request limit plus room for those, when it is lower.

use crate::redis_backend::Conn;

/// `max-message-bytes` that holds any message the gateway stores from requests of at most
/// `max_body` bytes: that, plus room for the fields the gateway adds (sequence prefix,
/// MessageId, times, sender: a few hundred bytes).
pub fn needed(max_body: usize) -> i64 {
    max_body as i64 + 64 * 1024
}

const SETTING: &str = "rmq.max-message-bytes";

/// Raises the module's `max-message-bytes` to `needed` where it is lower; a server that
/// refuses (an ACL without CONFIG, a managed Redis) is named in a warning, and its
/// messages near MaximumMessageSize will be refused until its module is loaded with
/// `max-message-bytes` `needed` or more.
pub async fn make_room(conn: &mut Conn, needed: i64) {
    let nodes = match conn.primaries().await {
        Ok(n) => n,
        Err(e) => return tracing::warn!("cannot list the primaries to check {SETTING}: {e}"),
    };
    for node in nodes {
        if let Err(e) = raise(conn, &node, needed).await {
            tracing::warn!(
                "cannot make {SETTING} at least {needed} ({e}): messages near MaximumMessageSize will be refused; \
                 load the module with `max-message-bytes {needed}`"
            );
        }
    }
}

async fn raise(conn: &mut Conn, node: &crate::redis_backend::Node, needed: i64) -> redis::RedisResult<()> {
    let mut get = redis::cmd("CONFIG");
    get.arg("GET").arg(SETTING);
    let (_, current): (String, i64) = redis::from_redis_value(conn.on(node, get).await?)?;
    if current < needed {
        let mut set = redis::cmd("CONFIG");
        set.arg("SET").arg(SETTING).arg(needed);
        let _: () = redis::from_redis_value(conn.on(node, set).await?)?;
        eprintln!("rmq-gateway: raised the module's max-message-bytes from {current} to {needed} (room for a stored message of SQS's largest size)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{encode, Attribute, Stored, PREFIX};
    use std::collections::BTreeMap;

    #[test]
    fn the_largest_sqs_message_fits_even_all_escaped() {
        // SQS's largest size in characters JSON escapes (2 bytes each), with ten attributes
        // whose types are as long and as escaped as they may be (6 bytes a character).
        let attr = Attribute { data_type: format!("String.{}", "\u{1}".repeat(249)), string_value: Some("\"".into()), binary_value: None };
        let attrs: BTreeMap<String, Attribute> = (0..10).map(|i| (format!("{:0>256}", i), attr.clone())).collect();
        let s = Stored {
            id: uuid::Uuid::new_v4().to_string(),
            body: "\"".repeat(1_048_576),
            attrs,
            sent: i64::MAX,
            sender: "K".repeat(128),
            group: Some("g".repeat(128)),
            dedup: Some("d".repeat(128)),
            trace: Some("t".repeat(256)),
        };
        let stored = PREFIX.len() + 21 + encode(&s).len();
        assert!(stored as i64 <= needed(2 * 1024 * 1024), "{stored}");
    }
}
