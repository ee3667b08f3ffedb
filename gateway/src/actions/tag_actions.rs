//! The tag actions: TagQueue, UntagQueue and ListQueueTags, and SQS's tag limits.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde_json::{json, Value};

use super::caller::{load_queue, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::input::{queue_of_url, string_list, string_map};
use crate::rmq_kind::{self, Kind};

/// SQS's tag limits: at most 50 on a queue (`existing` more than `tags` has already), keys
/// of 1–128 characters and values of at most 256.
pub fn check_tags(queue: &str, tags: &BTreeMap<String, String>, existing: usize) -> SqsResult<()> {
    if tags.len() + existing > 50 {
        return Err(SqsError::invalid_parameter_value(format!("Too many tags added for queue {queue}.")));
    }
    if tags.keys().any(|k| k.is_empty() || k.chars().count() > 128) {
        return Err(SqsError::invalid_parameter_value("Tag keys must be between 1 and 128 characters in length."));
    }
    if tags.values().any(|v| v.chars().count() > 256) {
        return Err(SqsError::invalid_parameter_value("Tag values must be at most 256 characters in length."));
    }
    Ok(())
}

pub async fn tag_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let tags = string_map(input, "Tags")?;
    if tags.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter Tags."));
    }
    rmq_kind::check_tagging(Kind::of(&q.attrs), &tags)?;
    let mut conn = caller.backend.conn.clone();
    let current: Vec<String> = conn.hkeys(keys::tags(&q.name)).await?;
    check_tags(&q.name, &tags, current.iter().filter(|k| !tags.contains_key(*k)).count())?;
    let pairs: Vec<(&String, &String)> = tags.iter().collect();
    let _: () = conn.hset_multiple(keys::tags(&q.name), &pairs).await?;
    Ok(json!({}))
}

pub async fn untag_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let keys = string_list(input, "TagKeys")?;
    if keys.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter TagKeys."));
    }
    let mut conn = caller.backend.conn.clone();
    let _: () = conn.hdel(keys::tags(&q.name), keys).await?;
    Ok(json!({}))
}

pub async fn list_queue_tags(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let mut conn = caller.backend.conn.clone();
    let tags: BTreeMap<String, String> = conn.hgetall(keys::tags(&q.name)).await?;
    Ok(if tags.is_empty() { json!({}) } else { json!({"Tags": tags}) })
}
