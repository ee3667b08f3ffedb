//! StartMessageMoveTask & co: moving a dead-letter queue's messages back to a source queue
//! (or DestinationArn), at most MaxNumberOfMessagesPerSecond, each once: the messages
//! waiting when the task starts are taken under a lease, pushed to the
//! destination and then acknowledged, so a gateway that stops mid-task leaves none behind
//! (an unacknowledged one returns to the dead-letter queue when its lease runs out).
//! A task's state is a hash of the DLQ's (crate::gateway_keys::move_task), so every gateway lists and cancels it; the
//! gateway that started it runs it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use redis::AsyncCommands;
use serde_json::{json, Value};

use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys::move_task as task_key;
use crate::message;
use crate::queue_replies::{MoveTask, MoveTasks, TaskCancelled, TaskStarted};
use crate::redis_backend::Backend;
use crate::replies::to_body;
use crate::rmq_client;

/// The queue an ARN names.
pub fn queue_of_arn(arn: &str) -> Option<&str> {
    let name = arn.rsplit(':').next()?;
    (arn.starts_with("arn:") && crate::input::valid_queue_name(name)).then_some(name)
}

/// Starts a task; `dest` is the destination queue (already resolved), `to_move` the number
/// of messages waiting in `source` now.
pub async fn start(
    backend: Arc<Backend>,
    source: &str,
    source_arn: &str,
    dest: &str,
    dest_arn: &str,
    rate: Option<i64>,
    to_move: i64,
) -> SqsResult<Vec<u8>> {
    let mut conn = backend.conn.clone();
    let key = task_key(source);
    let status: Option<String> = conn.hget(&key, "Status").await?;
    if status.as_deref() == Some("RUNNING") {
        return Err(SqsError::invalid_parameter_value("A message move task is already running on this queue"));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let handle = B64URL.encode(json!({"q": source, "id": id}).to_string());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let mut fields = vec![
        ("TaskHandle", handle.clone()),
        ("Status", "RUNNING".to_string()),
        ("SourceArn", source_arn.to_string()),
        ("DestinationArn", dest_arn.to_string()),
        ("ApproximateNumberOfMessagesMoved", "0".to_string()),
        ("ApproximateNumberOfMessagesToMove", to_move.to_string()),
        ("StartedTimestamp", now.to_string()),
    ];
    if let Some(r) = rate {
        fields.push(("MaxNumberOfMessagesPerSecond", r.to_string()));
    }
    let mut pipe = redis::pipe();
    pipe.atomic().del(&key).ignore().hset_multiple(&key, &fields).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    let (source, dest, task) = (source.to_string(), dest.to_string(), handle.clone());
    tokio::spawn(async move {
        if let Err(e) = run(&backend, &source, &dest, &task, rate, to_move).await {
            tracing::warn!("message move task on {source}: {e}");
            let mut conn = backend.conn.clone();
            let _: redis::RedisResult<()> =
                conn.hset_multiple(task_key(&source), &[("Status", "FAILED"), ("FailureReason", "the queue store failed")]).await;
        }
    });
    Ok(to_body(&TaskStarted { task_handle: handle }))
}

/// Whether task `handle` may go on moving: it is still the queue's task, still RUNNING
/// (not cancelled, nor replaced by a newer task), and its destination still exists (a
/// message is never pushed into a deleted queue: the task fails instead).
/// The task's key and the destination's live in different cluster slots (maybe on different
/// primaries), so they are read apart: one pipeline over both fails with CROSSSLOT.
async fn may_move(conn: &mut crate::redis_backend::Conn, key: &str, handle: &str, dest: &str) -> redis::RedisResult<bool> {
    let (current, status): (Option<String>, Option<String>) =
        redis::pipe().hget(key, "TaskHandle").hget(key, "Status").query_async(conn).await?;
    if current.as_deref() != Some(handle) || status.as_deref() != Some("RUNNING") {
        return Ok(false);
    }
    let dest_exists: bool = conn.exists(crate::gateway_keys::meta(dest)).await?;
    if !dest_exists {
        let _: () = conn.hset_multiple(key, &[("Status", "FAILED"), ("FailureReason", "the destination queue was deleted")]).await?;
        return Ok(false);
    }
    Ok(true)
}

async fn run(backend: &Backend, source: &str, dest: &str, handle: &str, rate: Option<i64>, to_move: i64) -> redis::RedisResult<()> {
    let mut conn = backend.conn.clone();
    let key = task_key(source);
    let started = Instant::now();
    let mut moved = 0i64;
    while moved < to_move {
        if !may_move(&mut conn, &key, handle, dest).await? {
            return Ok(());
        }
        if let Some(r) = rate {
            // Hold the pace: message `moved` may go at moved / rate seconds.
            let due = Duration::from_secs_f64(moved as f64 / r as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let n = (to_move - moved).min(10).min(rate.unwrap_or(10));
        let got = rmq_client::pop(&mut conn, source, n, 60_000).await?;
        let Some(got) = got else { break };
        for (raw, _) in got {
            // Checked again after the pacing wait, before every message: a cancel stops
            // the task at once (the messages taken but not moved return with their lease).
            if !may_move(&mut conn, &key, handle, dest).await? {
                return Ok(());
            }
            let group = message::decode(&raw).stored.group;
            rmq_client::push_moved(&mut conn, dest, group.as_ref().map(String::as_bytes), &raw).await?;
            rmq_client::ack(&mut conn, source, &raw).await?;
            moved += 1;
            let _: i64 = conn.hincr(&key, "ApproximateNumberOfMessagesMoved", 1).await?;
        }
    }
    let _: () = conn.hset(&key, "Status", "COMPLETED").await?;
    Ok(())
}

/// The task of a dead-letter queue, if it has had one.
pub async fn list(backend: &Backend, source: &str) -> SqsResult<Vec<u8>> {
    let mut conn = backend.conn.clone();
    let t: HashMap<String, String> = conn.hgetall(task_key(source)).await?;
    let results = if t.is_empty() { Vec::new() } else { vec![MoveTask::of_hash(t)] };
    Ok(to_body(&MoveTasks { results }))
}

pub async fn cancel(backend: &Backend, handle: &str) -> SqsResult<Vec<u8>> {
    let not_found = || SqsError::resource_not_found("The task handle does not name a running task");
    let decoded: Value = B64URL.decode(handle).ok().and_then(|b| serde_json::from_slice(&b).ok()).ok_or_else(not_found)?;
    let source = decoded.get("q").and_then(Value::as_str).ok_or_else(not_found)?;
    let mut conn = backend.conn.clone();
    let key = task_key(source);
    let (current, status, moved): (Option<String>, Option<String>, Option<i64>) = redis::pipe()
        .hget(&key, "TaskHandle")
        .hget(&key, "Status")
        .hget(&key, "ApproximateNumberOfMessagesMoved")
        .query_async(&mut conn)
        .await?;
    if current.as_deref() != Some(handle) || status.as_deref() != Some("RUNNING") {
        return Err(not_found());
    }
    // The running gateway stops at its next message; a task whose gateway stopped ends here.
    let _: () = conn.hset(&key, "Status", "CANCELLED").await?;
    Ok(to_body(&TaskCancelled { moved: moved.unwrap_or(0) }))
}

/// StartMessageMoveTask's destination: DestinationArn's queue, else the dead-letter
/// queue's one source queue (`sources_of`, which must not be empty: the source of a task is
/// a dead-letter queue).
pub fn destination(dest_arn: Option<&str>, sources_of: &[String]) -> SqsResult<String> {
    if sources_of.is_empty() {
        return Err(SqsError::invalid_parameter_value("Source queue must be configured as a Dead Letter Queue."));
    }
    match (dest_arn, sources_of) {
        (Some(d), _) => {
            queue_of_arn(d).map(str::to_string).ok_or_else(|| SqsError::invalid_parameter_value("DestinationArn is not a queue ARN"))
        }
        (None, [one]) => Ok(one.clone()),
        (None, _) => Err(SqsError::invalid_parameter_value("This dead-letter queue has several source queues: give DestinationArn")),
    }
}
