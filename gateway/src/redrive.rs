//! Redrive: a queue's RedrivePolicy sets its RMQ `retries` (maxReceiveCount − 1), and every
//! gateway moves the messages that died in it (`dead{S}`) to the target queue, where they
//! are received like any other. The target may live in another cluster slot, so a move is
//! two steps, each on one queue: a claim takes a batch (out of `dead{S}` into the module's
//! `moving{S}`, with the claim time), then each claimed message is pushed to the target and
//! its claim dropped (crate::rmq_client::redrive_claim, redrive_done). A gateway that stops between the
//! steps leaves claims that any gateway's CLAIM takes again after `STALE_MS`; pushing the
//! same content twice while it waits merges (RMQ's content identity), so a retried move
//! adds no copy.
//! The sources are in one hash, source → target (crate::gateway_keys::REDRIVE_SOURCES).

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use crate::gateway_keys::REDRIVE_SOURCES as SOURCES;
use crate::redis_backend::Backend;
use crate::rmq_client;

/// How often each gateway looks for dead messages (moves happen within 1 s of a death).
const TICK: Duration = Duration::from_millis(250);
/// A claim older than this was left by a gateway that stopped mid-move.
const STALE_MS: i64 = 10_000;
const BATCH: usize = 100;
/// The `retries` of a queue without a redrive policy: SQS keeps redelivering such a
/// message, and 1000 is RMQ's largest.
pub const NO_REDRIVE_RETRIES: i64 = 1000;

/// Moves dead messages of every source to its target, forever (one task per gateway).
pub fn spawn(backend: Arc<Backend>, stopping: tokio::sync::watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = crate::gateway_state::stopped(stopping.clone()) => return,
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
        let exists: bool = conn.exists(crate::gateway_keys::meta(&target)).await?;
        if !exists {
            continue;
        }
        let claimed = rmq_client::redrive_claim(&mut conn, &source, BATCH, STALE_MS).await?;
        if claimed.is_empty() {
            continue;
        }
        for (raw, group, _) in claimed {
            rmq_client::push_moved(&mut conn, &target, group.as_deref(), &raw).await?;
            rmq_client::redrive_done(&mut conn, &source, &raw).await?;
        }
    }
    Ok(())
}
