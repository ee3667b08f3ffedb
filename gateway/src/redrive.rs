//! Redrive: a queue's RedrivePolicy sets its RMQ `retries` (maxReceiveCount − 1), and every
//! gateway moves the messages that died in it (`dead{S}`) to the target queue, where they
//! are received like any other. The target may live in another cluster slot, so a move is
//! two steps, each on one queue: RMQ.REDRIVE S CLAIM takes a batch (out of `dead{S}` into
//! the module's `moving{S}`, with the claim time), then each claimed message is pushed to
//! the target and RMQ.REDRIVE S DONE drops its claim. A gateway that stops between the
//! steps leaves claims that any gateway's CLAIM takes again after `STALE_MS`; pushing the
//! same content twice while it waits merges (RMQ's content identity), so a retried move
//! adds no copy.
//! The sources are in `rmqgw:redrive` (a hash: source → target).

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::Value;

use crate::errors::{SqsError, SqsResult};
use crate::store::Backend;

pub const SOURCES: &str = "rmqgw:redrive";
/// How often each gateway looks for dead messages (moves happen within 1 s of a death).
const TICK: Duration = Duration::from_millis(250);
/// A claim older than this was left by a gateway that stopped mid-move.
const STALE_MS: i64 = 10_000;
const BATCH: usize = 100;
/// The `retries` of a queue without a redrive policy: SQS keeps redelivering such a
/// message, and 1000 is RMQ's largest.
pub const NO_REDRIVE_RETRIES: i64 = 1000;

/// A claimed message: its content, group and priority (RMQ.REDRIVE CLAIM's entries).
type Claimed = (Vec<u8>, Option<Vec<u8>>, Option<i64>);

/// A checked RedrivePolicy: the target queue and maxReceiveCount.
pub struct Policy {
    pub target: String,
    pub max_receive_count: i64,
}

/// Reads a RedrivePolicy value ("" removes the policy).
pub fn parse(value: &str) -> SqsResult<Option<Policy>> {
    if value.is_empty() {
        return Ok(None);
    }
    let invalid = |why: &str| SqsError::invalid_attribute_value(format!("Invalid value for the parameter RedrivePolicy. Reason: {why}"));
    let v: Value = serde_json::from_str(value).map_err(|_| invalid("it is not JSON"))?;
    let arn = v.get("deadLetterTargetArn").and_then(Value::as_str).ok_or_else(|| invalid("deadLetterTargetArn is missing"))?;
    let max = match v.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .filter(|n| (1..=1000).contains(n))
    .ok_or_else(|| invalid("maxReceiveCount must be an integer from 1 to 1000"))?;
    let target = arn.rsplit(':').next().unwrap_or("");
    if !arn.starts_with("arn:") || !crate::input::valid_queue_name(target) {
        return Err(invalid("deadLetterTargetArn is not a queue ARN"));
    }
    Ok(Some(Policy { target: target.to_string(), max_receive_count: max }))
}

/// Moves dead messages of every source to its target, forever (one task per gateway).
pub fn spawn(backend: Arc<Backend>, stopping: tokio::sync::watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = crate::server::stopped(stopping.clone()) => return,
            }
            if let Err(e) = move_all(&backend).await {
                tracing::warn!("redrive: {e}");
            }
        }
    });
}

async fn move_all(backend: &Backend) -> redis::RedisResult<()> {
    let mut conn = backend.conn.clone();
    let sources: Vec<(String, String)> = conn.hgetall(SOURCES).await?;
    for (source, target) in sources {
        // Nothing is pushed into a deleted queue: the dead stay in the source until a
        // target of the name exists again.
        let exists: bool = conn.exists(crate::store::meta_key(&target)).await?;
        if !exists {
            continue;
        }
        let claimed: Vec<Claimed> = redis::cmd("RMQ.REDRIVE")
            .arg(&source)
            .arg("CLAIM")
            .arg("COUNT")
            .arg(BATCH)
            .arg("STALE")
            .arg(STALE_MS)
            .query_async(&mut conn)
            .await?;
        if claimed.is_empty() {
            continue;
        }
        for (raw, group, _) in claimed {
            let mut push = redis::cmd("RMQ.PUSH");
            push.arg(&target).arg("DELAY").arg(0);
            if let Some(g) = group {
                push.arg("GROUP").arg(g);
            }
            // MESSAGES: a foreign message spelt like an option is still a message.
            let _: i64 = push.arg("MESSAGES").arg(raw.as_slice()).query_async(&mut conn).await?;
            let _: i64 = redis::cmd("RMQ.REDRIVE").arg(&source).arg("DONE").arg(raw.as_slice()).query_async(&mut conn).await?;
        }
    }
    Ok(())
}
