//! The queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, PurgeQueue and
//! ListDeadLetterSourceQueues.

use std::collections::{BTreeMap, HashMap};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use redis::AsyncCommands;
use serde_json::{json, Value};

use super::caller::{load_queue, now_ms, Caller};
use super::queue_attributes::{apply_attributes, check_attributes, removable, Creation};
use super::tag_actions::check_tags;
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::gateway_state::Gateway;
use crate::input::{int_field, queue_of_url, required, str_field, string_map, valid_queue_name};
use crate::queue::{default_of, TOMBSTONE_MS};
use crate::rmq_client;
use crate::rmq_kind::{self, KIND_ATTRIBUTE};

/// CreateQueue of a name that exists (`existing`, its stored attributes): SQS answers the
/// same attributes again with the queue, different ones with QueueNameExists. The
/// attributes it was created with (`created`) decide while its others are being written.
fn existing_queue(existing: &HashMap<String, String>, attrs: &BTreeMap<String, String>, url: String) -> SqsResult<Value> {
    let created: Option<BTreeMap<String, String>> = existing.get("created").and_then(|c| serde_json::from_str(c).ok());
    let same = attrs.iter().all(|(k, v)| match existing.get(k).or(created.as_ref().and_then(|c| c.get(k))) {
        Some(e) => e == v,
        None => default_of(k) == Some(v.as_str()) || (v.is_empty() && removable(k)),
    });
    if same {
        Ok(json!({"QueueUrl": url}))
    } else {
        Err(SqsError::queue_name_exists("A queue already exists with the same name and a different value for attribute(s)"))
    }
}

pub async fn create_queue(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let name = required(input, "QueueName")?.to_string();
    if !valid_queue_name(&name) {
        return Err(SqsError::invalid_parameter_value(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length (a FIFO queue's name ends in .fifo)",
        ));
    }
    let fifo = name.ends_with(".fifo");
    let mut attrs = string_map(input, "Attributes")?;
    if fifo && attrs.get("FifoQueue").map(String::as_str) != Some("true") {
        return Err(SqsError::invalid_parameter_value("The name of a FIFO queue can only end in .fifo when FifoQueue is true"));
    }
    check_attributes(&attrs, fifo, true)?;
    let tags = string_map(input, "tags")?;
    check_tags(&name, &tags, 0)?;
    if let Some(kind) = rmq_kind::kind_of_tags(&tags, fifo)? {
        rmq_kind::check_queue_attributes(kind, &attrs)?;
        attrs.insert(KIND_ATTRIBUTE.into(), kind.as_str().into());
    }
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
    Ok(json!({"QueueUrl": url}))
}

pub async fn get_queue_url(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let name = required(input, "QueueName")?.to_string();
    if !valid_queue_name(&name) {
        return Err(SqsError::queue_does_not_exist("The specified queue does not exist."));
    }
    let q = load_queue(caller, name).await?;
    Ok(json!({"QueueUrl": gw.queue_url(&q.name)}))
}

pub async fn list_queues(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let prefix = str_field(input, "QueueNamePrefix")?.unwrap_or("");
    let max = int_field(input, "MaxResults", 1, 1000)?;
    let after = match str_field(input, "NextToken")? {
        Some(t) => Some(
            B64URL
                .decode(t)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| SqsError::invalid_parameter_value("Invalid NextToken"))?,
        ),
        None => None,
    };
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
    let mut out = json!({});
    if let Some(max) = max {
        if names.len() > max as usize {
            names.truncate(max as usize);
            out["NextToken"] = json!(B64URL.encode(names[names.len() - 1].as_bytes()));
        }
    } else {
        names.truncate(1000);
    }
    out["QueueUrls"] = json!(names.iter().map(|n| gw.queue_url(n)).collect::<Vec<_>>());
    Ok(out)
}

pub async fn delete_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
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
    Ok(json!({}))
}

pub async fn purge_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let mut conn = caller.backend.conn.clone();
    // Every message goes, in flight and dead (awaiting its redrive) too; the queue's
    // policy, sequence and deduplication windows stay (RMQ.PURGE). The gateway's own
    // indexes of those messages (merging by body, first receives) go with them.
    let mut pipe = redis::pipe();
    pipe.atomic();
    rmq_client::pipe_purge(&mut pipe, &q.name);
    pipe.del(&keys::body_merge(&q.name)[..]).ignore().del(keys::first_receives(&q.name)).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    Ok(json!({}))
}

/// The queues whose redrive target is `dlq`, by name.
pub async fn sources_of(caller: &Caller, dlq: &str) -> SqsResult<Vec<String>> {
    let mut conn = caller.backend.conn.clone();
    let sources: BTreeMap<String, String> = conn.hgetall(keys::REDRIVE_SOURCES).await?;
    Ok(sources.into_iter().filter(|(_, t)| t == dlq).map(|(s, _)| s).collect())
}

pub async fn list_dead_letter_source_queues(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let urls: Vec<String> = sources_of(caller, &q.name).await?.iter().map(|s| gw.queue_url(s)).collect();
    Ok(json!({"queueUrls": urls}))
}
