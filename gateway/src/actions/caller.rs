//! Who is calling (their connections and access key), and the queues they name: read
//! from Redis, or as cached within `--queue-cache-ms` (crate::queue).

use std::collections::HashMap;
use std::sync::Arc;

use redis::AsyncCommands;

use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::queue::Queue;
use crate::redis_backend::Backend;

/// Who is calling: the connections to use and the access key (SenderId).
pub struct Caller {
    pub backend: Arc<Backend>,
    pub key_id: String,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The queue's attributes as they are now (and cached for the actions run per message).
pub async fn load_queue(caller: &Caller, name: String) -> SqsResult<Arc<Queue>> {
    let mut conn = caller.backend.conn.clone();
    let attrs: HashMap<String, String> = conn.hgetall(keys::meta(&name)).await?;
    if attrs.is_empty() {
        caller.backend.queues.forget(&name);
        return Err(SqsError::queue_does_not_exist("The specified queue does not exist."));
    }
    let q = Arc::new(Queue::new(name, attrs));
    caller.backend.queues.put(q.clone());
    Ok(q)
}

/// The queue's attributes as read within `--queue-cache-ms` (crate::queue says why that
/// is safe), else as they are now: for the actions run per message.
pub async fn cached_queue(caller: &Caller, name: String) -> SqsResult<Arc<Queue>> {
    match caller.backend.queues.get(&name) {
        Some(q) => Ok(q),
        None => load_queue(caller, name).await,
    }
}

/// Refused (AccessDenied, through the NOPERM) unless the caller may write queue `name`: a
/// command that writes its key and changes nothing (no message is empty). For what pushes
/// into a queue on the caller's behalf later (a redrive, a move task).
pub async fn check_writable(caller: &Caller, name: &str) -> SqsResult<()> {
    let _: i64 = caller.backend.conn.clone().zrem(name, "").await?;
    Ok(())
}
