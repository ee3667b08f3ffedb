//! The SQS actions: validate as SQS does, then the action's RMQ commands in one Redis round
//! trip — after another that reads the queue's attributes, unless they were read within
//! `--queue-cache-ms` (crate::queue).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use redis::AsyncCommands;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::errors::{SqsError, SqsResult};
use crate::input::{batch_entries, int_field, parse_attrs, queue_of_url, required, str_field, string_list, string_map, valid_queue_name};
use crate::md5s;
use crate::message::{self, Attribute, Stored};
use crate::queue::{default_of, Queue, TOMBSTONE_MS};
use crate::replies::{to_body, Receive, Received, Sent, SentBatch};
use crate::rmq_kind::{self, Kind, Place, KIND_ATTRIBUTE};
use crate::server::Gateway;
use crate::store::{self, Backend};

/// Who is calling: the connections to use and the access key (SenderId).
pub struct Caller {
    pub backend: Arc<Backend>,
    pub key_id: String,
}

/// The action's response body.
pub async fn dispatch(gw: &Gateway, caller: &Caller, action: &str, input: &Value) -> SqsResult<Vec<u8>> {
    let value = match action {
        "CreateQueue" => create_queue(gw, caller, input).await,
        "GetQueueUrl" => get_queue_url(gw, caller, input).await,
        "ListQueues" => list_queues(gw, caller, input).await,
        "DeleteQueue" => delete_queue(caller, input).await,
        "PurgeQueue" => purge_queue(caller, input).await,
        "GetQueueAttributes" => get_queue_attributes(gw, caller, input).await,
        "SetQueueAttributes" => set_queue_attributes(caller, input).await,
        // Answered per message: their bodies are serialised without Values (crate::replies).
        "SendMessage" => return send_message(caller, input).await,
        "SendMessageBatch" => return send_message_batch(caller, input).await,
        "ReceiveMessage" => return receive_message(gw, caller, input).await,
        "DeleteMessage" => delete_message(caller, input).await,
        "DeleteMessageBatch" => delete_message_batch(caller, input).await,
        "ChangeMessageVisibility" => change_visibility(caller, input).await,
        "ChangeMessageVisibilityBatch" => change_visibility_batch(caller, input).await,
        "ListDeadLetterSourceQueues" => list_dead_letter_source_queues(gw, caller, input).await,
        "StartMessageMoveTask" => start_message_move_task(gw, caller, input).await,
        "ListMessageMoveTasks" => list_message_move_tasks(caller, input).await,
        "CancelMessageMoveTask" => crate::movetask::cancel(&caller.backend, required(input, "TaskHandle")?).await,
        "TagQueue" => tag_queue(caller, input).await,
        "UntagQueue" => untag_queue(caller, input).await,
        "ListQueueTags" => list_queue_tags(caller, input).await,
        _ => Err(SqsError::unsupported_operation(format!("{action} is not supported by rmq-gateway"))),
    }?;
    Ok(to_body(&value))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

// ---- queue attributes ----

/// The queue's attributes as they are now (and cached for the actions run per message).
async fn load_queue(caller: &Caller, name: String) -> SqsResult<Arc<Queue>> {
    let mut conn = caller.backend.conn.clone();
    let attrs: HashMap<String, String> = conn.hgetall(store::meta_key(&name)).await?;
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
async fn cached_queue(caller: &Caller, name: String) -> SqsResult<Arc<Queue>> {
    match caller.backend.queues.get(&name) {
        Some(q) => Ok(q),
        None => load_queue(caller, name).await,
    }
}

/// Checks settable attributes as SQS does; `creating` allows FifoQueue.
fn check_attributes(attrs: &BTreeMap<String, String>, fifo: bool, creating: bool) -> SqsResult<()> {
    for (k, v) in attrs {
        let range = match k.as_str() {
            "DelaySeconds" => Some((0, 900)),
            "MaximumMessageSize" => Some((1024, 1_048_576)),
            "MessageRetentionPeriod" => Some((60, 1_209_600)),
            "ReceiveMessageWaitTimeSeconds" => Some((0, 20)),
            "VisibilityTimeout" => Some((0, 43_200)),
            _ => None,
        };
        let ok = match (k.as_str(), range) {
            (_, Some((lo, hi))) => v.parse::<i64>().is_ok_and(|n| (lo..=hi).contains(&n)),
            ("FifoQueue", _) => creating && ((v == "true") == fifo) && (v == "true" || v == "false"),
            ("ContentBasedDeduplication", _) => fifo && (v == "true" || v == "false"),
            ("DeduplicationScope", _) => fifo && (v == "messageGroup" || v == "queue"),
            ("FifoThroughputLimit", _) => fifo && (v == "perQueue" || v == "perMessageGroupId"),
            ("SqsManagedSseEnabled", _) => v == "true" || v == "false",
            ("KmsDataKeyReusePeriodSeconds", _) => v.parse::<i64>().is_ok_and(|n| (60..=86_400).contains(&n)),
            ("RedrivePolicy", _) => crate::redrive::parse(v).map(|_| true)?,
            ("Policy" | "RedriveAllowPolicy" | "KmsMasterKeyId", _) => true,
            _ => return Err(SqsError::invalid_attribute_name(format!("Unknown Attribute {k}."))),
        };
        if !ok {
            return Err(SqsError::invalid_attribute_value(format!("Invalid value for the parameter {k}.")));
        }
    }
    Ok(())
}

/// The attributes that an empty value removes rather than sets.
fn removable(name: &str) -> bool {
    matches!(name, "Policy" | "RedrivePolicy" | "RedriveAllowPolicy")
}

/// The RMQ `retries` a queue's redrive policy (or its absence) implies.
fn retries_of(policy: &Option<crate::redrive::Policy>) -> i64 {
    policy.as_ref().map_or(crate::redrive::NO_REDRIVE_RETRIES, |p| p.max_receive_count - 1)
}

/// What a creation writes besides the attributes: the receipt-handle key and the tags.
struct Creation<'a> {
    hkey: String,
    tags: &'a BTreeMap<String, String>,
}

/// Stores settable attributes — on creation with the queue's other keys, its module policy
/// and its redrive entry; later the policy and entry when RedrivePolicy changes — the
/// queue's keys in one MULTI, so a refused write (an ACL) leaves nothing half made.
async fn apply_attributes(
    caller: &Caller,
    name: &str,
    attrs: &BTreeMap<String, String>,
    now_s: i64,
    creation: Option<Creation<'_>>,
) -> SqsResult<()> {
    let redrive = match attrs.get("RedrivePolicy") {
        Some(v) => Some(crate::redrive::parse(v)?),
        None => None,
    };
    if let Some(Some(p)) = &redrive {
        let target = load_queue(caller, p.target.clone()).await.map_err(|_| {
            SqsError::invalid_parameter_value("Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target does not exist.")
        })?;
        if target.fifo() != name.ends_with(".fifo") || target.name == name {
            return Err(SqsError::invalid_parameter_value(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target must be another queue of the same type.",
            ));
        }
    }
    let key = store::meta_key(name);
    let mut pipe = redis::pipe();
    pipe.atomic();
    if let Some(c) = &creation {
        // HSETNX: of two concurrent creations, both keep the first one's key and time.
        pipe.hset_nx(&key, "hkey", &c.hkey).ignore().hset_nx(&key, "CreatedTimestamp", now_s).ignore();
        if !c.tags.is_empty() {
            let pairs: Vec<(&String, &String)> = c.tags.iter().collect();
            pipe.hset_multiple(store::tags_key(name), &pairs).ignore();
        }
    }
    let mut redrive_entry = None;
    // SQS: an empty policy removes the attribute (Terraform removes them so).
    let (removed, kept): (Vec<_>, Vec<_>) = attrs.iter().partition(|(k, v)| v.is_empty() && removable(k));
    let mut fields: Vec<(&str, String)> = kept.into_iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    fields.push(("LastModifiedTimestamp", now_s.to_string()));
    pipe.hset_multiple(&key, &fields).ignore();
    if !removed.is_empty() {
        pipe.hdel(&key, removed.into_iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()).ignore();
    }
    if creation.is_some() || redrive.is_some() {
        let policy = redrive.unwrap_or(None);
        pipe.cmd("RMQ.POLICY").arg(name).arg("SET").arg("retries").arg(retries_of(&policy)).ignore();
        redrive_entry = Some(policy);
    }
    let mut conn = caller.backend.conn.clone();
    // The global source list lives in another cluster slot than the queue, so it is written
    // on its own, and only by queues that have (or had) a policy: an entry before the MULTI
    // (a user who may not write it is refused before anything is made; an entry left by a
    // failed MULTI names a queue with nothing dead), its removal after.
    if let Some(Some(p)) = &redrive_entry {
        let _: () = conn.hset(crate::redrive::SOURCES, name, &p.target).await?;
    }
    pipe.query_async::<()>(&mut conn).await?;
    if let Some(None) = &redrive_entry {
        if creation.is_none() {
            let _: () = conn.hdel(crate::redrive::SOURCES, name).await?;
        }
    }
    Ok(())
}

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

async fn create_queue(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
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
    let key = store::meta_key(&name);
    let (existing, gone): (HashMap<String, String>, bool) =
        redis::pipe().hgetall(&key).exists(store::gone_key(&name)).query_async(&mut conn).await?;
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

async fn get_queue_url(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let name = required(input, "QueueName")?.to_string();
    if !valid_queue_name(&name) {
        return Err(SqsError::queue_does_not_exist("The specified queue does not exist."));
    }
    let q = load_queue(caller, name).await?;
    Ok(json!({"QueueUrl": gw.queue_url(&q.name)}))
}

async fn list_queues(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
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
    let mut names = caller.backend.conn.clone().queues(prefix).await?;
    names.retain(|n| after.as_ref().is_none_or(|a| n > a));
    names.sort();
    names.dedup();
    // Of the RMQ queues this user may read, those made through the gateway (an attribute
    // hash it may read too); each check on the queue's own slot.
    let made = futures_util::future::join_all(names.iter().map(|n| {
        let mut conn = caller.backend.conn.clone();
        async move {
            match conn.exists::<_, bool>(store::meta_key(n)).await {
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

async fn delete_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let mut conn = caller.backend.conn.clone();
    let keys = [
        store::meta_key(&q.name),
        store::tags_key(&q.name),
        // A running move task sees its state gone and stops.
        crate::movetask::task_key(&q.name),
    ]
    .into_iter()
    .chain(crate::body_merge::keys(&q.name))
    .chain([crate::first_receive::key(&q.name)])
    .collect::<Vec<_>>();
    let mut pipe = redis::pipe();
    // Every key the module keeps for the queue (messages, policy, schedules, sequence,
    // deduplication, journal) goes with RMQ.DROP, the gateway's own with DEL.
    pipe.atomic().cmd("RMQ.DROP").arg(&q.name).ignore().del(&keys).ignore();
    // The tombstone: crate::queue says why a new queue of the name must wait.
    pipe.cmd("SET").arg(store::gone_key(&q.name)).arg(1).arg("PX").arg(TOMBSTONE_MS).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    caller.backend.queues.forget(&q.name);
    // Another slot (see apply_attributes); an entry left behind names a queue with nothing dead.
    let _: () = conn.hdel(crate::redrive::SOURCES, &q.name).await?;
    Ok(json!({}))
}

async fn purge_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let mut conn = caller.backend.conn.clone();
    // Every message goes, in flight and dead (awaiting its redrive) too; the queue's
    // policy, sequence and deduplication windows stay (RMQ.PURGE). The gateway's own
    // indexes of those messages (merging by body, first receives) go with them.
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("RMQ.PURGE").arg(&q.name).arg("DEAD").ignore();
    pipe.del(&crate::body_merge::keys(&q.name)[..]).ignore().del(crate::first_receive::key(&q.name)).ignore();
    pipe.query_async::<()>(&mut conn).await?;
    Ok(json!({}))
}

/// The queues whose redrive target is `dlq`, by name.
async fn sources_of(caller: &Caller, dlq: &str) -> SqsResult<Vec<String>> {
    let mut conn = caller.backend.conn.clone();
    let sources: BTreeMap<String, String> = conn.hgetall(crate::redrive::SOURCES).await?;
    Ok(sources.into_iter().filter(|(_, t)| t == dlq).map(|(s, _)| s).collect())
}

async fn list_dead_letter_source_queues(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let urls: Vec<String> = sources_of(caller, &q.name).await?.iter().map(|s| gw.queue_url(s)).collect();
    Ok(json!({"queueUrls": urls}))
}

/// The dead-letter queue an ARN names, which must exist.
async fn queue_of_arn(caller: &Caller, arn: &str) -> SqsResult<Arc<Queue>> {
    let name = crate::movetask::queue_of_arn(arn).ok_or_else(|| SqsError::invalid_parameter_value(format!("{arn} is not a queue ARN")))?;
    load_queue(caller, name.to_string()).await.map_err(|e| not_found_as_resource(e, &format!("The queue {name} does not exist")))
}

/// A missing queue named by ARN is ResourceNotFound; any other refusal (AccessDenied)
/// stays what it is.
fn not_found_as_resource(e: SqsError, message: &str) -> SqsError {
    if e.code == "QueueDoesNotExist" {
        SqsError::resource_not_found(message)
    } else {
        e
    }
}

async fn start_message_move_task(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = queue_of_arn(caller, required(input, "SourceArn")?).await?;
    let rate = int_field(input, "MaxNumberOfMessagesPerSecond", 1, 500)?;
    let dest = crate::movetask::destination(str_field(input, "DestinationArn")?, &sources_of(caller, &q.name).await?)?;
    let dq = load_queue(caller, dest).await.map_err(|e| not_found_as_resource(e, "The destination queue does not exist"))?;
    let to_move = rmq_info(caller, &q.name).await?.get("waiting").copied().unwrap_or(0);
    crate::movetask::start(caller.backend.clone(), &q.name, &gw.queue_arn(&q.name), &dq.name, &gw.queue_arn(&dq.name), rate, to_move).await
}

async fn list_message_move_tasks(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = queue_of_arn(caller, required(input, "SourceArn")?).await?;
    int_field(input, "MaxResults", 1, 10)?;
    crate::movetask::list(&caller.backend, &q.name).await
}

async fn get_queue_attributes(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let wanted = string_list(input, "AttributeNames")?;
    let info = rmq_info(caller, &q.name).await?;
    let mut all: BTreeMap<String, String> = BTreeMap::new();
    for name in ["VisibilityTimeout", "DelaySeconds", "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize", "MessageRetentionPeriod"] {
        all.insert(name.into(), q.num(name).to_string());
    }
    for (k, v) in &q.attrs {
        if k != "hkey" && k != "created" {
            all.insert(k.clone(), v.clone());
        }
    }
    let (waiting, ready) = (info.get("waiting").copied().unwrap_or(0), info.get("ready").copied().unwrap_or(0));
    all.insert("ApproximateNumberOfMessages".into(), ready.to_string());
    all.insert("ApproximateNumberOfMessagesNotVisible".into(), info.get("inflight").copied().unwrap_or(0).to_string());
    all.insert("ApproximateNumberOfMessagesDelayed".into(), (waiting - ready).max(0).to_string());
    all.insert("QueueArn".into(), gw.queue_arn(&q.name));
    if q.fifo() {
        all.entry("FifoQueue".into()).or_insert_with(|| "true".into());
        all.entry("ContentBasedDeduplication".into()).or_insert_with(|| "false".into());
        all.entry("DeduplicationScope".into()).or_insert_with(|| "queue".into());
        all.entry("FifoThroughputLimit".into()).or_insert_with(|| "perQueue".into());
    }
    all.entry(KIND_ATTRIBUTE.into()).or_insert_with(|| Kind::Fixed.as_str().into());
    // The gateway encrypts nothing itself (Redis's own TLS and disk encryption do that).
    all.entry("SqsManagedSseEnabled".into()).or_insert_with(|| "false".into());
    let all_wanted = wanted.iter().any(|w| w == "All");
    let mut out = Map::new();
    for w in &wanted {
        if w != "All" && !all.contains_key(w) && !is_known_attribute(w) {
            return Err(SqsError::invalid_attribute_name(format!("Unknown Attribute {w}.")));
        }
    }
    for (k, v) in all {
        if all_wanted || wanted.contains(&k) {
            out.insert(k, Value::String(v));
        }
    }
    Ok(if out.is_empty() { json!({}) } else { json!({"Attributes": out}) })
}

/// RMQ.INFO's integer fields.
async fn rmq_info(caller: &Caller, name: &str) -> SqsResult<HashMap<String, i64>> {
    let mut conn = caller.backend.conn.clone();
    let info: Vec<redis::Value> = redis::cmd("RMQ.INFO").arg(name).query_async(&mut conn).await?;
    Ok(info
        .chunks(2)
        .filter_map(|p| match (&p[0], p.get(1)) {
            (redis::Value::BulkString(k), Some(redis::Value::Int(v))) => Some((String::from_utf8_lossy(k).into_owned(), *v)),
            _ => None,
        })
        .collect())
}

fn is_known_attribute(name: &str) -> bool {
    matches!(
        name,
        "Policy"
            | "RedrivePolicy"
            | "RedriveAllowPolicy"
            | "KmsMasterKeyId"
            | "KmsDataKeyReusePeriodSeconds"
            | "SqsManagedSseEnabled"
            | "FifoQueue"
            | "ContentBasedDeduplication"
            | "DeduplicationScope"
            | "FifoThroughputLimit"
    )
}

async fn set_queue_attributes(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let attrs = string_map(input, "Attributes")?;
    check_attributes(&attrs, q.fifo(), false)?;
    rmq_kind::check_queue_attributes(Kind::of(&q.attrs), &attrs)?;
    apply_attributes(caller, &q.name, &attrs, now_ms() / 1000, None).await?;
    caller.backend.queues.forget(&q.name);
    Ok(json!({}))
}

// ---- tags ----

/// SQS's tag limits: at most 50 on a queue (`existing` more than `tags` has already), keys
/// of 1–128 characters and values of at most 256.
fn check_tags(queue: &str, tags: &BTreeMap<String, String>, existing: usize) -> SqsResult<()> {
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

async fn tag_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let tags = string_map(input, "Tags")?;
    if tags.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter Tags."));
    }
    rmq_kind::check_tagging(Kind::of(&q.attrs), &tags)?;
    let mut conn = caller.backend.conn.clone();
    let current: Vec<String> = conn.hkeys(store::tags_key(&q.name)).await?;
    check_tags(&q.name, &tags, current.iter().filter(|k| !tags.contains_key(*k)).count())?;
    let pairs: Vec<(&String, &String)> = tags.iter().collect();
    let _: () = conn.hset_multiple(store::tags_key(&q.name), &pairs).await?;
    Ok(json!({}))
}

async fn untag_queue(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let keys = string_list(input, "TagKeys")?;
    if keys.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter TagKeys."));
    }
    let mut conn = caller.backend.conn.clone();
    let _: () = conn.hdel(store::tags_key(&q.name), keys).await?;
    Ok(json!({}))
}

async fn list_queue_tags(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = load_queue(caller, queue_of_url(input)?).await?;
    let mut conn = caller.backend.conn.clone();
    let tags: BTreeMap<String, String> = conn.hgetall(store::tags_key(&q.name)).await?;
    Ok(if tags.is_empty() { json!({}) } else { json!({"Tags": tags}) })
}

// ---- sending ----

/// One entry to send, checked.
struct Outgoing {
    place: Place,
    /// Of the attributes sent, the place's included: what the SDKs check the reply against.
    md5_of_attributes: Option<String>,
    group: Option<String>,
    /// The deduplication window's id (RMQ.PUSH DEDUP).
    dedup: Option<String>,
    stored: Stored,
}

fn outgoing(q: &Queue, caller: &Caller, entry: &Value) -> SqsResult<Outgoing> {
    let body = required(entry, "MessageBody")?;
    if body.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter MessageBody."));
    }
    if !message::valid_body(body) {
        return Err(SqsError::invalid_message_contents("Invalid binary character in the message body"));
    }
    let mut attrs = parse_attrs(entry, "MessageAttributes")?;
    let size = body.len() + message::check_attributes(&attrs)?;
    if size as i64 > q.num("MaximumMessageSize") {
        return Err(SqsError::invalid_parameter_value(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {} bytes.",
            q.num("MaximumMessageSize")
        )));
    }
    let sys = parse_attrs(entry, "MessageSystemAttributes")?;
    let trace = match sys.get("AWSTraceHeader") {
        Some(a) if sys.len() == 1 && a.data_type == "String" => a.string_value.clone(),
        None if sys.is_empty() => None,
        _ => return Err(SqsError::invalid_parameter_value("AWSTraceHeader (String) is the only message system attribute")),
    };
    let delay = int_field(entry, "DelaySeconds", 0, 900)?;
    let (mut group, mut dedup) = (None, None);
    if q.fifo() {
        // SQS takes a per-message DelaySeconds of 0 on a FIFO queue (the SDKs send it).
        if let Some(d) = delay.filter(|d| *d != 0) {
            return Err(SqsError::invalid_parameter_value(format!(
                "Value {d} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
            )));
        }
        group = Some(
            required(entry, "MessageGroupId")
                .map_err(|_| SqsError::missing_parameter("The request must contain the parameter MessageGroupId."))?
                .to_string(),
        );
        dedup = match str_field(entry, "MessageDeduplicationId")? {
            Some(d) => Some(d.to_string()),
            None if q.flag("ContentBasedDeduplication") => Some(hex::encode(Sha256::digest(body.as_bytes()))),
            None => {
                return Err(SqsError::invalid_parameter_value(
                    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
                ))
            }
        };
        for v in group.iter().chain(dedup.iter()) {
            if v.is_empty() || v.len() > 128 || !v.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(SqsError::invalid_parameter_value(
                    "MessageGroupId and MessageDeduplicationId are 1 to 128 printable ASCII characters",
                ));
            }
        }
    }
    let md5_of_attributes = md5s::of_attributes(&attrs);
    let place = rmq_kind::place(Kind::of(&q.attrs), q.fifo(), &mut attrs, delay, q.num("DelaySeconds"))?;
    // DeduplicationScope messageGroup: the window is the group's (neither id has a space).
    let window = match (&group, &dedup) {
        (Some(g), Some(d)) if q.attrs.get("DeduplicationScope").is_some_and(|s| s == "messageGroup") => Some(format!("{g} {d}")),
        _ => dedup.clone(),
    };
    let stored = Stored {
        id: uuid::Uuid::new_v4().to_string(),
        body: body.to_string(),
        attrs,
        sent: now_ms(),
        sender: caller.key_id.clone(),
        group: group.clone(),
        dedup,
        trace,
    };
    Ok(Outgoing { place, md5_of_attributes, group, dedup: window, stored })
}

/// Runs a pipeline of commands that change queue `queue` (one round trip); the commands'
/// replies. In durable mode (`--durable N`) a WAIT follows in the same pipeline, on a
/// dedicated connection to the queue's primary, so it covers the commands' writes; fewer than N
/// replicas confirming in time is a 503 the SDKs retry (`done` says what the primary holds
/// already: a retried SendMessage of a standard queue stores a second copy).
async fn write_pipe<T: redis::FromRedisValue>(caller: &Caller, queue: &str, mut pipe: redis::Pipeline, done: &str) -> SqsResult<Vec<T>> {
    let Some(d) = caller.backend.durable else {
        // To the queue's primary, the whole pipeline (a send's check must follow its pushes).
        return Ok(caller.backend.conn.clone().query_on_owner(queue, &pipe).await?);
    };
    pipe.cmd("WAIT").arg(d.replicas).arg(d.timeout_ms);
    // On a dedicated connection: a WAIT holds up whatever follows it on its connection.
    let Some(mut conn) = caller.backend.dedicated(std::time::Duration::from_millis(d.timeout_ms)).await? else {
        return Err(SqsError::service_unavailable("too many writes are waiting for replicas; retry"));
    };
    let mut replies: Vec<redis::Value> = conn.conn().query_on_owner(queue, &pipe).await?;
    conn.give_back();
    let confirmed = replies.pop().map(redis::from_redis_value::<u32>).transpose().map_err(redis::RedisError::from)?;
    let confirmed = confirmed.unwrap_or(0);
    if confirmed < d.replicas {
        return Err(SqsError::service_unavailable(format!(
            "{done} on the primary but only {confirmed} of {} replicas confirmed within {} ms; retry",
            d.replicas, d.timeout_ms
        )));
    }
    Ok(replies.into_iter().map(redis::from_redis_value).collect::<Result<_, _>>().map_err(redis::RedisError::from)?)
}

/// FIFO queues' deduplication window (SQS: 5 minutes).
const DEDUP_WINDOW_MS: i64 = 300_000;

/// What RMQ.PUSH with SEQUENCE answers per message: outcome, sequence number, and for a
/// duplicate the first send's NOTE (its MessageId).
type Pushed = (String, Option<u64>, Option<String>);

/// Sends checked entries in one round trip: one RMQ.PUSH per entry (entries differ in
/// delay and group), pipelined, then a check that the queue still exists (it may have been
/// deleted since it was cached). The module numbers each send (SEQUENCE: the stored
/// format's prefix and sequence number, in push order across gateways) and keeps FIFO
/// deduplication windows (DEDUP, with the MessageId as its NOTE), so a duplicate is
/// answered with the first send's MessageId and sequence number. Per entry its MessageId
/// and sequence number.
async fn push(caller: &Caller, q: &Queue, entries: &[Outgoing]) -> SqsResult<Vec<(String, u64)>> {
    let mut pipe = redis::pipe();
    let merging = Kind::of(&q.attrs).merges();
    for e in entries {
        if merging {
            crate::body_merge::push(&mut pipe, &q.name, e.place, &e.stored.body, &message::encode(&e.stored));
            continue;
        }
        let (mode, value) = e.place.mode();
        pipe.cmd("RMQ.PUSH").arg(&q.name).arg(mode).arg(value);
        if let Some(g) = &e.group {
            pipe.arg("GROUP").arg(g);
        }
        pipe.arg("SEQUENCE").arg(message::PREFIX);
        if let Some(d) = &e.dedup {
            pipe.arg("DEDUP").arg(d).arg(DEDUP_WINDOW_MS).arg("NOTE").arg(&e.stored.id);
        }
        pipe.arg("MESSAGES").arg(message::encode(&e.stored));
    }
    // After the pushes, on the same connection: DeleteQueue removes every key of the queue
    // at once, so a push it did not take along came after it, before this check, which then
    // finds the queue gone. No MULTI needed (nor its QUEUED replies).
    pipe.exists(store::meta_key(&q.name));
    let mut replies: Vec<redis::Value> = write_pipe(caller, &q.name, pipe, "the messages are stored").await?;
    if let Some(redis::Value::ServerError(e)) = replies.iter().find(|v| matches!(v, redis::Value::ServerError(_))) {
        return Err(redis::RedisError::from(e.clone()).into());
    }
    fn parse<T: redis::FromRedisValue>(v: redis::Value) -> redis::RedisResult<T> {
        redis::from_redis_value(v).map_err(redis::RedisError::from)
    }
    if replies.len() != entries.len() + 1 {
        return Err(SqsError::internal("the queue store answered the send in an unexpected shape"));
    }
    let exists: bool = parse(replies.pop().unwrap_or(redis::Value::Nil))?;
    if !exists {
        // Deleted since this gateway cached it: the pushes made keys of a queue that is
        // gone, and no new queue of the name can exist yet (DeleteQueue's tombstone), so
        // they all go again.
        let mut conn = caller.backend.conn.clone();
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("RMQ.DROP").arg(&q.name).ignore();
        pipe.del(&crate::body_merge::keys(&q.name)[..]).ignore();
        pipe.query_async::<()>(&mut conn).await?;
        caller.backend.queues.forget(&q.name);
        return Err(SqsError::queue_does_not_exist("The specified queue does not exist."));
    }
    entries
        .iter()
        .zip(replies)
        .map(|(e, r)| {
            let r: Vec<Pushed> = parse(r)?;
            Ok(match r.into_iter().next() {
                Some((_, seq, note)) => (note.unwrap_or_else(|| e.stored.id.clone()), seq.unwrap_or(0)),
                None => (e.stored.id.clone(), 0),
            })
        })
        .collect()
}

fn send_result<'a>(q: &Queue, e: &Outgoing, entry: Option<&'a str>, id: String, seq: u64) -> Sent<'a> {
    Sent {
        id: entry,
        message_id: id,
        md5_of_message_body: md5s::of_body(&e.stored.body),
        md5_of_message_attributes: e.md5_of_attributes.clone(),
        md5_of_message_system_attributes: e.stored.trace.as_ref().and_then(|t| md5s::of_attributes(&trace_attrs(t))),
        sequence_number: q.fifo().then(|| format!("{seq:020}")),
    }
}

fn trace_attrs(t: &str) -> BTreeMap<String, Attribute> {
    BTreeMap::from([(
        "AWSTraceHeader".to_string(),
        Attribute { data_type: "String".into(), string_value: Some(t.to_string()), binary_value: None },
    )])
}

async fn send_message(caller: &Caller, input: &Value) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let e = outgoing(&q, caller, input)?;
    let (id, seq) = push(caller, &q, std::slice::from_ref(&e)).await?.swap_remove(0);
    Ok(to_body(&send_result(&q, &e, None, id, seq)))
}

/// SQS's limit on a SendMessageBatch's messages together.
const MAX_BATCH_BYTES: usize = 1_048_576;

fn failed(id: &str, e: &SqsError) -> Value {
    json!({"Id": id, "SenderFault": e.sender_fault(), "Code": e.code, "Message": e.message})
}

async fn send_message_batch(caller: &Caller, input: &Value) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let entries = batch_entries(input, "SendMessageBatch")?;
    // What SQS counts: every entry's body and message attributes.
    let total: usize = entries
        .iter()
        .map(|(_, e)| {
            let body = e.get("MessageBody").and_then(Value::as_str).map_or(0, str::len);
            body + parse_attrs(e, "MessageAttributes").map_or(0, |a| message::attributes_size(&a))
        })
        .sum();
    if total > MAX_BATCH_BYTES {
        return Err(SqsError::batch_request_too_long(format!(
            "Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
        )));
    }
    let (mut ids, mut outs, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (id, e) in &entries {
        match outgoing(&q, caller, e) {
            Ok(o) => {
                ids.push(id.as_str());
                outs.push(o);
            }
            Err(err) => failures.push(failed(id, &err)),
        }
    }
    let sent = if outs.is_empty() { Vec::new() } else { push(caller, &q, &outs).await? };
    let successful = ids.iter().zip(&outs).zip(sent).map(|((id, o), (mid, seq))| send_result(&q, o, Some(id), mid, seq)).collect();
    Ok(to_body(&SentBatch { successful, failed: failures }))
}

// ---- receipt handles ----

/// The receipt handle format's version byte (docs/GATEWAY_FORMAT.md; 1 carried the message,
/// 2 named only the delivery, and is still accepted).
const HANDLE_VERSION: u8 = 3;
/// Version byte, delivery id, MessageId, MAC.
const HANDLE_LEN: usize = 1 + 8 + 16 + 16;
const V2_HANDLE_LEN: usize = 1 + 8 + 16;

/// What a receipt handle names: the delivery, and the message (its MessageId: the key of its
/// first receive's record, crate::first_receive; none in a version 2 handle).
#[derive(Debug)]
struct Named {
    delivery: u64,
    message: Option<uuid::Uuid>,
}

/// A receipt handle names one delivery: RMQ's id for it (`RMQ.POP ... IDS`, unique in the
/// queue for good) and the message's MessageId, under an HMAC by the queue's own key over
/// them and the queue's name (the key is kept in Redis, so every gateway and every restart
/// accepts it, and a forged handle is told from a stale one). 55 characters whatever the
/// message.
fn make_handle(q: &Queue, id: u64, message: &uuid::Uuid) -> String {
    let mut b = [0u8; HANDLE_LEN];
    b[0] = HANDLE_VERSION;
    b[1..9].copy_from_slice(&id.to_be_bytes());
    b[9..25].copy_from_slice(message.as_bytes());
    let mac = handle_mac(q, &b[..25]);
    b[25..].copy_from_slice(&mac);
    B64URL.encode(b)
}

fn handle_mac(q: &Queue, data: &[u8]) -> [u8; 16] {
    // HMAC takes a key of any length.
    let mut m = q.mac.get_or_init(|| <Hmac<Sha256> as KeyInit>::new_from_slice(&q.handle_key()).unwrap_or_else(|_| unreachable!())).clone();
    m.update(data);
    m.update(q.name.as_bytes());
    let full = m.finalize().into_bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// What a handle names, if it is a handle of this queue (handles of the first format, which
/// carried the message, are refused: docs/GATEWAY_FORMAT.md).
fn read_handle(q: &Queue, handle: &str) -> SqsResult<Named> {
    let invalid = || {
        SqsError::receipt_handle_is_invalid(format!(
            "The input receipt handle \"{}\" is not a valid receipt handle.",
            handle.chars().take(64).collect::<String>()
        ))
    };
    let b = B64URL.decode(handle).map_err(|_| invalid())?;
    let data_len = match (b.first(), b.len()) {
        (Some(&HANDLE_VERSION), HANDLE_LEN) => 25,
        (Some(2), V2_HANDLE_LEN) => 9,
        _ => return Err(invalid()),
    };
    let (data, mac) = b.split_at(data_len);
    let expected = handle_mac(q, data);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], mac)) {
        return Err(invalid());
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&data[1..9]);
    let message = data.get(9..25).and_then(|m| uuid::Uuid::from_slice(m).ok());
    Ok(Named { delivery: u64::from_be_bytes(id), message })
}

// ---- receiving ----

async fn receive_message(gw: &Gateway, caller: &Caller, input: &Value) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let count = int_field(input, "MaxNumberOfMessages", 1, 10)?.unwrap_or(1);
    let vt = int_field(input, "VisibilityTimeout", 0, 43_200)?.unwrap_or_else(|| q.num("VisibilityTimeout"));
    let wait = int_field(input, "WaitTimeSeconds", 0, 20)?.unwrap_or_else(|| q.num("ReceiveMessageWaitTimeSeconds"));
    let mut sys_wanted = string_list(input, "AttributeNames")?;
    sys_wanted.extend(string_list(input, "MessageSystemAttributeNames")?);
    let attr_wanted = string_list(input, "MessageAttributeNames")?;
    // A lease of 0 is not an RMQ lease: 1 ms makes the message visible again at once.
    let lease = (vt * 1000).max(1);
    let mut conn = caller.backend.conn.clone();
    let mut pop = redis::cmd("RMQ.POP");
    pop.arg(&q.name).arg("COUNT").arg(count).arg("LEASE").arg(lease).arg("IDS");
    let mut got: Vec<Delivery> = pop.query_async::<Option<Vec<Delivery>>>(&mut conn).await?.unwrap_or_default();
    if got.is_empty() && wait > 0 {
        got = long_poll(gw, caller, &q, count, lease, wait).await?;
    }
    let mut messages: Vec<Received> = got.iter().map(|(raw, d, id)| received(&q, raw, *d, *id, &sys_wanted, &attr_wanted)).collect();
    if !got.is_empty() {
        let mut pipe = redis::pipe();
        if vt == 0 {
            // Visible again at once, as SQS leaves it (a lease of 1 ms still hid it for that
            // long): each delivery ends as a ChangeMessageVisibility 0 would end it.
            for (_, _, id) in &got {
                pipe.cmd("RMQ.NACKID").arg(&q.name).arg(*id).ignore();
            }
        }
        let now = now_ms();
        let ids: Vec<uuid::Uuid> = messages.iter().map(|m| message_uuid(&m.message_id)).collect();
        for id in &ids {
            crate::first_receive::record(&mut pipe, &q.name, id, now);
        }
        let firsts: Vec<Option<String>> = pipe.query_async(&mut conn).await?;
        if wants(&sys_wanted, FIRST_RECEIVE) {
            for (m, f) in messages.iter_mut().zip(firsts) {
                m.attributes.insert(FIRST_RECEIVE, crate::first_receive::first(f, now).to_string());
            }
        }
    }
    Ok(to_body(&Receive { messages }))
}

/// A delivery as `RMQ.POP ... IDS` replies it: the stored message, its delivery count and
/// its id.
type Delivery = (Vec<u8>, i64, u64);

/// A blocking RMQ.POP on a connection of its own; answered empty when the gateway stops,
/// or when no connection frees up within the poll's wait time (past
/// --max-redis-connections polls wait their turn).
async fn long_poll(gw: &Gateway, caller: &Caller, q: &Queue, count: i64, lease: i64, wait: i64) -> SqsResult<Vec<Delivery>> {
    let _open = caller.backend.poll_started();
    let budget = std::time::Duration::from_secs(wait as u64);
    let started = std::time::Instant::now();
    let poll = async {
        let Some(mut conn) = caller.backend.dedicated(budget).await? else { return Ok(None) };
        let left = budget.saturating_sub(started.elapsed()).as_millis() as u64;
        if left == 0 {
            conn.give_back();
            return Ok(None);
        }
        let mut pop = redis::cmd("RMQ.POP");
        pop.arg(&q.name).arg("COUNT").arg(count).arg("LEASE").arg(lease).arg("BLOCK").arg(left).arg("IDS");
        let got = pop.query_async::<Option<Vec<Delivery>>>(conn.conn()).await?;
        conn.give_back();
        Ok::<_, redis::RedisError>(got)
    };
    tokio::select! {
        r = poll => Ok(r?.unwrap_or_default()),
        // Dropping the connection ends the wait on the server.
        _ = crate::server::stopped(gw.stopping.clone()) => Ok(Vec::new()),
    }
}

const FIRST_RECEIVE: &str = "ApproximateFirstReceiveTimestamp";

/// Whether a receive asked for the system attribute `name`.
fn wants(sys_wanted: &[String], name: &str) -> bool {
    sys_wanted.iter().any(|w| w == "All" || w == name)
}

/// A message's id as the handle and the first-receive record name it: the MessageId (a
/// UUID, as the gateway makes them and reads foreign messages'), else a UUID made from it.
fn message_uuid(id: &str) -> uuid::Uuid {
    uuid::Uuid::parse_str(id).unwrap_or_else(|_| {
        let d = md5::Digest::finalize(<md5::Md5 as md5::Digest>::new_with_prefix(id.as_bytes()));
        uuid::Builder::from_md5_bytes(d.into()).into_uuid()
    })
}

fn received(q: &Queue, raw: &[u8], deliveries: i64, id: u64, sys_wanted: &[String], attr_wanted: &[String]) -> Received {
    let read = message::decode(raw);
    let s = read.stored;
    let mut sys = BTreeMap::new();
    let mut put = |name: &'static str, v: String| {
        if wants(sys_wanted, name) {
            sys.insert(name, v);
        }
    };
    put("SenderId", s.sender);
    put("SentTimestamp", s.sent.to_string());
    put("ApproximateReceiveCount", deliveries.to_string());
    if let Some(g) = s.group {
        put("MessageGroupId", g);
    }
    if let Some(d) = s.dedup {
        put("MessageDeduplicationId", d);
    }
    if let (true, Some(seq)) = (q.fifo(), read.seq) {
        put("SequenceNumber", format!("{seq:020}"));
    }
    if let Some(t) = s.trace {
        put("AWSTraceHeader", t);
    }
    let attrs: BTreeMap<String, Attribute> = s
        .attrs
        .into_iter()
        .filter(|(name, _)| {
            attr_wanted.iter().any(|w| w == "All" || w == "*" || w == name || w.strip_suffix(".*").is_some_and(|p| name.starts_with(p)))
        })
        .collect();
    Received {
        receipt_handle: make_handle(q, id, &message_uuid(&s.id)),
        md5_of_body: md5s::of_body(&s.body),
        message_id: s.id,
        body: s.body,
        attributes: sys,
        md5_of_message_attributes: md5s::of_attributes(&attrs),
        message_attributes: attrs,
    }
}

// ---- ending and extending deliveries ----

/// Ends the deliveries the handles name (already read), in one RMQ.ACKID, and deletes their
/// messages' first-receive records; a handle of an ended delivery ends nothing.
async fn delete_deliveries(caller: &Caller, q: &Queue, named: &[Named]) -> SqsResult<()> {
    if named.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    pipe.cmd("RMQ.ACKID").arg(&q.name).arg(named.iter().map(|n| n.delivery).collect::<Vec<_>>());
    let records: Vec<String> = named.iter().filter_map(|n| n.message.as_ref()).map(crate::first_receive::field).collect();
    if !records.is_empty() {
        pipe.hdel(crate::first_receive::key(&q.name), records).ignore();
    }
    let _: Vec<i64> = write_pipe(caller, &q.name, pipe, "the deliveries are ended").await?;
    Ok(())
}

async fn delete_message(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let named = read_handle(&q, required(input, "ReceiptHandle")?)?;
    delete_deliveries(caller, &q, &[named]).await?;
    Ok(json!({}))
}

async fn delete_message_batch(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let entries = batch_entries(input, "DeleteMessageBatch")?;
    let (mut ids, mut named, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (id, e) in entries {
        match required(e, "ReceiptHandle").and_then(|h| read_handle(&q, h)) {
            Ok(delivery) => {
                ids.push(json!({"Id": id}));
                named.push(delivery);
            }
            Err(err) => failures.push(failed(&id, &err)),
        }
    }
    delete_deliveries(caller, &q, &named).await?;
    Ok(json!({"Successful": ids, "Failed": failures}))
}

/// Sets the named delivery's visibility: a timeout > 0 extends its lease (RMQ.EXTENDID), 0
/// makes it visible now (RMQ.NACKID); MessageNotInflight when that delivery has ended.
async fn change_one(caller: &Caller, q: &Queue, handle: &str, timeout: i64) -> SqsResult<()> {
    let id = read_handle(q, handle)?.delivery;
    let mut conn = caller.backend.conn.clone();
    let mut cmd = redis::cmd(if timeout == 0 { "RMQ.NACKID" } else { "RMQ.EXTENDID" });
    cmd.arg(&q.name).arg(id);
    if timeout > 0 {
        cmd.arg(timeout * 1000);
    }
    let changed: redis::Value = cmd.query_async(&mut conn).await?;
    if changed == redis::Value::Nil {
        Err(SqsError::message_not_inflight("The message referred to isn't in flight."))
    } else {
        Ok(())
    }
}

fn visibility_timeout(v: &Value) -> SqsResult<i64> {
    int_field(v, "VisibilityTimeout", 0, 43_200)?
        .ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter VisibilityTimeout."))
}

async fn change_visibility(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let t = visibility_timeout(input)?;
    change_one(caller, &q, required(input, "ReceiptHandle")?, t).await?;
    Ok(json!({}))
}

async fn change_visibility_batch(caller: &Caller, input: &Value) -> SqsResult<Value> {
    let q = cached_queue(caller, queue_of_url(input)?).await?;
    let entries = batch_entries(input, "ChangeMessageVisibilityBatch")?;
    let (mut ok, mut failures) = (Vec::new(), Vec::new());
    for (id, e) in entries {
        let r = match (required(e, "ReceiptHandle"), visibility_timeout(e)) {
            (Ok(h), Ok(t)) => change_one(caller, &q, h, t).await,
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        match r {
            Ok(()) => ok.push(json!({"Id": id})),
            Err(err) if err.sender_fault() => failures.push(failed(&id, &err)),
            Err(err) => return Err(err),
        }
    }
    Ok(json!({"Successful": ok, "Failed": failures}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Queue {
        Queue::new("q1".into(), HashMap::from([("hkey".to_string(), "00112233".to_string())]))
    }

    #[test]
    fn handles_round_trip_and_refuse_forgeries() {
        let q = queue();
        let m = uuid::Uuid::from_bytes([9; 16]);
        let h = make_handle(&q, 98_140_331_957_248, &m);
        assert_eq!(h.len(), 55, "short, whatever the message");
        let named = read_handle(&q, &h).unwrap();
        assert_eq!((named.delivery, named.message), (98_140_331_957_248, Some(m)));
        let mut other = queue();
        other.attrs.insert("hkey".into(), "44".into());
        assert_eq!(read_handle(&other, &h).unwrap_err().code, "ReceiptHandleIsInvalid");
        let renamed = Queue::new("q2".into(), queue().attrs);
        assert_eq!(read_handle(&renamed, &h).unwrap_err().code, "ReceiptHandleIsInvalid", "the MAC covers the queue's name");
        let mut raw = B64URL.decode(&h).unwrap();
        raw[1] ^= 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&raw)).unwrap_err().code, "ReceiptHandleIsInvalid");
        raw[1] ^= 1;
        raw[0] = 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&raw)).unwrap_err().code, "ReceiptHandleIsInvalid", "another version");
        assert_eq!(read_handle(&q, &h[..54]).unwrap_err().code, "ReceiptHandleIsInvalid");
        // A version 2 handle (delivery id and MAC) still names its delivery.
        let mut v2 = vec![2u8];
        v2.extend_from_slice(&7u64.to_be_bytes());
        let mac = handle_mac(&q, &v2);
        v2.extend_from_slice(&mac);
        let named = read_handle(&q, &B64URL.encode(&v2)).unwrap();
        assert_eq!((named.delivery, named.message), (7, None));
        v2[3] ^= 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&v2)).unwrap_err().code, "ReceiptHandleIsInvalid");
        assert_eq!(read_handle(&q, "not base64!").unwrap_err().code, "ReceiptHandleIsInvalid");
        assert_eq!(read_handle(&q, "").unwrap_err().code, "ReceiptHandleIsInvalid");
    }
}
