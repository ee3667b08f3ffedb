//! The queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, PurgeQueue and
//! ListDeadLetterSourceQueues.

use std::collections::{BTreeMap, HashMap};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use redis::AsyncCommands;

use super::caller::{load_queue, now_ms, Caller};
use super::queue_attributes::{apply_attributes, Creation};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::gateway_state::Gateway;
use crate::queue::{default_of, TOMBSTONE_MS};
use crate::queue_attribute_checks::removable;
use crate::queue_replies::{DeadLetterSources, QueueUrlReply, QueueUrls};
use crate::queue_requests::{CreateQueue, DeleteQueue, GetQueueUrl, ListDeadLetterSourceQueues, ListQueues, PurgeQueue};
use crate::replies::{to_body, Done};
use crate::rmq_client;

/// CreateQueue of a name that exists (`existing`, its stored attributes): SQS answers the
/// same attributes again with the queue, different ones with QueueNameExists. The
/// attributes it was created with (`created`) decide while its others are being written.
fn existing_queue(existing: &HashMap<String, String>, attrs: &BTreeMap<String, String>, url: String) -> SqsResult<Vec<u8>> {
    let created: Option<BTreeMap<String, String>> = existing.get("created").and_then(|c| serde_json::from_str(c).ok());
    let same = attrs.iter().all(|(k, v)| match existing.get(k).or(created.as_ref().and_then(|c| c.get(k))) {
        Some(e) => e == v,
        None => default_of(k) == Some(v.as_str()) || (v.is_empty() && removable(k)),
    });
    if same {
        Ok(to_body(&QueueUrlReply { queue_url: url }))
    } else {
        Err(SqsError::queue_name_exists("A queue already exists with the same name and a different value for attribute(s)"))
    }
}

/// `r` is checked already (CreateQueue::checked), its RMQ kind among its attributes.
pub async fn create_queue(gw: &Gateway, caller: &Caller, r: CreateQueue) -> SqsResult<Vec<u8>> {
    let (name, attrs, tags) = (r.queue_name.0, r.attributes.0, r.tags.0);
    let mut conn = caller.backend.conn.clone();
    let key = keys::meta(&name);
    let (existing, gone): (HashMap<String, String>, bool) =
        redis::pipe().hgetall(&key).exists(keys::gone(&name)).query_async(&mut conn).await?;
    let url = gw.queue_url(&name);
    if !existing.is_empty() {
        return existing_queue(&existing, &attrs, url);
    }
    if gone {
        return Err(SqsError::queue_deleted_recently(format!(
            "You must wait {} seconds after deleting a queue before you can create another with the same name.",
            TOMBSTONE_MS / 1000
        )));
    }
    // One conditional write decides a race between creations (on any gateways): the first
    // `created` (its attributes) wins, and a later one is compared with it, even before
    // the winner's attributes are written.
    let claim = serde_json::to_string(&attrs).unwrap_or_default();
    let won: bool = conn.hset_nx(&key, "created", &claim).await?;
    if !won {
        let existing: HashMap<String, String> = conn.hgetall(&key).await?;
        return existing_queue(&existing, &attrs, url);
    }
    let hkey = hex::encode(uuid::Uuid::new_v4().as_bytes()) + &hex::encode(uuid::Uuid::new_v4().as_bytes());
    if let Err(e) = apply_attributes(caller, &name, &attrs, now_ms() / 1000, Some(Creation { hkey, tags: &tags })).await {
        // Refused (an ACL): the claim goes too, so that nothing half made is left.
        let _: redis::RedisResult<()> = conn.del(&key).await;
        return Err(e);
    }
    caller.backend.queues.forget(&name);
    Ok(to_body(&QueueUrlReply { queue_url: url }))
}

pub async fn get_queue_url(gw: &Gateway, caller: &Caller, r: GetQueueUrl) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_name.0).await?;
    Ok(to_body(&QueueUrlReply { queue_url: gw.queue_url(&q.name) }))
}

pub async fn list_queues(gw: &Gateway, caller: &Caller, r: ListQueues) -> SqsResult<Vec<u8>> {
    let prefix = r.queue_name_prefix.as_deref().unwrap_or("");
    let max = r.max_results.map(|m| m.0);
    let after = r.next_token.map(|t| t.0);
    let mut names = rmq_client::queues(&mut caller.backend.conn.clone(), prefix).await?;
    names.retain(|n| after.as_ref().is_none_or(|a| n > a));
    names.sort();
    names.dedup();
    // Of the RMQ queues this user may read, those made through the gateway (an attribute
    // hash it may read too); each check on the queue's own slot.
    let made = futures_util::future::join_all(names.iter().map(|n| {
        let mut conn = caller.backend.conn.clone();
        async move {
            match conn.exists::<_, bool>(keys::meta(n)).await {
                Err(e) if crate::errors::refused_by_acl(&e) => Ok(false),
                r => r,
            }
        }
    }))
    .await
    .into_iter()
    .collect::<redis::RedisResult<Vec<bool>>>()?;
    let mut made = made.into_iter();
    names.retain(|_| made.next().unwrap_or(false));
    let mut next_token = None;
    if let Some(max) = max {
        if names.len() > max as usize {
            names.truncate(max as usize);
            next_token = Some(B64URL.encode(names[names.len() - 1].as_bytes()));
        }
    } else {
        names.truncate(1000);
    }
    Ok(to_body(&QueueUrls { queue_urls: names.iter().map(|n| gw.queue_url(n)).collect(), next_token }))
}

pub async fn delete_queue(caller: &Caller, r: DeleteQueue) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    forget_first_receives(caller, &q.name).await;
    let mut conn = caller.backend.conn.clone();
    let gone = [
        keys::meta(&q.name),
        keys::tags(&q.name),
        // A running move task sees its state gone and stops.
        keys::move_task(&q.name),
    ]
    .into_iter()
    .chain(keys::body_merge(&q.name))
    .chain([keys::first_receives(&q.name)])
    .collect::<Vec<_>>();
    let mut pipe = redis::pipe();
    // Every key the module keeps for the queue (messages, policy, schedules, sequence,
    // deduplication, journal) goes with RMQ.DROP, the gateway's own with DEL.
    pipe.atomic();
    rmq_client::pipe_drop(&mut pipe, &q.name);
    pipe.del(&gone).ignore();
    // The tombstone: crate::queue says why a new queue of the name must wait.
    pipe.cmd("SET").arg(keys::gone(&q.name)).arg(1).arg("PX").arg(TOMBSTONE_MS).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    caller.backend.queues.forget(&q.name);
    // Another slot (see apply_attributes); an entry left behind names a queue with nothing dead.
    let _: () = conn.hdel(keys::REDRIVE_SOURCES, &q.name).await?;
    Ok(to_body(&Done {}))
}

pub async fn purge_queue(caller: &Caller, r: PurgeQueue) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    forget_first_receives(caller, &q.name).await;
    let mut conn = caller.backend.conn.clone();
    // Every message goes, in flight and dead (awaiting its redrive) too; the queue's
    // policy, sequence and deduplication windows stay (RMQ.PURGE). The gateway's own
    // indexes of those messages (merging by body, first receives) go with them.
    let mut pipe = redis::pipe();
    pipe.atomic();
    rmq_client::pipe_purge(&mut pipe, &q.name);
    pipe.del(&keys::body_merge(&q.name)[..]).ignore().del(keys::first_receives(&q.name)).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    Ok(to_body(&Done {}))
}

/// The queue's first-receive records not yet written are taken out, and any being written
/// are written before the caller deletes them all.
async fn forget_first_receives(caller: &Caller, q: &str) {
    let first = &caller.backend.first_receives;
    let _order = first.ordered().await;
    first.take(q);
}

/// The queues whose redrive target is `dlq`, by name.
pub async fn sources_of(caller: &Caller, dlq: &str) -> SqsResult<Vec<String>> {
    let mut conn = caller.backend.conn.clone();
    let sources: BTreeMap<String, String> = conn.hgetall(keys::REDRIVE_SOURCES).await?;
    Ok(sources.into_iter().filter(|(_, t)| t == dlq).map(|(s, _)| s).collect())
}

pub async fn list_dead_letter_source_queues(gw: &Gateway, caller: &Caller, r: ListDeadLetterSourceQueues) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let queue_urls = sources_of(caller, &q.name).await?.iter().map(|s| gw.queue_url(s)).collect();
    Ok(to_body(&DeadLetterSources { queue_urls }))
}
