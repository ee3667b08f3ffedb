//! Queue attributes: how the settable ones are stored (with the module's policy and the
//! redrive entry they imply; SQS's checks of them: crate::queue_attribute_checks),
//! GetQueueAttributes and SetQueueAttributes.

use std::collections::BTreeMap;

use redis::AsyncCommands;

use super::caller::{check_writable, load_queue, now_ms, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::gateway_state::Gateway;
use crate::queue_attribute_checks::{check_attributes, redrive_policy, removable, Policy};
use crate::queue_replies::QueueAttributes;
use crate::queue_requests::{GetQueueAttributes, SetQueueAttributes};
use crate::replies::{to_body, Done};
use crate::rmq_client;
use crate::rmq_kind::{self, Kind, KIND_ATTRIBUTE};

/// The RMQ `retries` a queue's redrive policy (or its absence) implies.
fn retries_of(policy: &Option<Policy>) -> i64 {
    policy.as_ref().map_or(crate::redrive::NO_REDRIVE_RETRIES, |p| p.max_receive_count - 1)
}

/// What a creation writes besides the attributes: the receipt-handle key and the tags.
pub struct Creation<'a> {
    pub hkey: String,
    pub tags: &'a BTreeMap<String, String>,
}

/// Stores settable attributes — on creation with the queue's other keys, its module policy
/// and its redrive entry; later the policy and entry when RedrivePolicy changes — the
/// queue's keys in one MULTI, so a refused write (an ACL) leaves nothing half made.
pub async fn apply_attributes(
    caller: &Caller,
    name: &str,
    attrs: &BTreeMap<String, String>,
    now_s: i64,
    creation: Option<Creation<'_>>,
) -> SqsResult<()> {
    let redrive = match attrs.get("RedrivePolicy") {
        Some(v) => Some(redrive_policy(v)?),
        None => None,
    };
    if let Some(Some(p)) = &redrive {
        let target = load_queue(caller, p.target.clone()).await.map_err(|e| match e.code {
            "QueueDoesNotExist" => SqsError::invalid_parameter_value(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target does not exist.",
            ),
            _ => e,
        })?;
        // Its dead letters will be pushed there in the caller's name.
        check_writable(caller, &target.name).await?;
        if target.fifo() != name.ends_with(".fifo") || target.name == name {
            return Err(SqsError::invalid_parameter_value(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target must be another queue of the same type.",
            ));
        }
    }
    let key = keys::meta(name);
    let mut pipe = redis::pipe();
    pipe.atomic();
    if let Some(c) = &creation {
        // HSETNX: of two concurrent creations, both keep the first one's key and time.
        pipe.hset_nx(&key, "hkey", &c.hkey).ignore().hset_nx(&key, "CreatedTimestamp", now_s).ignore();
        if !c.tags.is_empty() {
            let pairs: Vec<(&String, &String)> = c.tags.iter().collect();
            pipe.hset_multiple(keys::tags(name), &pairs).ignore();
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
        rmq_client::pipe_set_retries(&mut pipe, name, retries_of(&policy));
        redrive_entry = Some(policy);
    }
    let mut conn = caller.backend.conn.clone();
    // The global source list lives in another cluster slot than the queue, so it is written
    // on its own, and only by queues that have (or had) a policy: an entry before the MULTI
    // (a user who may not write it is refused before anything is made; an entry left by a
    // failed MULTI names a queue with nothing dead), its removal after.
    if let Some(Some(p)) = &redrive_entry {
        let _: () = conn.hset(keys::REDRIVE_SOURCES, name, &p.target).await?;
    }
    pipe.query_async::<()>(&mut conn).await?;
    if let Some(None) = &redrive_entry {
        if creation.is_none() {
            let _: () = conn.hdel(keys::REDRIVE_SOURCES, name).await?;
        }
    }
    Ok(())
}

pub async fn get_queue_attributes(gw: &Gateway, caller: &Caller, r: GetQueueAttributes) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let wanted = r.attribute_names.0;
    let info = rmq_client::info(&mut caller.backend.conn.clone(), &q.name).await?;
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
    for w in &wanted {
        if w != "All" && !all.contains_key(w) && !is_known_attribute(w) {
            return Err(SqsError::invalid_attribute_name(format!("Unknown Attribute {w}.")));
        }
    }
    all.retain(|k, _| all_wanted || wanted.contains(k));
    Ok(to_body(&QueueAttributes { attributes: all }))
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

pub async fn set_queue_attributes(caller: &Caller, r: SetQueueAttributes) -> SqsResult<Vec<u8>> {
    let q = load_queue(caller, r.queue_url.0).await?;
    let attrs = r.attributes.0;
    check_attributes(&attrs, q.fifo(), false)?;
    rmq_kind::check_queue_attributes(Kind::of(&q.attrs), &attrs)?;
    apply_attributes(caller, &q.name, &attrs, now_ms() / 1000, None).await?;
    caller.backend.queues.forget(&q.name);
    Ok(to_body(&Done {}))
}
