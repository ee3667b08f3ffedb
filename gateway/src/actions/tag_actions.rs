//! The tag actions: TagQueue, UntagQueue and ListQueueTags (their requests and SQS's tag
//! limits: crate::tag_requests).

use std::collections::BTreeMap;

use redis::AsyncCommands;

use super::caller::{load_queue, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::queue_replies::QueueTags;
use crate::replies::{to_body, Done};
use crate::rmq_kind::{self, Kind};
use crate::tag_requests::{check_tags, ListQueueTags, TagQueue, UntagQueue};

pub async fn tag_queue(caller: &Caller, r: TagQueue) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let tags = r.tags.0;
    if tags.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter Tags."));
    }
    rmq_kind::check_tagging(Kind::of(&q.attrs), &tags)?;
    let mut conn = caller.backend.conn.clone();
    let current: Vec<String> = conn.hkeys(keys::tags(&q.name)).await?;
    check_tags(&q.name, &tags, current.iter().filter(|k| !tags.contains_key(*k)).count())?;
    let pairs: Vec<(&String, &String)> = tags.iter().collect();
    let _: () = conn.hset_multiple(keys::tags(&q.name), &pairs).await?;
    Ok(to_body(&Done {}))
}

pub async fn untag_queue(caller: &Caller, r: UntagQueue) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let keys = r.tag_keys.0;
    if keys.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter TagKeys."));
    }
    let mut conn = caller.backend.conn.clone();
    let _: () = conn.hdel(keys::tags(&q.name), keys).await?;
    Ok(to_body(&Done {}))
}

pub async fn list_queue_tags(caller: &Caller, r: ListQueueTags) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let mut conn = caller.backend.conn.clone();
    let tags: BTreeMap<String, String> = conn.hgetall(keys::tags(&q.name)).await?;
    Ok(to_body(&QueueTags { tags }))
}
