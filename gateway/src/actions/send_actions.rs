//! SendMessage and SendMessageBatch: each entry checked as SQS checks it, then every entry
//! pushed in one round trip.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::caller::{cached_queue, now_ms, Caller};
use crate::errors::{SqsError, SqsResult};
use crate::gateway_keys as keys;
use crate::md5s;
use crate::message::{self, Attribute, Stored};
use crate::message_requests::{Message, SendMessage, SendMessageBatch};
use crate::queue::Queue;
use crate::replies::{to_body, Failure, Sent, SentBatch};
use crate::rmq_client::{self, Pushed};
use crate::rmq_kind::{self, Kind, Place};

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

fn outgoing(q: &Queue, caller: &Caller, m: Message) -> SqsResult<Outgoing> {
    let body = m.body.ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter MessageBody."))?;
    if body.is_empty() {
        return Err(SqsError::missing_parameter("The request must contain the parameter MessageBody."));
    }
    if !message::valid_body(&body) {
        return Err(SqsError::invalid_message_contents("Invalid binary character in the message body"));
    }
    let mut attrs = m.attributes.0;
    let size = body.len() + message::check_attributes(&attrs)?;
    if size as i64 > q.num("MaximumMessageSize") {
        return Err(SqsError::invalid_parameter_value(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {} bytes.",
            q.num("MaximumMessageSize")
        )));
    }
    let sys = m.system_attributes.0;
    let trace = match sys.get("AWSTraceHeader") {
        Some(a) if sys.len() == 1 && a.data_type == "String" => a.string_value.clone(),
        None if sys.is_empty() => None,
        _ => return Err(SqsError::invalid_parameter_value("AWSTraceHeader (String) is the only message system attribute")),
    };
    let delay = m.delay_seconds;
    let (mut group, mut dedup) = (None, None);
    if q.fifo() {
        // SQS takes a per-message DelaySeconds of 0 on a FIFO queue (the SDKs send it).
        if let Some(d) = delay.filter(|d| *d != 0) {
            return Err(SqsError::invalid_parameter_value(format!(
                "Value {d} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
            )));
        }
        group = Some(m.group.ok_or_else(|| SqsError::missing_parameter("The request must contain the parameter MessageGroupId."))?);
        dedup = match m.dedup {
            Some(d) => Some(d),
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
        body,
        attrs,
        sent: now_ms(),
        sender: caller.key_id.clone(),
        group: group.clone(),
        dedup,
        trace,
    };
    Ok(Outgoing { place, md5_of_attributes, group, dedup: window, stored })
}

/// FIFO queues' deduplication window (SQS: 5 minutes).
const DEDUP_WINDOW_MS: i64 = 300_000;

/// Sends checked entries in one round trip: one RMQ.PUSH per run of entries in one place
/// and group without deduplication (a standard queue's batch is usually one run; each FIFO
/// entry has its own deduplication id), pipelined, then a check that the queue still exists
/// (it may have been deleted since it was cached). The module numbers each message
/// (SEQUENCE: the stored format's prefix and sequence number, in push order across gateways)
/// and keeps FIFO deduplication windows (DEDUP, with the MessageId as its NOTE), so a
/// duplicate is answered with the first send's MessageId and sequence number. Per entry its
/// MessageId and sequence number.
async fn push(caller: &Caller, q: &Queue, entries: &[Outgoing]) -> SqsResult<Vec<(String, u64)>> {
    let mut pipe = redis::pipe();
    let runs = if Kind::of(&q.attrs).merges() {
        // One script per send: it merges by body (rmq_client::pipe_merging_push).
        for e in entries {
            rmq_client::pipe_merging_push(&mut pipe, &q.name, e.place, &e.stored.body, &message::encode(&e.stored));
        }
        vec![1; entries.len()]
    } else {
        let runs = runs(entries);
        let mut rest = entries;
        for n in &runs {
            let (run, after) = rest.split_at(*n);
            rest = after;
            let json: Vec<String> = run.iter().map(|e| message::encode(&e.stored)).collect();
            let e = &run[0];
            let send = rmq_client::Send {
                place: e.place,
                group: e.group.as_deref(),
                dedup: e.dedup.as_deref().map(|d| (d, DEDUP_WINDOW_MS, e.stored.id.as_str())),
                json: &json,
            };
            rmq_client::pipe_push(&mut pipe, &q.name, &send);
        }
        runs
    };
    // After the pushes, on the same connection: DeleteQueue removes every key of the queue
    // at once, so a push it did not take along came after it, before this check, which then
    // finds the queue gone. No MULTI needed (nor its QUEUED replies).
    pipe.exists(keys::meta(&q.name));
    let mut replies: Vec<redis::Value> = rmq_client::write(&caller.backend, &q.name, pipe, "the messages are stored").await?;
    if let Some(redis::Value::ServerError(e)) = replies.iter().find(|v| matches!(v, redis::Value::ServerError(_))) {
        return Err(redis::RedisError::from(e.clone()).into());
    }
    fn parse<T: redis::FromRedisValue>(v: redis::Value) -> redis::RedisResult<T> {
        redis::from_redis_value(v).map_err(redis::RedisError::from)
    }
    let shape = || SqsError::internal("the queue store answered the send in an unexpected shape");
    if replies.len() != runs.len() + 1 {
        return Err(shape());
    }
    let exists: bool = parse(replies.pop().unwrap_or(redis::Value::Nil))?;
    if !exists {
        // Deleted since this gateway cached it: the pushes made keys of a queue that is
        // gone, and no new queue of the name can exist yet (DeleteQueue's tombstone), so
        // they all go again.
        let mut conn = caller.backend.conn.clone();
        let mut pipe = redis::pipe();
        pipe.atomic();
        rmq_client::pipe_drop(&mut pipe, &q.name);
        pipe.del(&keys::body_merge(&q.name)[..]).ignore();
        pipe.query_async::<()>(&mut conn).await?;
        caller.backend.queues.forget(&q.name);
        return Err(SqsError::queue_does_not_exist("The specified queue does not exist."));
    }
    let mut pushed = Vec::with_capacity(entries.len());
    for (n, r) in runs.iter().zip(replies) {
        let r: Vec<Pushed> = parse(r)?;
        if r.len() != *n {
            return Err(shape());
        }
        pushed.extend(r);
    }
    Ok(entries.iter().zip(pushed).map(|(e, (_, seq, note))| (note.unwrap_or_else(|| e.stored.id.clone()), seq.unwrap_or(0))).collect())
}

/// The lengths of the runs of `entries` that one RMQ.PUSH each sends: neighbours in one
/// place and group, without deduplication (a window is per push: each such entry alone).
fn runs(entries: &[Outgoing]) -> Vec<usize> {
    let mut runs: Vec<usize> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let joins = i > 0 && {
            let before = &entries[i - 1];
            e.dedup.is_none() && before.dedup.is_none() && e.place == before.place && e.group == before.group
        };
        match runs.last_mut() {
            Some(n) if joins => *n += 1,
            _ => runs.push(1),
        }
    }
    runs
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

pub async fn send_message(caller: &Caller, request: SendMessage) -> SqsResult<Vec<u8>> {
    let (queue, m) = request.split();
    let q = cached_queue(caller, queue.0).await?;
    let e = outgoing(&q, caller, m)?;
    let (id, seq) = push(caller, &q, std::slice::from_ref(&e)).await?.swap_remove(0);
    Ok(to_body(&send_result(&q, &e, None, id, seq)))
}

/// SQS's limit on a SendMessageBatch's messages together.
const MAX_BATCH_BYTES: usize = 1_048_576;

pub async fn send_message_batch(caller: &Caller, request: SendMessageBatch) -> SqsResult<Vec<u8>> {
    let q = cached_queue(caller, request.queue_url.0).await?;
    let entries: Vec<(String, Message)> = request.entries.0.into_iter().map(|e| e.split()).collect();
    // What SQS counts: every entry's body and message attributes.
    let total: usize =
        entries.iter().map(|(_, m)| m.body.as_ref().map_or(0, String::len) + message::attributes_size(&m.attributes.0)).sum();
    if total > MAX_BATCH_BYTES {
        return Err(SqsError::batch_request_too_long(format!(
            "Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
        )));
    }
    let (mut ids, mut outs, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (id, m) in entries {
        match outgoing(&q, caller, m) {
            Ok(o) => {
                ids.push(id);
                outs.push(o);
            }
            Err(err) => failures.push(Failure::of(id, &err)),
        }
    }
    let sent = if outs.is_empty() { Vec::new() } else { push(caller, &q, &outs).await? };
    let successful = ids.iter().zip(&outs).zip(sent).map(|((id, o), (mid, seq))| send_result(&q, o, Some(id.as_str()), mid, seq)).collect();
    Ok(to_body(&SentBatch { successful, failed: failures }))
}
